//! Unpredictable initial sequence numbers, timestamp offsets and ephemeral ports, as
//! Linux's net/core/secure_seq.c and `__inet_hash_connect` compute them: a keyed hash
//! (SipHash-2-4) of the connection's addresses with a secret, plus a clock for the
//! ISN ([RFC 6528 section 3](https://www.rfc-editor.org/rfc/rfc6528#section-3)) and a
//! perturbation table for ports
//! ([RFC 6056 section 3.3.4](https://www.rfc-editor.org/rfc/rfc6056#section-3.3.4),
//! Algorithm 4).
//!
//! The engine does no I/O: the secret comes from its caller ([`crate::Stack::set_secret`]
//! with bytes from the OS random source on the real path). Without one, a stack keys
//! the hash from its seed, so a simulation stays deterministic.

use crate::time::Instant;
use core::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

/// Entries of the port perturbation table (`INET_TABLE_PERTURB_SIZE`, smaller here).
const PERTURB_SIZE: usize = 256;

/// The stack's secrets: `net_secret` (ISNs, ports) and `ts_secret` (timestamp
/// offsets), with the port perturbation table (`table_perturb`).
#[derive(Debug, Clone)]
pub(crate) struct Secrets {
    net: (u64, u64),
    ts: (u64, u64),
    perturb: Vec<u32>,
    /// `syncookie_secret`.
    pub cookie: crate::tcp::syncookies::CookieSecret,
}

impl Secrets {
    /// Secrets from 32 bytes of key material (two SipHash keys) and a table seed.
    pub fn new(key: [u8; 32], mut table_seed: impl FnMut() -> u32) -> Secrets {
        let word = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&key[i * 8..i * 8 + 8]);
            u64::from_le_bytes(b)
        };
        let net = (word(0), word(1));
        let mut cookie_key = [0u8; 32];
        for (i, chunk) in cookie_key.chunks_mut(8).enumerate() {
            let mut h = sip(net);
            h.write(b"syncookie");
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
        Secrets {
            net,
            ts: (word(2), word(3)),
            perturb: (0..PERTURB_SIZE).map(|_| table_seed()).collect(),
            cookie: crate::tcp::syncookies::CookieSecret::new(cookie_key),
        }
    }

    /// The key of transmit and flow hashes (`sk_txhash`, `skb_get_hash_flowi6`;
    /// tcp/flowlabel.rs), drawn from `net_secret`.
    pub fn flow_key(&self) -> (u64, u64) {
        let mut h = sip(self.net);
        h.write(b"flowhash");
        let k0 = h.finish();
        h.write(b"flowhash");
        (k0, h.finish())
    }

    /// The connection table's key (`inet_ehash_secret`), drawn from `net_secret`.
    pub fn ehash_key(&self) -> (u64, u64) {
        let mut h = sip(self.net);
        h.write(b"ehash");
        let k0 = h.finish();
        h.write(b"ehash");
        (k0, h.finish())
    }

    /// `secure_tcp_seq` / `secure_tcpv6_seq`: the hash of the 4-tuple plus the clock
    /// in 64 ns ticks (`seq_scale`: the 32-bit space wraps every 274 s, more than a
    /// maximum segment lifetime of 2 minutes).
    pub fn tcp_seq(&self, local: SocketAddr, remote: SocketAddr, now: Instant) -> u32 {
        let mut h = sip(self.net);
        ip(&mut h, local.ip());
        ip(&mut h, remote.ip());
        h.write_u32(((local.port() as u32) << 16) | remote.port() as u32);
        (h.finish() as u32).wrapping_add((now.as_nanos() >> 6) as u32)
    }

    /// `secure_tcp_ts_off`: the connection's TSval offset, from the addresses only.
    pub fn ts_off(&self, local: IpAddr, remote: IpAddr) -> u32 {
        let mut h = sip(self.ts);
        ip(&mut h, local);
        ip(&mut h, remote);
        h.finish() as u32
    }

    /// `secure_ipv4_port_ephemeral` + `table_perturb`: where the search for a free
    /// ephemeral port starts for this destination (an even offset into a range of
    /// `span` ports), and the table slot to advance once a port is taken.
    pub fn port_offset(&self, local: IpAddr, remote: SocketAddr, span: u32) -> (u32, usize) {
        let mut h = sip(self.net);
        ip(&mut h, local);
        ip(&mut h, remote.ip());
        h.write_u16(remote.port());
        let port_offset = h.finish();
        let index = (port_offset as usize) & (PERTURB_SIZE - 1);
        let offset = self.perturb[index].wrapping_add((port_offset >> 32) as u32);
        ((offset % span.max(1)) & !1, index)
    }

    /// The bucket hash of `ip_idents` (`net->ipv4.ip_id_key`, drawn here from
    /// `net_secret`): `__ip_select_ident`'s `siphash_3u32(daddr, saddr, protocol)`,
    /// or `__ipv6_select_ident`'s hash of both addresses (`protocol` `None`).
    pub fn ip_id_hash(&self, dst: IpAddr, src: IpAddr, protocol: Option<u8>) -> u32 {
        let mut h = sip(self.net);
        h.write(b"ipid");
        ip(&mut h, dst);
        ip(&mut h, src);
        if let Some(p) = protocol {
            h.write_u8(p);
        }
        h.finish() as u32
    }

    /// After a port was found `tried` steps into the search: the next search from this
    /// slot starts further on (`table_perturb[index] += max(i, random) + 2`).
    pub fn advance(&mut self, index: usize, tried: u32, random_below_8: u32) {
        let step = tried.max(random_below_8 * 2) + 2;
        self.perturb[index] = self.perturb[index].wrapping_add(step);
    }
}

