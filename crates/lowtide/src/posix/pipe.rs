//! `pipe(2)` and `splice(2)` between pipes and the host's TCP sockets (fs/pipe.c,
//! fs/splice.c, tcp.c `tcp_splice_read`, `splice_to_socket`).
//!
//! A pipe holds at most `PIPE_DEF_BUFFERS` (16) buffers of at most a page each:
//! `write(2)` appends to a page that has room (`PIPE_BUF_FLAG_CAN_MERGE`), else
//! starts pages; `read(2)` takes from the oldest. A splice from a socket reads the
//! receive queue as `tcp_read_sock` does (stopping at the urgent mark for good) into
//! pages of the pipe; lowtide packs them full where Linux gives each piece of an
//! skb a buffer of its own. A splice into a socket sends what the pipe holds as one
//! `sendmsg` (copied, where Linux lends the pages with `MSG_SPLICE_PAGES`), with
//! `MSG_MORE` for `SPLICE_F_MORE`.

use super::consts::*;
use super::{err, Errno, Fd, File, Host, SockState};
use crate::socket::{SendFlags, SocketError};
use crate::time::Instant;
use std::collections::VecDeque;

/// `PIPE_DEF_BUFFERS`: the buffers of a new pipe.
pub const PIPE_DEF_BUFFERS: usize = 16;
/// `PAGE_SIZE`: the most one pipe buffer holds.
pub const PIPE_PAGE: usize = 4096;
/// `SPLICE_F_NONBLOCK`: do not wait on the pipe.
pub const SPLICE_F_NONBLOCK: u32 = 0x02;
/// `SPLICE_F_MORE`: more data follows (`MSG_MORE` into a socket).
pub const SPLICE_F_MORE: u32 = 0x04;
/// `SPLICE_F_ALL`: every flag `splice(2)` takes (`MOVE | NONBLOCK | MORE | GIFT`).
pub const SPLICE_F_ALL: u32 = 0x0f;

/// One end of a pipe as a descriptor.
#[derive(Debug)]
pub(crate) struct PipeEnd {
    /// The pipe, in [`Host`]'s pipe table.
    pub id: u32,
    /// The write end (`O_WRONLY`), else the read end.
    pub write: bool,
    /// `O_NONBLOCK`.
    pub nonblock: bool,
}

/// `struct pipe_inode_info`: its buffers and whether each end is still open.
#[derive(Debug, Default)]
pub(crate) struct Pipe {
    bufs: VecDeque<Vec<u8>>,
    readers: bool,
    writers: bool,
}

impl Pipe {
    fn full(&self) -> bool {
        self.bufs.len() >= PIPE_DEF_BUFFERS
    }

    /// Bytes the free buffers (and the last one's room) take.
    fn room(&self) -> usize {
        let tail = self.bufs.back().map_or(0, |b| PIPE_PAGE - b.len());
        tail + (PIPE_DEF_BUFFERS - self.bufs.len()) * PIPE_PAGE
    }

    /// Appends `data` to the last page while it has room, then new pages while
    /// buffers are free; returns how much was taken.
    fn push(&mut self, mut data: &[u8], merge: bool) -> usize {
        let total = data.len();
        if let Some(last) = self.bufs.back_mut().filter(|_| merge) {
            let n = data.len().min(PIPE_PAGE - last.len());
            last.extend_from_slice(&data[..n]);
            data = &data[n..];
        }
        while !data.is_empty() && !self.full() {
            let n = data.len().min(PIPE_PAGE);
            self.bufs.push_back(data[..n].to_vec());
            data = &data[n..];
        }
        total - data.len()
    }

    /// Takes up to `max` bytes from the oldest buffers.
    fn take(&mut self, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(front) = self.bufs.front_mut() else {
                break;
            };
            let n = front.len().min(max - out.len());
            out.extend(front.drain(..n));
            if front.is_empty() {
                self.bufs.pop_front();
            }
        }
        out
    }
}

/// What a `splice(2)` did, for a caller that may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spliced {
    /// Bytes moved (0: end of stream, or a socket stopped at its urgent mark).
    Bytes(usize),
    /// A blocking splice would sleep here (no data, or no room in the pipe): wait
    /// for a wakeup and call again.
    Wait,
}

