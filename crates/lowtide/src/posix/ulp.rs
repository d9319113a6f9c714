//! `TCP_ULP` (`do_tcp_setsockopt` -> `tcp_set_ulp`, net/ipv4/tcp_ulp.c): attaching
//! an upper layer protocol. lowtide has none to attach: no kernel TLS (`tls`,
//! whose module this machine's Linux 6.18 lacks as well) and no ESP-in-TCP. It
//! registers what that kernel registers, MPTCP's subflow ULP (`mptcp`), whose
//! `subflow_ulp_init` refuses any socket the kernel did not create.

use super::consts::errno;
use super::{err, Errno};

/// `TCP_ULP_NAME_MAX`: a ULP name's room, its NUL included.
pub const TCP_ULP_NAME_MAX: usize = 16;

/// `tcp_set_ulp` for a name as `do_tcp_setsockopt` reads it: `EINVAL` for an
/// empty `optlen`; else the first `TCP_ULP_NAME_MAX - 1` bytes up to a NUL
/// (`strncpy_from_sockptr`) name the ULP. `__tcp_ulp_find_autoload`: `ENOENT`
/// for one not registered (no module loads here); `__tcp_set_ulp` then would
/// refuse a second ULP (`EEXIST`, never here: none attaches) and a listener
/// for a ULP without `clone` (`mptcp` has one); `subflow_ulp_init`:
/// `EOPNOTSUPP` for a socket not made by `sock_create_kern`, as every
/// application's is.
pub(super) fn tcp_set_ulp(val: &[u8]) -> Result<(), Errno> {
    if val.is_empty() {
        return err(errno::EINVAL);
    }
    let name = &val[..val.len().min(TCP_ULP_NAME_MAX - 1)];
    let name = name.split(|&c| c == 0).next().unwrap_or_default();
    match name {
        b"mptcp" => err(errno::EOPNOTSUPP),
        _ => err(errno::ENOENT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::posix::consts::{AF_INET, SOCK_STREAM, SOL_TCP, TCP_ULP};
    use crate::posix::tests::{host, A};
    use crate::Instant;

    #[test]
    fn setsockopt_tcp_ulp_refuses_and_getsockopt_names_none() {
        let mut h = host(A, 1);
        let fd = h.socket(AF_INET, SOCK_STREAM, 0).unwrap();
        let t0 = Instant::ZERO;
        let set = |h: &mut crate::posix::Host, v: &[u8]| h.setsockopt(t0, fd, SOL_TCP, TCP_ULP, v);
        assert_eq!(set(&mut h, b"tls"), Err(Errno(errno::ENOENT)));
        assert_eq!(set(&mut h, b"mptcp"), Err(Errno(errno::EOPNOTSUPP)));
        let mut out = [0xffu8; 16];
        assert_eq!(h.getsockopt(t0, fd, SOL_TCP, TCP_ULP, &mut out), Ok(0));
    }

    #[test]
    fn tcp_set_ulp_branches() {
        let e = |v: &[u8]| tcp_set_ulp(v).unwrap_err().0;
        assert_eq!(e(b""), errno::EINVAL);
        // No kTLS: "tls" is not registered, as on a kernel without its module.
        assert_eq!(e(b"tls"), errno::ENOENT);
        assert_eq!(e(b"\0"), errno::ENOENT);
        assert_eq!(e(b"nosuch"), errno::ENOENT);
        assert_eq!(e(b"mptcp"), errno::EOPNOTSUPP);
        // The name ends at a NUL, and at TCP_ULP_NAME_MAX - 1 bytes.
        assert_eq!(e(b"mptcp\0tls"), errno::EOPNOTSUPP);
        assert_eq!(e(b"mptcpmptcpmptcpX"), errno::ENOENT);
    }
}