#[allow(deprecated)] // core's SipHasher is SipHash-2-4, Linux's siphash; no new dependency.
pub(crate) fn sip(key: (u64, u64)) -> core::hash::SipHasher {
    core::hash::SipHasher::new_with_keys(key.0, key.1)
}

/// Feeds `a`'s address bytes (4 or 16) to `h`.
pub(crate) fn ip(h: &mut impl Hasher, a: IpAddr) {
    match a {
        IpAddr::V4(v4) => h.write(&v4.octets()),
        IpAddr::V6(v6) => h.write(&v6.octets()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secrets(b: u8) -> Secrets {
        let mut n = 0u32;
        Secrets::new([b; 32], || {
            n += 7;
            n
        })
    }

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn isn_is_hash_plus_a_64ns_clock() {
        let s = secrets(1);
        let (l, r) = (sa("10.0.0.1:40000"), sa("10.0.0.2:80"));
        let a = s.tcp_seq(l, r, Instant(0));
        // The same 4-tuple later: the clock moved the ISN on by elapsed / 64 ns.
        assert_eq!(s.tcp_seq(l, r, Instant(64_000)), a.wrapping_add(1000));
        // Another port, another secret: unrelated.
        let b = s.tcp_seq(sa("10.0.0.1:40001"), r, Instant(0));
        let c = secrets(2).tcp_seq(l, r, Instant(0));
        assert!(a != b && a != c && b != c);
        assert_ne!(s.ts_off(l.ip(), r.ip()), secrets(2).ts_off(l.ip(), r.ip()));
    }

    #[test]
    fn port_offsets_are_even_in_range_and_keyed() {
        let s = secrets(3);
        let l: IpAddr = "10.0.0.1".parse().unwrap();
        let (o, _) = s.port_offset(l, sa("10.0.0.2:80"), 28232);
        assert!(o < 28232 && o % 2 == 0);
        let (o2, _) = secrets(4).port_offset(l, sa("10.0.0.2:80"), 28232);
        assert_ne!(o, o2);
    }
}
