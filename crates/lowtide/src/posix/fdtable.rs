//! The descriptor table apart from the open files it names, as Linux keeps them
//! (`struct fdtable` of `struct file *`, each file with its reference count
//! `f_count`).
//!
//! A call that may sleep holds its own reference to the file for as long as it
//! runs (`fdget` at the syscall's entry, `fdput` at its exit, in a process of more
//! than one thread), so `close(2)` from another thread only takes the descriptor
//! out of the table (`file_close_fd`): the file lives on, and the sleeping call
//! goes on as if nothing happened. The file is released (`__fput`: its epoll
//! items go, `eventpoll_release`; then `sock_close` → `inet_release` →
//! `tcp_close`) when its last reference drops, at the close or at that call's
//! `fdput`. [`Host::fdget`] gives such a reference as a descriptor of its own
//! (negative, never one `socket`/`accept` hands out) that names the file until
//! [`Host::fdput`].

use super::{Errno, Fd, File, Host, SockState};
use crate::socket::SocketHandle;
use crate::time::Instant;
use std::collections::BTreeMap;

/// An open file's identity (`struct file *`): an epoll item is keyed by it and
/// its descriptor number (`struct epoll_filefd`).
pub(crate) type FileId = u64;

/// The descriptors of the calls in progress count up from here: negative, so that
/// no descriptor `alloc_fd` hands out (from `fd_base`, at least 0) is one.
const PIN_BASE: Fd = i32::MIN;

/// An open file and its references: its descriptors and the calls that hold it.
struct Open {
    file: File,
    refs: u32,
}

/// Descriptors (the user's and those of calls in progress) to open files.
#[derive(Default)]
pub(crate) struct FdTable {
    fds: BTreeMap<Fd, FileId>,
    open: BTreeMap<FileId, Open>,
    next_id: FileId,
}

impl FdTable {
    pub(crate) fn id(&self, fd: Fd) -> Option<FileId> {
        self.fds.get(&fd).copied()
    }

    pub(crate) fn get(&self, fd: &Fd) -> Option<&File> {
        self.open.get(&self.id(*fd)?).map(|o| &o.file)
    }

    pub(crate) fn get_mut(&mut self, fd: &Fd) -> Option<&mut File> {
        let id = self.id(*fd)?;
        self.open.get_mut(&id).map(|o| &mut o.file)
    }

    pub(crate) fn contains_key(&self, fd: &Fd) -> bool {
        self.fds.contains_key(fd)
    }

    pub(crate) fn by_id_mut(&mut self, id: FileId) -> Option<&mut File> {
        self.open.get_mut(&id).map(|o| &mut o.file)
    }

    /// Every open file once, whatever its descriptors.
    pub(crate) fn files(&self) -> impl Iterator<Item = (FileId, &File)> {
        self.open.iter().map(|(id, o)| (*id, &o.file))
    }

    pub(crate) fn files_mut(&mut self) -> impl Iterator<Item = &mut File> {
        self.open.values_mut().map(|o| &mut o.file)
    }

    /// A descriptor of file `id`: `fd` if it still names it, else any other
    /// (a call's own reference, after the user closed `fd`).
    pub(crate) fn fd_of(&self, id: FileId, fd: Fd) -> Option<Fd> {
        if self.id(fd) == Some(id) {
            return Some(fd);
        }
        self.fds.iter().find(|(_, i)| **i == id).map(|(f, _)| *f)
    }

    /// A new open file at descriptor `fd` (free), with that one reference.
    pub(crate) fn install(&mut self, fd: Fd, file: File) {
        self.next_id += 1;
        self.open.insert(self.next_id, Open { file, refs: 1 });
        self.fds.insert(fd, self.next_id);
    }

    /// Another reference to `fd`'s file, as a descriptor of its own.
    fn pin(&mut self, fd: Fd) -> Option<Fd> {
        let id = self.id(fd)?;
        let mut pin = PIN_BASE;
        while self.fds.contains_key(&pin) {
            pin += 1;
        }
        self.fds.insert(pin, id);
        self.open.get_mut(&id).expect("named").refs += 1;
        Some(pin)
    }

