//! `SO_LINGER` as `sk_setsockopt` and `sk_getsockopt` keep it: the `SOCK_LINGER`
//! flag and `sk_lingertime`, which `inet_release` hands to `tcp_close` as the time
//! `close()` may sleep for the ACK of its FIN.

use super::consts::errno;
use super::{err, Errno};

/// `HZ` of `sk_lingertime`'s jiffies, as lowtide's timers count them.
const HZ: u64 = crate::time::HZ;
/// `MAX_SCHEDULE_TIMEOUT` (`LONG_MAX`), in jiffies.
const MAX_SCHEDULE_TIMEOUT: u64 = i64::MAX as u64;

/// A socket's `SO_LINGER`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Linger {
    /// `SOCK_LINGER` (`l_onoff`).
    pub on: bool,
    /// `sk_lingertime` in seconds; `None` for `MAX_SCHEDULE_TIMEOUT`.
    pub secs: Option<u32>,
}

impl Default for Linger {
    /// `sk_alloc`: off, `sk_lingertime` 0.
    fn default() -> Linger {
        Linger {
            on: false,
            secs: Some(0),
        }
    }
}

impl Linger {
    /// `sk_setsockopt(SO_LINGER)` on a `struct linger` (`optlen` at least 8, else
    /// `EINVAL`): `l_onoff` 0 clears `SOCK_LINGER` and keeps the time; otherwise
    /// `l_linger`, read as an `unsigned long`, is the time, `MAX_SCHEDULE_TIMEOUT`
    /// from `MAX_SCHEDULE_TIMEOUT / HZ` up, which a negative `l_linger` reaches.
    pub fn set_from_user(self, val: &[u8]) -> Result<Linger, Errno> {
        let int = |b: &[u8]| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
        if val.len() < 8 {
            return err(errno::EINVAL);
        }
        let (onoff, l_linger) = (int(&val[..4]), int(&val[4..8]));
        if onoff == 0 {
            return Ok(Linger { on: false, ..self });
        }
        let t_sec = l_linger as i64 as u64;
        let secs = (t_sec < MAX_SCHEDULE_TIMEOUT / HZ).then_some(t_sec as u32);
        Ok(Linger { on: true, secs })
    }

    /// `sk_getsockopt(SO_LINGER)`'s `struct linger`: `l_linger` is
    /// `sk_lingertime / HZ` cut to an int.
    pub fn to_user(self) -> [u8; 8] {
        let jiffies = self.secs.map_or(MAX_SCHEDULE_TIMEOUT, |s| s as u64 * HZ);
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&(self.on as i32).to_ne_bytes());
        b[4..].copy_from_slice(&((jiffies / HZ) as i32).to_ne_bytes());
        b
    }

    /// `sk_lingertime == 0`: with `SOCK_LINGER`, `tcp_close` aborts.
    pub fn is_zero(self) -> bool {
        self.secs == Some(0)
    }

    /// How long `close()` may sleep: `None` without a limit.
    pub fn wait(self) -> Option<core::time::Duration> {
        self.secs.map(|s| core::time::Duration::from_secs(s as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(onoff: i32, l: i32) -> Vec<u8> {
        [onoff, l].iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn so_linger_as_sk_setsockopt_and_sk_getsockopt_keep_it() {
        let l = Linger::default();
        assert_eq!(l.set_from_user(&user(1, 5)[..7]), Err(Errno(errno::EINVAL)));
        let five = l.set_from_user(&user(1, 5)).unwrap();
        assert_eq!(
            (five.on, five.wait()),
            (true, Some(core::time::Duration::from_secs(5)))
        );
        // l_onoff 0 keeps sk_lingertime: it reads back.
        let off = five.set_from_user(&user(0, 9)).unwrap();
        assert_eq!(
            off,
            Linger {
                on: false,
                secs: Some(5)
            }
        );
        assert_eq!(off.to_user(), user(0, 5).as_slice());
        // A negative l_linger is MAX_SCHEDULE_TIMEOUT: no limit, not an abort.
        let forever = off.set_from_user(&user(1, -1)).unwrap();
        assert_eq!((forever.is_zero(), forever.wait()), (false, None));
        let lin = ((i64::MAX as u64 / HZ) as i32).to_ne_bytes();
        assert_eq!(forever.to_user()[4..], lin);
        assert_eq!(forever.to_user()[..4], 1i32.to_ne_bytes());
        // The largest int is a time.
        let max = l.set_from_user(&user(7, i32::MAX)).unwrap();
        assert_eq!(max.secs, Some(i32::MAX as u32));
        assert!(l.set_from_user(&user(1, 0)).unwrap().is_zero());
    }
}
