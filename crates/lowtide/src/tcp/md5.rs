//! TCP-MD5 signatures ([RFC 2385](https://www.rfc-editor.org/rfc/rfc2385)) as Linux
//! 6.18 keeps and computes them: a socket's keys (`tp->md5sig_info`, tcp_ipv4.c's
//! `tcp_md5_do_add` / `tcp_md5_do_del` / `__tcp_md5_do_lookup`), and the digest of
//! a segment (`tcp_v4_md5_hash_skb`, `tcp_v6_md5_hash_skb`). The options rules
//! (`tcp_syn_options`, `tcp_synack_options`, `tcp_established_options`) are in
//! tcp/output.rs, the check of what arrives (`tcp_inbound_hash`) in stack/mod.rs.

use ::md5::{Digest, Md5};
use std::net::IpAddr;

/// `TCP_MD5SIG_MAXKEYLEN`: the longest key.
pub const TCP_MD5SIG_MAXKEYLEN: usize = 80;
/// `sizeof(struct tcp_md5sig_key)` on x86_64 (an `hlist_node`, four bytes of
/// length, family, prefix and flags, the 16-byte address, `l3index`, the 80-byte
/// key and an `rcu_head`): what each key costs in `sk_omem_alloc`, which
/// `__tcp_md5_do_add` takes with `sock_kmalloc` and `tcp_md5_do_del` /
/// `tcp_clear_md5_list` give back. The `struct tcp_md5sig_info` holding the list
/// is a plain `kmalloc` and costs nothing there.
pub const MD5_KEY_OMEM: u32 = 136;
/// `TCP_MD5SIG_FLAG_PREFIX`: `tcpm_prefixlen` is valid (`TCP_MD5SIG_EXT` only).
pub const TCP_MD5SIG_FLAG_PREFIX: u8 = 0x1;
/// `TCP_MD5SIG_FLAG_IFINDEX`: `tcpm_ifindex` is valid (`TCP_MD5SIG_EXT` only).
pub const TCP_MD5SIG_FLAG_IFINDEX: u8 = 0x2;
/// `TCPOLEN_MD5SIG_ALIGNED`: the room the option takes in every segment.
pub const TCPOLEN_MD5SIG_ALIGNED: u32 = lowtide_wire::tcp::TCPOLEN_MD5SIG_ALIGNED as u32;

/// One key (`struct tcp_md5sig_key`): the peers it signs for are those whose
/// address shares `prefixlen` bits with `addr` (an IPv4-mapped address given on an
/// AF_INET6 socket is kept as the IPv4 address, as `tcp_v6_parse_md5_keys` keeps
/// it with `AF_INET`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Md5Key {
    /// The peer address (`key->addr`, `key->family`).
    pub addr: IpAddr,
    /// `key->prefixlen`.
    pub prefixlen: u8,
    /// `key->l3index`: the L3 master device the key is bound to (0: none; lowtide
    /// has no VRF, so always 0).
    pub l3index: i32,
    /// `key->flags` (`TCP_MD5SIG_FLAG_IFINDEX` only).
    pub flags: u8,
    keylen: u8,
    key: [u8; TCP_MD5SIG_MAXKEYLEN],
}

impl core::fmt::Debug for Md5Key {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Md5Key")
            .field("addr", &self.addr)
            .field("prefixlen", &self.prefixlen)
            .field("keylen", &self.keylen)
            .finish_non_exhaustive()
    }
}