impl Host {
    /// `pipe2(2)`: the read end and the write end (`O_NONBLOCK` in `flags` makes
    /// both non-blocking).
    pub fn pipe(&mut self, flags: i32) -> Result<(Fd, Fd), Errno> {
        let id = self.next_pipe;
        self.next_pipe += 1;
        let nonblock = flags & O_NONBLOCK != 0;
        self.pipes.insert(
            id,
            Pipe {
                readers: true,
                writers: true,
                ..Pipe::default()
            },
        );
        let end = |write| {
            File::Pipe(PipeEnd {
                id,
                write,
                nonblock,
            })
        };
        let r = self.alloc_fd(end(false));
        let w = self.alloc_fd(end(true));
        Ok((r, w))
    }

    fn pipe_end(&self, fd: Fd) -> Option<&PipeEnd> {
        match self.files.get(&fd) {
            Some(File::Pipe(p)) => Some(p),
            _ => None,
        }
    }

    /// Whether `fd` is one end of a pipe.
    pub fn is_pipe(&self, fd: Fd) -> bool {
        self.pipe_end(fd).is_some()
    }

    /// `pipe_read`: the oldest bytes; 0 once the write end is closed; `EAGAIN`
    /// when empty (a blocking reader waits); `EBADF` on the write end.
    pub(crate) fn pipe_read(&mut self, fd: Fd, buf: &mut [u8]) -> Result<usize, Errno> {
        let end = self.pipe_end(fd).ok_or(Errno(errno::EBADF))?;
        if end.write {
            return err(errno::EBADF);
        }
        let id = end.id;
        let p = self.pipes.get_mut(&id).expect("an open end keeps its pipe");
        if buf.is_empty() {
            return Ok(0);
        }
        if p.bufs.is_empty() {
            return if p.writers { err(errno::EAGAIN) } else { Ok(0) };
        }
        let got = p.take(buf.len());
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }

    /// `pipe_write`: as much as the buffers take; `EPIPE` with no reader left;
    /// `EAGAIN` when full (a blocking writer waits for the rest).
    pub(crate) fn pipe_write(&mut self, fd: Fd, data: &[u8]) -> Result<usize, Errno> {
        let end = self.pipe_end(fd).ok_or(Errno(errno::EBADF))?;
        if !end.write {
            return err(errno::EBADF);
        }
        let id = end.id;
        let p = self.pipes.get_mut(&id).expect("an open end keeps its pipe");
        if !p.readers {
            return err(errno::EPIPE);
        }
        if data.is_empty() {
            return Ok(0);
        }
        // pipe_write merges only the part beyond whole pages into the last page.
        let head = data.len() % PIPE_PAGE;
        let mut n = 0;
        if head > 0 && p.bufs.back().is_some_and(|b| b.len() + head <= PIPE_PAGE) {
            n = p.push(&data[..head], true);
        }
        n += p.push(&data[n..], false);
        match n {
            0 => err(errno::EAGAIN),
            n => Ok(n),
        }
    }

    /// `pipe_poll`: readable with data or once the writers left (`POLLHUP`),
    /// writable with a free buffer, `POLLERR` on a write end without readers.
    pub(crate) fn pipe_poll(&self, fd: Fd) -> Option<u32> {
        let end = self.pipe_end(fd)?;
        let p = &self.pipes[&end.id];
        let mut mask = 0;
        if end.write {
            if !p.full() {
                mask |= POLLOUT | POLLWRNORM;
            }
            if !p.readers {
                mask |= POLLERR;
            }
        } else {
            if !p.bufs.is_empty() {
                mask |= POLLIN | POLLRDNORM;
            }
            if !p.writers {
                mask |= POLLHUP;
            }
        }
        Some(mask)
    }

    /// `close(2)` of a pipe end: the pipe goes once both ends are closed.
    pub(crate) fn pipe_close(&mut self, end: PipeEnd) {
        let Some(p) = self.pipes.get_mut(&end.id) else {
            return;
        };
        match end.write {
            true => p.writers = false,
            false => p.readers = false,
        }
        if !p.readers && !p.writers {
            self.pipes.remove(&end.id);
        }
    }

    /// `fcntl(F_SETFL)` on a pipe end.
    pub(crate) fn pipe_setfl(&mut self, fd: Fd, flags: i32) -> bool {
        match self.files.get_mut(&fd) {
            Some(File::Pipe(p)) => {
                p.nonblock = flags & O_NONBLOCK != 0;
                true
            }
            _ => false,
        }
    }

