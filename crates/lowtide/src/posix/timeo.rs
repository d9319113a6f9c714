//! `SO_RCVTIMEO` / `SO_SNDTIMEO` (net/core/sock.c `sock_set_timeout`,
//! `sock_get_timeout`): `sk_rcvtimeo` / `sk_sndtimeo` in jiffies, and how long a
//! blocking call on the socket may wait (`sock_rcvtimeo`, `sock_sndtimeo`).
//!
//! The socket layer never blocks (see [`super`]): a caller that waits reads the
//! limit with [`Host::rcvtimeo`] / [`Host::sndtimeo`] and gives up when it is
//! reached, as Linux's sleeping calls do: a receive returns `EAGAIN` or the bytes
//! it has (`tcp_recvmsg_locked`), `accept` `EAGAIN` (`inet_csk_accept`), a send
//! what it queued or `EAGAIN` (`sk_stream_wait_memory`, `sk_stream_wait_connect`),
//! `connect` `EINPROGRESS` (`__inet_stream_connect`; `EALREADY` when it was
//! already connecting).

use super::consts::errno;
use super::{err, Errno, Fd, File, Host};
use core::time::Duration;

/// `CONFIG_HZ` as lowtide's timers count jiffies ([`crate::time::HZ`]).
const HZ: i64 = crate::time::HZ as i64;
/// `MAX_SCHEDULE_TIMEOUT` (`LONG_MAX`): no limit, what a new socket has.
pub(super) const MAX_SCHEDULE_TIMEOUT: i64 = i64::MAX;
const USEC_PER_SEC: i64 = 1_000_000;
/// `sizeof(struct __kernel_old_timeval)`, which is also the size of
/// `struct __kernel_sock_timeval` (the `_NEW` options) on a 64-bit host.
const TIMEVAL_LEN: usize = 16;

/// `sock_set_timeout` (with `sock_copy_user_timeval`): the jiffies the
/// `struct timeval` in `val` sets. `EINVAL` when shorter than a timeval, `EDOM`
/// for `tv_usec` outside 0..=999999; a negative `tv_sec` is no wait at all (0), a
/// zero timeval or one past `MAX_SCHEDULE_TIMEOUT / HZ - 1` seconds no limit;
/// else `tv_sec * HZ + DIV_ROUND_UP(tv_usec, USEC_PER_SEC / HZ)`.
pub(super) fn timeout_from_user(val: &[u8]) -> Result<i64, Errno> {
    if val.len() < TIMEVAL_LEN {
        return err(errno::EINVAL);
    }
    let sec = i64::from_ne_bytes(val[..8].try_into().expect("8 bytes"));
    let usec = i64::from_ne_bytes(val[8..16].try_into().expect("8 bytes"));
    if !(0..USEC_PER_SEC).contains(&usec) {
        return err(errno::EDOM);
    }
    if sec < 0 {
        return Ok(0);
    }
    if (sec != 0 || usec != 0) && sec < MAX_SCHEDULE_TIMEOUT / HZ - 1 {
        let per_jiffy = USEC_PER_SEC / HZ;
        return Ok(sec * HZ + (usec + per_jiffy - 1) / per_jiffy);
    }
    Ok(MAX_SCHEDULE_TIMEOUT)
}

/// `sock_get_timeout`: `timeo` jiffies as a `struct timeval` (16 bytes, for the
/// old and the `_NEW` options alike); no limit reads 0, as does no wait.
pub(super) fn timeout_to_user(timeo: i64) -> [u8; TIMEVAL_LEN] {
    let (sec, usec) = match timeo {
        MAX_SCHEDULE_TIMEOUT => (0, 0),
        t => (t / HZ, (t % HZ) * USEC_PER_SEC / HZ),
    };
    let mut b = [0u8; TIMEVAL_LEN];
    b[..8].copy_from_slice(&sec.to_ne_bytes());
    b[8..].copy_from_slice(&usec.to_ne_bytes());
    b
}