    /// Takes `fd` out of the table and drops its reference: the file, when that
    /// was the last one.
    fn remove(&mut self, fd: Fd) -> Option<(FileId, Option<File>)> {
        let id = self.fds.remove(&fd)?;
        let o = self.open.get_mut(&id).expect("named");
        o.refs -= 1;
        let last = (o.refs == 0).then(|| self.open.remove(&id).expect("named").file);
        Some((id, last))
    }
}

/// What a caller that blocks waits for once a socket is released with
/// `SO_LINGER` on and a positive time (see [`Host::close_linger`]).
pub type LingerWait = Option<(SocketHandle, Option<core::time::Duration>)>;

impl Host {
    /// `fdget` of a call that may sleep: a reference to `fd`'s file, as a
    /// descriptor of its own that names the file until [`Host::fdput`], whether or
    /// not `fd` is closed meanwhile. Its number is negative: it is no descriptor
    /// the user was given. `EBADF` when `fd` is none.
    pub fn fdget(&mut self, fd: Fd) -> Result<Fd, Errno> {
        self.files.pin(fd).ok_or(Errno(super::errno::EBADF))
    }

    /// `fdput` of a reference [`Host::fdget`] gave: the last one releases the file
    /// as a `close` would (`__fput`, which Linux runs before the call returns to
    /// user space), and then says what a blocking caller waits for (the
    /// `SO_LINGER` time, as [`Host::close_linger`], then [`Host::close_linger_done`]).
    pub fn fdput(&mut self, now: Instant, pin: Fd) -> Result<LingerWait, Errno> {
        self.close_linger(now, pin)
    }

    /// `close(2)` past `close_linger`'s look at `SO_LINGER`: the descriptor leaves
    /// the table (`file_close_fd`); the file is released only if that was its
    /// last reference. True when it was.
    pub(super) fn close_fd(&mut self, now: Instant, fd: Fd) -> Result<bool, Errno> {
        let (id, last) = self.files.remove(fd).ok_or(Errno(super::errno::EBADF))?;
        let Some(f) = last else {
            return Ok(false);
        };
        self.release(now, id, f)?;
        Ok(true)
    }

    /// `__fput` of the socket, pipe end or epoll instance `f`: `eventpoll_release`
    /// takes it out of every epoll set, then its `release`; a connection finishes
    /// in the background (FIN after the queued data; RST if unread data remains or
    /// with `SO_LINGER` 0, as `tcp_close`).
    fn release(&mut self, now: Instant, id: FileId, f: File) -> Result<(), Errno> {
        for f in self.files.files_mut() {
            if let File::Epoll(ep) = f {
                ep.forget(id);
            }
        }
        let s = match f {
            File::Socket(s) => {
                // inet_release of a socket holding its bound port: inet_put_port.
                if let (true, Some(b)) = (s.held, s.bound) {
                    self.stack.bhash_release(b.port());
                }
                s
            }
            File::Pipe(end) => {
                self.pipe_close(end);
                return Ok(());
            }
            File::Epoll(_) => return Ok(()),
        };
        let Some(h) = s.handle() else {
            return Ok(());
        };
        self.by_handle.remove(&h);
        // tcp_close: "SOCK_LINGER && !sk_lingertime" aborts (after the unread-data check).
        let linger0 = s.linger.on && s.linger.is_zero();
        let r = match s.state {
            SockState::Conn { .. } if linger0 => self.stack.abort(now, h),
            // sk_stream_wait_close comes before adjudge_to_death: the caller that
            // waits says when it ends (Host::close_linger_done).
            SockState::Conn { .. } if s.linger.on => self.stack.close_lingering(now, h),
            _ => self.stack.close(now, h),
        };
        self.sync_events();
        r.map_err(Errno::from)
    }

    /// Files `h` wakes: the socket whose connection or listener it is.
    pub(super) fn bind_handle(&mut self, h: SocketHandle, fd: Fd) {
        if let Some(id) = self.files.id(fd) {
            self.by_handle.insert(h, id);
        }
    }
}