impl Md5Key {
    /// A key for the peers in `addr/prefixlen`; `None` if `key` is longer than
    /// [`TCP_MD5SIG_MAXKEYLEN`] or the prefix longer than the address. An
    /// IPv4-mapped IPv6 address is kept as its IPv4 address.
    pub fn new(addr: IpAddr, prefixlen: u8, key: &[u8]) -> Option<Md5Key> {
        let addr = unmap(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if key.len() > TCP_MD5SIG_MAXKEYLEN || prefixlen > max {
            return None;
        }
        let mut k = [0u8; TCP_MD5SIG_MAXKEYLEN];
        k[..key.len()].copy_from_slice(key);
        Some(Md5Key {
            addr,
            prefixlen,
            l3index: 0,
            flags: 0,
            keylen: key.len() as u8,
            key: k,
        })
    }

    /// A key for the one peer `addr` (the full prefix).
    pub fn for_host(addr: IpAddr, key: &[u8]) -> Option<Md5Key> {
        let max = if unmap(addr).is_ipv4() { 32 } else { 128 };
        Md5Key::new(addr, max, key)
    }

    /// The key's bytes.
    pub fn key(&self) -> &[u8] {
        &self.key[..self.keylen as usize]
    }

    /// `__tcp_md5_do_lookup`'s match: same family, and the first `prefixlen` bits
    /// equal (`inet_make_mask`, `ipv6_prefix_equal`).
    fn matches(&self, addr: IpAddr) -> bool {
        match (self.addr, unmap(addr)) {
            (IpAddr::V4(k), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - self.prefixlen as u32)
                    .unwrap_or(0);
                u32::from(k) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(k), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - self.prefixlen as u32)
                    .unwrap_or(0);
                u128::from(k) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }

    /// `tcp_md5_do_lookup_exact`'s match.
    fn same_entry(&self, addr: IpAddr, prefixlen: u8, l3index: i32, flags: u8) -> bool {
        self.addr == unmap(addr)
            && self.prefixlen == prefixlen
            && self.l3index == l3index
            && self.flags & TCP_MD5SIG_FLAG_IFINDEX == flags & TCP_MD5SIG_FLAG_IFINDEX
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it maps; any other as it is.
pub(crate) fn unmap(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        a => a,
    }
}

/// What a `TCP_MD5SIG` / `TCP_MD5SIG_EXT` asks (`tcp_v4_parse_md5_keys`): add a
/// key, replacing one for the same address, prefix and device; or, with a key
/// length of 0, delete that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Cmd {
    /// `tcp_md5_do_add`.
    Add(Md5Key),
    /// `tcp_md5_do_del`: the entry of `(addr, prefixlen, l3index, flags)`.
    Del {
        /// The peer address.
        addr: IpAddr,
        /// The prefix length.
        prefixlen: u8,
        /// The L3 master device index.
        l3index: i32,
        /// The key's flags.
        flags: u8,
    },
}

/// Why a `TCP_MD5SIG` command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Md5Error {
    /// `tcp_md5_do_del` found no such key (`-ENOENT`).
    NotFound,
    /// `__tcp_md5_do_add`'s `sock_kmalloc` found no room under `optmem_max`
    /// (`-ENOMEM`).
    NoMemory,
}

/// `sock_kmalloc`'s room check (net/core/sock.c): `size` more bytes of
/// `sk_omem_alloc` (now `omem`) fit if `size <= optmem_max` and the sum stays
/// strictly below it (`sock_omalloc`, for skbs, allows the sum to reach it).
pub(crate) fn sock_kmalloc_fits(omem: u32, size: u32, optmem_max: u32) -> bool {
    size <= optmem_max && (omem as u64 + size as u64) < optmem_max as u64
}

/// A socket's keys (`tp->md5sig_info`), newest first as `hlist_add_head_rcu`
/// leaves them. Empty on nearly every socket: then nothing is signed or checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Md5Keys(Vec<Md5Key>);

impl Md5Keys {
    /// No key at all (`tp->md5sig_info` is NULL or empty).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `__tcp_md5_do_lookup` (l3index 0): the key for peer `addr`, the longest
    /// matching prefix; a key bound to an L3 device beats one that is not
    /// (`better_md5_match`); of equal ones the newest.
    pub fn lookup(&self, addr: IpAddr) -> Option<&Md5Key> {
        let mut best: Option<&Md5Key> = None;
        for k in &self.0 {
            if k.flags & TCP_MD5SIG_FLAG_IFINDEX != 0 && k.l3index != 0 {
                continue; // bound to an L3 device no segment of ours comes in on
            }
            if !k.matches(addr) {
                continue;
            }
            let better = match best {
                None => true,
                Some(b) if b.l3index != 0 && k.l3index == 0 => false,
                Some(b) if b.l3index == 0 && k.l3index != 0 => true,
                Some(b) => b.prefixlen < k.prefixlen,
            };
            if better {
                best = Some(k);
            }
        }
        best
    }

    /// What the keys hold of the socket's `sk_omem_alloc`: [`MD5_KEY_OMEM`] each.
    pub fn omem(&self) -> u32 {
        self.0.len() as u32 * MD5_KEY_OMEM
    }

