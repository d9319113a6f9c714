//! `TCP_MD5SIG` and `TCP_MD5SIG_EXT`'s `struct tcp_md5sig` (net/ipv4/tcp_ipv4.c
//! `tcp_v4_parse_md5_keys`, net/ipv6/tcp_ipv6.c `tcp_v6_parse_md5_keys`).

use super::consts::*;
use super::{err, Errno};
use crate::tcp::md5::{Md5Cmd, Md5Key};

/// `tcp_v4_parse_md5_keys` / `tcp_v6_parse_md5_keys`: the `struct tcp_md5sig` of
/// a `TCP_MD5SIG` (`ext` false) or `TCP_MD5SIG_EXT` on a socket of family `family`
/// (an AF_INET6 socket takes an AF_INET6 address, IPv4-mapped for IPv4 peers).
/// `EINVAL` for a short struct, another family, a prefix longer than the address
/// (32 for a mapped one), a key longer than 80 bytes, or a device (lowtide has no
/// L3 master device for `tcpm_ifindex` to name).
pub(super) fn md5sig_arg(family: i32, ext: bool, val: &[u8]) -> Result<Md5Cmd, Errno> {
    use crate::tcp::md5::{TCP_MD5SIG_FLAG_IFINDEX, TCP_MD5SIG_FLAG_PREFIX, TCP_MD5SIG_MAXKEYLEN};
    if val.len() < TCP_MD5SIG_LEN {
        return err(errno::EINVAL);
    }
    let ss_family = u16::from_ne_bytes([val[0], val[1]]) as i32;
    if ss_family != family {
        return err(errno::EINVAL);
    }
    let addr: std::net::IpAddr = match family {
        AF_INET => <[u8; 4]>::try_from(&val[4..8]).unwrap().into(),
        _ => <[u8; 16]>::try_from(&val[8..24]).unwrap().into(),
    };
    let v4 = match addr {
        std::net::IpAddr::V4(_) => true,
        std::net::IpAddr::V6(a) => a.to_ipv4_mapped().is_some(),
    };
    let (flags, prefixlen, keylen) = (val[128], val[129], u16::from_ne_bytes([val[130], val[131]]));
    let ifindex = i32::from_ne_bytes(val[132..136].try_into().unwrap());
    let max = if v4 { 32 } else { 128 };
    let prefixlen = match ext && flags & TCP_MD5SIG_FLAG_PREFIX != 0 {
        true if prefixlen > max => return err(errno::EINVAL),
        true => prefixlen,
        false => max,
    };
    // dev_get_by_index_rcu + netif_is_l3_master: no such device here.
    if ext && ifindex != 0 && flags & TCP_MD5SIG_FLAG_IFINDEX != 0 {
        return err(errno::EINVAL);
    }
    let flags = flags & TCP_MD5SIG_FLAG_IFINDEX;
    if keylen == 0 {
        return Ok(Md5Cmd::Del {
            addr: crate::tcp::md5::unmap(addr),
            prefixlen,
            l3index: 0,
            flags,
        });
    }
    if keylen as usize > TCP_MD5SIG_MAXKEYLEN {
        return err(errno::EINVAL);
    }
    let mut key = Md5Key::new(addr, prefixlen, &val[136..136 + keylen as usize])
        .ok_or(Errno(errno::EINVAL))?;
    key.flags = flags;
    Ok(Md5Cmd::Add(key))
}