    /// `splice(2)` (`do_splice`) between a TCP socket and a pipe, either way, or
    /// between two pipes. `input` and `output` are a descriptor and whether an
    /// offset was given for it: `ESPIPE` on a pipe, `EINVAL` on a socket (no
    /// `FMODE_PREAD`). Never sleeps: [`Spliced::Wait`] where a blocking call would.
    pub fn splice(
        &mut self,
        now: Instant,
        input: (Fd, bool),
        output: (Fd, bool),
        len: usize,
        flags: u32,
    ) -> Result<Spliced, Errno> {
        let ((fd_in, off_in), (fd_out, off_out)) = (input, output);
        if len == 0 {
            return Ok(Spliced::Bytes(0));
        }
        if flags & !SPLICE_F_ALL != 0 {
            return err(errno::EINVAL);
        }
        if !self.files.contains_key(&fd_in) || !self.files.contains_key(&fd_out) {
            return err(errno::EBADF);
        }
        let (ipipe, opipe) = (self.pipe_end(fd_in), self.pipe_end(fd_out));
        // do_splice: the read end must read, the write end write.
        if ipipe.is_some_and(|p| p.write) || opipe.is_some_and(|p| !p.write) {
            return err(errno::EBADF);
        }
        if (ipipe.is_some() && off_in) || (opipe.is_some() && off_out) {
            return err(errno::ESPIPE);
        }
        let mut flags = flags;
        match (ipipe, opipe) {
            (Some(i), Some(o)) => {
                if i.id == o.id {
                    return err(errno::EINVAL);
                }
                if i.nonblock || o.nonblock {
                    flags |= SPLICE_F_NONBLOCK;
                }
                self.splice_pipe_to_pipe(fd_in, fd_out, len, flags)
            }
            (Some(i), None) => {
                if off_out {
                    return err(errno::EINVAL);
                }
                if i.nonblock {
                    flags |= SPLICE_F_NONBLOCK;
                }
                self.splice_to_socket(now, fd_in, fd_out, len, flags)
            }
            (None, Some(o)) => {
                if off_in {
                    return err(errno::EINVAL);
                }
                if o.nonblock {
                    flags |= SPLICE_F_NONBLOCK;
                }
                self.splice_from_socket(now, fd_in, fd_out, len, flags)
            }
            (None, None) => err(errno::EINVAL),
        }
    }

    /// `splice_file_to_pipe` with `tcp_splice_read`: waits for room in the pipe
    /// (`wait_for_space`, unless `SPLICE_F_NONBLOCK`), then reads the socket as
    /// `tcp_read_sock`. With nothing read: end of stream, the socket's error,
    /// `ENOTCONN`, `EAGAIN` for a non-blocking socket (`O_NONBLOCK` only: the flag
    /// is the pipe's), 0 when data is queued but stopped at the urgent mark, else
    /// wait for data.
    fn splice_from_socket(
        &mut self,
        now: Instant,
        fd_in: Fd,
        fd_out: Fd,
        len: usize,
        flags: u32,
    ) -> Result<Spliced, Errno> {
        let s = self.sock(fd_in)?;
        let sock_nonblock = s.nonblock;
        let h = match s.state {
            SockState::Conn { h, .. } => h,
            SockState::Listening(_) => return err(errno::ENOTCONN),
            SockState::Unconnected => return err(errno::ENOTCONN),
        };
        let id = self.pipe_end(fd_out).expect("checked").id;
        let p = &self.pipes[&id];
        if !p.readers {
            return err(errno::EPIPE);
        }
        if p.full() {
            return match flags & SPLICE_F_NONBLOCK {
                0 => Ok(Spliced::Wait),
                _ => err(errno::EAGAIN),
            };
        }
        let room = p.room().min(len);
        let mut got = Vec::new();
        let r = self
            .stack
            .recv_with(now, h, room, |c| got.extend_from_slice(c));
        self.sync_events();
        let p = self.pipes.get_mut(&id).expect("checked");
        p.push(&got, true);
        match r {
            Ok(0) => {
                let st = self.stack.socket_ref(h).status().map_err(Errno::from)?;
                let queued = self.stack.recv_queue_len(h).map_err(Errno::from)?;
                if queued == 0 || st.rcv_shutdown || !sock_nonblock {
                    Ok(Spliced::Bytes(0))
                } else {
                    err(errno::EAGAIN)
                }
            }
            Ok(n) => Ok(Spliced::Bytes(n)),
            Err(SocketError::WouldBlock) if sock_nonblock => err(errno::EAGAIN),
            Err(SocketError::WouldBlock) => Ok(Spliced::Wait),
            Err(e) => Err(Errno::from(e)),
        }
    }