    /// `tcp_md5_do_add` / `tcp_md5_do_del` on a socket whose `sk_omem_alloc`
    /// holds `other_omem` besides these keys: a new entry is a `sock_kmalloc` of
    /// [`MD5_KEY_OMEM`] within `optmem_max` (else [`Md5Error::NoMemory`]); an
    /// update of an existing one allocates nothing; a deleted key gives its charge
    /// back.
    pub fn apply(&mut self, cmd: Md5Cmd, other_omem: u32, optmem_max: u32) -> Result<(), Md5Error> {
        match cmd {
            Md5Cmd::Add(key) => {
                let (a, p, l, f) = (key.addr, key.prefixlen, key.l3index, key.flags);
                let omem = other_omem + self.omem();
                match self.0.iter_mut().find(|k| k.same_entry(a, p, l, f)) {
                    // "Pre-existing entry - just update that one."
                    Some(k) => (k.key, k.keylen) = (key.key, key.keylen),
                    None if !sock_kmalloc_fits(omem, MD5_KEY_OMEM, optmem_max) => {
                        return Err(Md5Error::NoMemory);
                    }
                    None => self.0.insert(0, key),
                }
                Ok(())
            }
            Md5Cmd::Del {
                addr,
                prefixlen,
                l3index,
                flags,
            } => {
                let at = self
                    .0
                    .iter()
                    .position(|k| k.same_entry(addr, prefixlen, l3index, flags))
                    .ok_or(Md5Error::NotFound)?;
                self.0.remove(at);
                Ok(())
            }
        }
    }

    /// `tcp_v4_syn_recv_sock` / `tcp_v6_syn_recv_sock`: a child's keys, the
    /// listener's key for its peer copied for that one address
    /// (`tcp_md5_key_copy` with the full prefix), a `sock_kmalloc` of
    /// [`MD5_KEY_OMEM`] on the child (see [`Md5Keys::child_copy_fails`]).
    pub fn child_copy(&self, peer: IpAddr) -> Md5Keys {
        let Some(k) = self.lookup(peer) else {
            return Md5Keys::default();
        };
        let peer = unmap(peer);
        let full = if peer.is_ipv4() { 32 } else { 128 };
        Md5Keys(vec![Md5Key {
            addr: peer,
            prefixlen: full,
            ..*k
        }])
    }
}

impl Md5Keys {
    /// Whether `tcp_md5_key_copy` fails for a child whose copied keys are these
    /// (`child_copy`'s): its `sock_kmalloc` on the new socket (`sk_clone_lock`
    /// zeroes `sk_omem_alloc`) finds no room when `optmem_max` is at most one
    /// key's charge; `tcp_v4_syn_recv_sock` then drops the child (`put_and_exit`).
    pub fn child_copy_fails(&self, optmem_max: u32) -> bool {
        !self.is_empty() && !sock_kmalloc_fits(0, MD5_KEY_OMEM, optmem_max)
    }
}