/// A timeout in jiffies as a wait: `None` for `MAX_SCHEDULE_TIMEOUT`.
fn wait_of(timeo: i64) -> Option<Duration> {
    let us_per_jiffy = (USEC_PER_SEC / HZ) as u64;
    (timeo != MAX_SCHEDULE_TIMEOUT)
        .then(|| Duration::from_micros((timeo.max(0) as u64).saturating_mul(us_per_jiffy)))
}

impl Host {
    /// `sock_rcvtimeo` of a blocking call: how long a receive or `accept` on `fd`
    /// may wait (`SO_RCVTIMEO`) before it gives up with `EAGAIN` (a receive with
    /// bytes short of its target returns them). `None`: no limit (the default, and
    /// any descriptor that is not a socket); `Some(ZERO)`: no wait at all (a
    /// negative `tv_sec`).
    pub fn rcvtimeo(&self, fd: Fd) -> Option<Duration> {
        match self.files.get(&fd) {
            Some(File::Socket(s)) => wait_of(s.rcvtimeo),
            _ => None,
        }
    }

    /// `sock_sndtimeo` of a blocking call: how long a send or `connect` on `fd` may
    /// wait (`SO_SNDTIMEO`): a send then returns the bytes it queued or `EAGAIN`,
    /// a `connect` `EINPROGRESS` (`EALREADY` if it was already connecting), the
    /// handshake going on. `None` and `Some(ZERO)` as [`Host::rcvtimeo`].
    pub fn sndtimeo(&self, fd: Fd) -> Option<Duration> {
        match self.files.get(&fd) {
            Some(File::Socket(s)) => wait_of(s.sndtimeo),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tv(sec: i64, usec: i64) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&sec.to_ne_bytes());
        b[8..].copy_from_slice(&usec.to_ne_bytes());
        b
    }

    /// sock_set_timeout's branches, each value read back through sock_get_timeout.
    #[test]
    fn set_timeout_rounds_to_jiffies_and_checks_the_timeval() {
        assert_eq!(timeout_from_user(&tv(0, 1_000_000)), err(errno::EDOM));
        assert_eq!(timeout_from_user(&tv(0, -1)), err(errno::EDOM));
        assert_eq!(
            timeout_from_user(&tv(-1, -1)),
            err(errno::EDOM),
            "tv_usec first"
        );
        assert_eq!(timeout_from_user(&tv(1, 0)[..15]), err(errno::EINVAL));
        assert_eq!(timeout_from_user(&tv(-5, 0)), Ok(0), "negative: no wait");
        assert_eq!(timeout_from_user(&tv(0, 0)), Ok(MAX_SCHEDULE_TIMEOUT));
        assert_eq!(
            timeout_from_user(&tv(i64::MAX / HZ - 1, 0)),
            Ok(MAX_SCHEDULE_TIMEOUT)
        );
        assert_eq!(
            timeout_from_user(&tv(i64::MAX / HZ - 2, 0)),
            Ok((i64::MAX / HZ - 2) * HZ)
        );
        // DIV_ROUND_UP to a jiffy.
        assert_eq!(timeout_from_user(&tv(0, 1)), Ok(1));
        assert_eq!(timeout_from_user(&tv(1, 500)), Ok(1001));
        assert_eq!(timeout_from_user(&tv(5, 999_999)), Ok(6000));
        assert_eq!(timeout_to_user(1), tv(0, 1000));
        assert_eq!(timeout_to_user(1001), tv(1, 1000));
        assert_eq!(timeout_to_user(6000), tv(6, 0));
        assert_eq!(timeout_to_user(0), tv(0, 0));
        assert_eq!(timeout_to_user(MAX_SCHEDULE_TIMEOUT), tv(0, 0));
        assert_eq!(wait_of(MAX_SCHEDULE_TIMEOUT), None);
        assert_eq!(wait_of(0), Some(Duration::ZERO));
        assert_eq!(wait_of(1001), Some(Duration::from_millis(1001)));
    }
}