    /// `splice_to_socket`: what the pipe holds, up to `len`, as one send (waiting for
    /// data unless `SPLICE_F_NONBLOCK`; 0 once the writers left).
    fn splice_to_socket(
        &mut self,
        now: Instant,
        fd_in: Fd,
        fd_out: Fd,
        len: usize,
        flags: u32,
    ) -> Result<Spliced, Errno> {
        let id = self.pipe_end(fd_in).expect("checked").id;
        let s = self.sock(fd_out)?;
        let h = match s.state {
            SockState::Conn { h, .. } => h,
            _ => return err(errno::EPIPE),
        };
        let p = &self.pipes[&id];
        if p.bufs.is_empty() {
            return match (p.writers, flags & SPLICE_F_NONBLOCK) {
                (false, _) => Ok(Spliced::Bytes(0)),
                (true, 0) => Ok(Spliced::Wait),
                (true, _) => err(errno::EAGAIN),
            };
        }
        let data: Vec<u8> = p.bufs.iter().flatten().take(len).copied().collect();
        let sf = SendFlags {
            more: flags & SPLICE_F_MORE != 0,
            ..SendFlags::default()
        };
        let r = self.stack.sendmsg(now, h, &[&data], sf);
        self.sync_events();
        match r {
            Ok(n) => {
                self.pipes.get_mut(&id).expect("checked").take(n);
                Ok(Spliced::Bytes(n))
            }
            Err(SocketError::WouldBlock) if self.sock(fd_out)?.nonblock => err(errno::EAGAIN),
            Err(SocketError::WouldBlock) => Ok(Spliced::Wait),
            Err(SocketError::NotConnected) => err(errno::EPIPE),
            Err(e) => Err(Errno::from(e)),
        }
    }

    /// `splice_pipe_to_pipe`: moves up to `len` bytes, waiting for data in the
    /// input and room in the output unless `SPLICE_F_NONBLOCK`.
    fn splice_pipe_to_pipe(
        &mut self,
        fd_in: Fd,
        fd_out: Fd,
        len: usize,
        flags: u32,
    ) -> Result<Spliced, Errno> {
        let (i, o) = (
            self.pipe_end(fd_in).expect("checked").id,
            self.pipe_end(fd_out).expect("checked").id,
        );
        let nonblock = flags & SPLICE_F_NONBLOCK != 0;
        let (ip, op) = (&self.pipes[&i], &self.pipes[&o]);
        if !op.readers {
            return err(errno::EPIPE);
        }
        if ip.bufs.is_empty() && !ip.writers {
            return Ok(Spliced::Bytes(0));
        }
        if ip.bufs.is_empty() || op.full() {
            return match nonblock {
                true => err(errno::EAGAIN),
                false => Ok(Spliced::Wait),
            };
        }
        let n = len.min(op.room());
        let data = self.pipes.get_mut(&i).expect("checked").take(n);
        self.pipes.get_mut(&o).expect("checked").push(&data, false);
        Ok(Spliced::Bytes(data.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_merge_into_a_page_with_room_and_stop_at_sixteen() {
        let mut p = Pipe {
            readers: true,
            writers: true,
            ..Pipe::default()
        };
        assert_eq!(p.push(&[1; 100], true), 100);
        assert_eq!(p.push(&[2; 100], true), 100);
        assert_eq!(p.bufs.len(), 1, "merged");
        assert_eq!(p.push(&vec![3; 20 * PIPE_PAGE], true), 16 * PIPE_PAGE - 200);
        assert!(p.full());
        assert_eq!(p.take(150), [vec![1; 100], vec![2; 50]].concat());
        assert_eq!(p.room(), 0, "a partly read page still holds its buffer");
    }
}