/// `tcp_v4_md5_hash_skb` / `tcp_v6_md5_hash_skb` (and `tcp_v4_md5_hash_hdr` for a
/// reply without payload): MD5 over the pseudo-header of `src`, `dst` and the TCP
/// length (the header with its options, and the payload), the 20-byte TCP header
/// with its checksum zero, the payload, and the key
/// ([RFC 2385 section 2.0](https://www.rfc-editor.org/rfc/rfc2385#section-2.0)).
/// `header` is the TCP header as sent or received (options are not hashed);
/// `payload` its payload in pieces.
pub fn hash_segment(
    key: &Md5Key,
    (src, dst): (IpAddr, IpAddr),
    header: &[u8],
    payload: &[&[u8]],
) -> [u8; 16] {
    let doff = ((header[12] >> 4) as usize) * 4;
    let tcp_len = doff + payload.iter().map(|p| p.len()).sum::<usize>();
    let mut h = Md5::new();
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            // struct tcp4_pseudohdr: saddr, daddr, pad, protocol, len.
            h.update(s.octets());
            h.update(d.octets());
            h.update([0, lowtide_wire::ip::PROTO_TCP]);
            h.update((tcp_len as u16).to_be_bytes());
        }
        (s, d) => {
            // struct tcp6_pseudohdr: saddr, daddr, len (32 bits), protocol (32 bits).
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a.octets(),
                IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            h.update(v6(s));
            h.update(v6(d));
            h.update((tcp_len as u32).to_be_bytes());
            h.update((lowtide_wire::ip::PROTO_TCP as u32).to_be_bytes());
        }
    }
    let mut th = [0u8; lowtide_wire::tcp::TCP_HEADER_LEN];
    th.copy_from_slice(&header[..lowtide_wire::tcp::TCP_HEADER_LEN]);
    th[16..18].fill(0);
    h.update(th);
    for p in payload {
        h.update(p);
    }
    h.update(key.key());
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn v4(a: [u8; 4]) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(a))
    }

    /// The digest against one computed apart (Python's hashlib over the same
    /// bytes laid out by hand: pseudo-header 10.0.0.1 -> 10.0.0.2, TCP length 25;
    /// header 1234 -> 80, seq 1, ack 2, doff 5, ACK|PSH, window 1000, checksum
    /// 0xffff (hashed as zero); payload "hello"; key "secret"):
    /// `hashlib.md5(bytes.fromhex("0a0000010a00000200060019"
    /// "04d200500000000100000002501803e800000000") + b"hello" + b"secret")`.
    #[test]
    fn digest_matches_an_independent_computation() {
        let key = Md5Key::for_host(v4([10, 0, 0, 2]), b"secret").unwrap();
        let mut th = [0u8; 20];
        th[0..2].copy_from_slice(&1234u16.to_be_bytes());
        th[2..4].copy_from_slice(&80u16.to_be_bytes());
        th[4..8].copy_from_slice(&1u32.to_be_bytes());
        th[8..12].copy_from_slice(&2u32.to_be_bytes());
        th[12] = 5 << 4;
        th[13] = 0x18;
        th[14..16].copy_from_slice(&1000u16.to_be_bytes());
        th[16..18].copy_from_slice(&[0xff, 0xff]);
        let d = hash_segment(
            &key,
            (v4([10, 0, 0, 1]), v4([10, 0, 0, 2])),
            &th,
            &[b"hel", b"lo"],
        );
        assert_eq!(hex(&d), EXPECTED_V4);
    }

    const EXPECTED_V4: &str = "f56a7e70b2cd37b665a9ccf42ab7579d";

    /// The IPv6 digest (`tcp_v6_md5_hash_skb`: `struct tcp6_pseudohdr`, the TCP
    /// length and the protocol as 32-bit words) against Python's hashlib over the
    /// same segment from fd00::1 to fd00::2:
    /// `hashlib.md5(bytes.fromhex("fd00" + "00" * 13 + "01" "fd00" + "00" * 13 + "02"
    /// "0000001900000006" "04d200500000000100000002501803e800000000") + b"hello" +
    /// b"secret")`. An IPv4-mapped pair of addresses is hashed as IPv4
    /// (`tcp_v6_rcv` hands IPv4 to `tcp_v4_rcv`).
    #[test]
    fn digest_v6_matches_an_independent_computation() {
        let (a, b): (IpAddr, IpAddr) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let key = Md5Key::for_host(b, b"secret").unwrap();
        let mut th = [0u8; 20];
        th[0..2].copy_from_slice(&1234u16.to_be_bytes());
        th[2..4].copy_from_slice(&80u16.to_be_bytes());
        th[4..8].copy_from_slice(&1u32.to_be_bytes());
        th[8..12].copy_from_slice(&2u32.to_be_bytes());
        th[12] = 5 << 4;
        th[13] = 0x18;
        th[14..16].copy_from_slice(&1000u16.to_be_bytes());
        let d = hash_segment(&key, (a, b), &th, &[b"hello"]);
        assert_eq!(hex(&d), "8b635f38d515bacfe674439d4f7dda50");
        let v4 = hash_segment(
            &key,
            (v4([10, 0, 0, 1]), v4([10, 0, 0, 2])),
            &th,
            &[b"hello"],
        );
        assert_eq!(hex(&v4), EXPECTED_V4, "the checksum field is not hashed");
    }

    /// `optmem_max`'s default (`net.core.optmem_max`, 128 KiB).
    const MAX: u32 = 131_072;

    fn hex(d: &[u8]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `__tcp_md5_do_lookup`: the longest prefix wins, families never mix, an
    /// IPv4-mapped address finds the IPv4 key; `tcp_md5_do_add` replaces the
    /// entry of the same address and prefix; `tcp_md5_do_del` of a missing one is
    /// ENOENT.
    #[test]
    fn keys_lookup_add_and_delete_as_linux() {
        let mut keys = Md5Keys::default();
        let net = Md5Key::new(v4([10, 0, 0, 0]), 8, b"net").unwrap();
        let host = Md5Key::for_host(v4([10, 1, 2, 3]), b"host").unwrap();
        keys.apply(Md5Cmd::Add(host), 0, MAX).unwrap();
        keys.apply(Md5Cmd::Add(net), 0, MAX).unwrap();
        assert_eq!(keys.lookup(v4([10, 1, 2, 3])).unwrap().key(), b"host");
        assert_eq!(keys.lookup(v4([10, 9, 9, 9])).unwrap().key(), b"net");
        assert!(keys.lookup(v4([11, 0, 0, 1])).is_none());
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 1, 2, 3).to_ipv6_mapped());
        assert_eq!(keys.lookup(mapped).unwrap().key(), b"host");
        assert!(keys.lookup(IpAddr::V6(Ipv6Addr::LOCALHOST)).is_none());
        let all = Md5Key::new(v4([0, 0, 0, 0]), 0, b"any").unwrap();
        keys.apply(Md5Cmd::Add(all), 0, MAX).unwrap();
        assert_eq!(keys.lookup(v4([11, 0, 0, 1])).unwrap().key(), b"any");
        let newer = Md5Key::for_host(v4([10, 1, 2, 3]), b"rotated").unwrap();
        keys.apply(Md5Cmd::Add(newer), 0, MAX).unwrap();
        assert_eq!(keys.0.len(), 3, "the same entry, updated");
        assert_eq!(keys.lookup(v4([10, 1, 2, 3])).unwrap().key(), b"rotated");
        let del = |addr, prefixlen| Md5Cmd::Del {
            addr,
            prefixlen,
            l3index: 0,
            flags: 0,
        };
        assert_eq!(
            keys.apply(del(v4([10, 0, 0, 0]), 16), 0, MAX),
            Err(Md5Error::NotFound)
        );
        keys.apply(del(v4([10, 0, 0, 0]), 8), 0, MAX).unwrap();
        assert_eq!(keys.lookup(v4([10, 9, 9, 9])).unwrap().key(), b"any");
        let child = keys.child_copy(v4([10, 1, 2, 3]));
        assert_eq!(child.0.len(), 1);
        assert_eq!(child.0[0].prefixlen, 32);
        assert_eq!(child.lookup(v4([10, 1, 2, 3])).unwrap().key(), b"rotated");
        assert!(child.lookup(v4([10, 1, 2, 4])).is_none());
        assert!(Md5Key::new(v4([1, 1, 1, 1]), 33, b"k").is_none());
        assert!(Md5Key::for_host(v4([1, 1, 1, 1]), &[0; 81]).is_none());
    }

    /// `__tcp_md5_do_add` charges `sk_omem_alloc` one `struct tcp_md5sig_key`
    /// (136 bytes) for each new entry with `sock_kmalloc`'s check (the sum must
    /// stay below `optmem_max`, other charges of the socket included), nothing
    /// for an update of an entry; `tcp_md5_do_del` gives the charge back; a
    /// child's copy is one key, refused when `optmem_max` is at most 136.
    #[test]
    fn each_key_holds_136_bytes_of_optmem() {
        let mut keys = Md5Keys::default();
        let a = Md5Key::for_host(v4([10, 0, 0, 1]), b"a").unwrap();
        let b = Md5Key::new(v4([10, 0, 0, 0]), 8, b"b").unwrap();
        assert_eq!(keys.omem(), 0);
        keys.apply(Md5Cmd::Add(a), 0, MAX).unwrap();
        assert_eq!(keys.omem(), 136);
        let a2 = Md5Key::for_host(v4([10, 0, 0, 1]), b"a2").unwrap();
        keys.apply(Md5Cmd::Add(a2), 0, MAX).unwrap();
        assert_eq!(keys.omem(), 136, "an update allocates nothing");
        // 136 + 136 + 832 (a zerocopy notification) must stay below optmem_max.
        assert_eq!(
            keys.apply(Md5Cmd::Add(b), 832, 1104),
            Err(Md5Error::NoMemory)
        );
        assert_eq!(keys.omem(), 136);
        keys.apply(Md5Cmd::Add(b), 832, 1105).unwrap();
        assert_eq!(keys.omem(), 272);
        let del = Md5Cmd::Del {
            addr: v4([10, 0, 0, 1]),
            prefixlen: 32,
            l3index: 0,
            flags: 0,
        };
        keys.apply(del, 0, MAX).unwrap();
        assert_eq!(keys.omem(), 136);
        assert_eq!(keys.apply(del, 0, MAX), Err(Md5Error::NotFound));
        let child = keys.child_copy(v4([10, 9, 9, 9]));
        assert_eq!(child.omem(), 136);
        assert!(child.child_copy_fails(136));
        assert!(!child.child_copy_fails(137));
        assert!(!Md5Keys::default().child_copy_fails(0));
        let mut none = Md5Keys::default();
        assert_eq!(none.apply(Md5Cmd::Add(a), 0, 136), Err(Md5Error::NoMemory));
        none.apply(Md5Cmd::Add(a), 0, 137).unwrap();
    }
}
