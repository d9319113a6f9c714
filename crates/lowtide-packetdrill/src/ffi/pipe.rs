//! pipe(2) and splice(2) (fs/pipe.c, fs/splice.c) as packetdrill's interface members,
//! over lowtide's pipes.

use super::*;

pub(super) unsafe extern "C" fn pd_pipe(ud: Ud, fds: *mut c_int) -> c_int {
    guard(ud, |sh| {
        if fds.is_null() {
            return Err(errno::EFAULT);
        }
        let (r, w) = sh.enter().host.pipe(0).map_err(e)?;
        *fds = r;
        *fds.add(1) = w;
        Ok(0)
    })
}

/// packetdrill hands the offsets as pointers to the script's values, NULL as a
/// pointer to 0 (the kernel gets the value itself as the pointer): 0 is no offset.
unsafe fn offset_given(off: *const i64) -> bool {
    !off.is_null() && *off != 0
}

pub(super) unsafe extern "C" fn pd_splice(
    ud: Ud,
    fd_in: c_int,
    off_in: *mut i64,
    fd_out: c_int,
    off_out: *mut i64,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    guard(ud, |sh| {
        let (oi, oo) = (offset_given(off_in), offset_given(off_out));
        pinned(sh, fd_in, |fd_in| {
            pinned(sh, fd_out, |fd_out| {
                splice_on(sh, (fd_in, oi), (fd_out, oo), n, flags)
            })
        })
    })
}

fn splice_on(
    sh: &Shared,
    (fd_in, oi): (Fd, bool),
    (fd_out, oo): (Fd, bool),
    n: size_t,
    flags: c_uint,
) -> Result<ssize_t, i32> {
    sh.blocking(
        false,
        None,
        |st: &mut State| {
            let now = st.now();
            match st.host.splice(now, (fd_in, oi), (fd_out, oo), n, flags) {
                Ok(lowtide::posix::Spliced::Wait) => Attempt::Wait,
                Ok(lowtide::posix::Spliced::Bytes(k)) => Attempt::Done(Ok(k as ssize_t)),
                Err(x) => Attempt::Done(Err(e(x))),
            }
        },
        |_| Err(errno::EAGAIN),
    )
}
