//! `SO_BINDTODEVICE` and `SO_BINDTOIFINDEX` as net/core/sock.c takes and gives
//! them (`sock_setbindtodevice`, `sock_bindtoindex_locked`,
//! `sock_getbindtodevice`); what a bound socket does is the engine's
//! (stack/netdev.rs). `sock_bindtoindex_locked`'s `EPERM` (a bound socket
//! rebound without `CAP_NET_RAW`) never happens here: the embedding process is
//! taken to have the capability, as for `SO_MARK`.

use super::consts::{errno, IFNAMSIZ};
use super::{err, Errno};
use crate::Stack;

/// `sock_setbindtodevice`: the device named by the first `IFNAMSIZ - 1` bytes of
/// `val` (up to a NUL): 0 (unbound) for an empty name or `optlen` 0, `ENODEV` for
/// a name no device has.
pub(super) fn bindtodevice_arg(stack: &Stack, val: &[u8]) -> Result<u32, Errno> {
    let name = &val[..val.len().min(IFNAMSIZ - 1)];
    let name = name.split(|&c| c == 0).next().unwrap_or_default();
    if name.is_empty() {
        return Ok(0);
    }
    std::str::from_utf8(name)
        .ok()
        .and_then(|n| stack.dev_get_by_name(n))
        .ok_or(Errno(errno::ENODEV))
}

/// `SO_BINDTOIFINDEX` (`sock_bindtoindex_locked`): any index but a negative one
/// (`EINVAL`); no device need have it.
pub(super) fn bindtoindex_arg(v: i32) -> Result<u32, Errno> {
    match v {
        v if v < 0 => err(errno::EINVAL),
        v => Ok(v as u32),
    }
}

/// `sock_getbindtodevice`: nothing (length 0) when unbound; else `EINVAL` for a
/// buffer shorter than `IFNAMSIZ`, `ENXIO` when no device has the index
/// (`netdev_get_name`), or the name and its NUL.
pub(super) fn getbindtodevice(stack: &Stack, bound: u32, out: &mut [u8]) -> Result<usize, Errno> {
    if bound == 0 {
        return Ok(0);
    }
    if out.len() < IFNAMSIZ {
        return err(errno::EINVAL);
    }
    let name = stack.netdev_get_name(bound).ok_or(Errno(errno::ENXIO))?;
    let n = name.len().min(IFNAMSIZ - 1);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out[n] = 0;
    Ok(n + 1)
}
