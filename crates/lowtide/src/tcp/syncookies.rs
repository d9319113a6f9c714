//! SYN cookies (net/ipv4/syncookies.c): when a listener's SYN queue overflows
//! (`net.ipv4.tcp_syncookies` = 1; always with 2), its SYN-ACK keeps no state. The
//! ISN carries a keyed hash of the connection, a minute counter and the index of the
//! peer's MSS in `msstab`; the low 6 bits of the SYN-ACK's TSval carry the peer's
//! window scale, SACK-permitted and ECN (`cookie_init_timestamp`), echoed back in
//! the ACK's TSecr. The ACK that completes the handshake rebuilds the connection.

use crate::time::Instant;
use core::hash::Hasher;
use std::net::{IpAddr, SocketAddr};

/// `msstab` (net/ipv4/syncookies.c): the MSS values an IPv4 cookie can encode
/// (2 bits).
pub(crate) const MSSTAB: [u16; 4] = [536, 1300, 1440, 1460];
/// `msstab` of net/ipv6/syncookies.c: IPv6's own, each an MTU less 60 bytes of
/// headers (`IPV6_MIN_MTU`, 1480, 1500, 9000).
pub(crate) const MSSTAB6: [u16; 4] = [1280 - 60, 1480 - 60, 1500 - 60, 9000 - 60];

/// The table of a cookie for a connection over IPv6 (`ipv6`) or IPv4 (an
/// IPv4-mapped peer of an IPv6 socket too: `tcp_v6_conn_request` hands it to
/// `tcp_v4_conn_request`).
fn msstab(ipv6: bool) -> &'static [u16; 4] {
    if ipv6 {
        &MSSTAB6
    } else {
        &MSSTAB
    }
}
/// `COOKIEBITS`: bits of the hash + data part; the minute counter sits above.
const COOKIEBITS: u32 = 24;
const COOKIEMASK: u32 = (1 << COOKIEBITS) - 1;
/// Where the MSS index sits in the cookie's data. Divergence from Linux, which
/// stores it in the low bits (`secure_tcp_syn_cookie`): there a segment k bytes
/// past ISN + 1 (a FIN or data after a lost handshake ACK) decodes as index - k,
/// validates for k <= index, and rebuilds the child with a wrong `rcv_isn`, so its
/// stream starts k bytes late. In the top bits, any 0 < k < 2^22 leaves low bits
/// set and fails, and the peer cannot send past the SYN-ACK's unscaled window.
const MSSIND_SHIFT: u32 = COOKIEBITS - 2;
/// `MAX_SYNCOOKIE_AGE`: a cookie is good for this many minutes (counter values).
const MAX_SYNCOOKIE_AGE: u32 = 2;
/// `TS_OPT_WSCALE_MASK`, `TS_OPT_SACK`, `TS_OPT_ECN` and `TSBITS`.
const TS_OPT_WSCALE_MASK: u32 = 0xf;
const TS_OPT_SACK: u32 = 1 << 4;
/// `TS_OPT_ECN`.
const TS_OPT_ECN: u32 = 1 << 5;
const TSBITS: u32 = 6;
/// `TCP_SYNCOOKIE_VALID`: ACKs are checked as cookies for 2 minutes after an
/// overflow (`tcp_synq_no_recent_overflow`).
pub(crate) const TCP_SYNCOOKIE_VALID: core::time::Duration = core::time::Duration::from_secs(120);

/// The options a cookie's timestamp carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CookieOpts {
    /// The peer's window scale, if it offered one.
    pub wscale: Option<u8>,
    /// SACK permitted.
    pub sack: bool,
    /// ECN agreed (`TS_OPT_ECN`; `cookie_ecn_ok` honours it while `tcp_ecn` is on).
    pub ecn: bool,
}

/// The two `syncookie_secret` keys.
#[derive(Debug, Clone)]
pub(crate) struct CookieSecret {
    keys: [(u64, u64); 2],
}

impl CookieSecret {
    /// Keys derived from 32 bytes.
    pub fn new(key: [u8; 32]) -> CookieSecret {
        let w = |i: usize| u64::from_le_bytes(key[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        CookieSecret {
            keys: [(w(0), w(1)), (w(2), w(3))],
        }
    }

    /// `cookie_hash`: SipHash of the peer's and our address and ports and `count`.
    fn hash(&self, remote: SocketAddr, local: SocketAddr, count: u32, c: usize) -> u32 {
        #[allow(deprecated)] // SipHash-2-4, as Linux's siphash_4u32.
        let mut h = core::hash::SipHasher::new_with_keys(self.keys[c].0, self.keys[c].1);
        for a in [remote.ip(), local.ip()] {
            match a {
                IpAddr::V4(v) => h.write(&v.octets()),
                IpAddr::V6(v) => h.write(&v.octets()),
            }
        }
        h.write_u32(((remote.port() as u32) << 16) | local.port() as u32);
        h.write_u32(count);
        h.finish() as u32
    }

    /// `secure_tcp_syn_cookie`: the ISN for a SYN with sequence number `sseq` whose
    /// MSS has index `data` in its family's table ([`mss_index`]).
    pub fn make(
        &self,
        remote: SocketAddr,
        local: SocketAddr,
        sseq: u32,
        data: u32,
        now: Instant,
    ) -> u32 {
        let count = cookie_time(now);
        self.hash(remote, local, 0, 0)
            .wrapping_add(sseq)
            .wrapping_add(count << COOKIEBITS)
            .wrapping_add(
                self.hash(remote, local, count, 1)
                    .wrapping_add(data << MSSIND_SHIFT)
                    & COOKIEMASK,
            )
    }

    /// `check_tcp_syn_cookie` + `__cookie_v4_check` / `__cookie_v6_check`: the MSS
    /// the cookie in an ACK (`ack - 1`, for the SYN with sequence `seq - 1`) encodes,
    /// from the table of the connection's family, or none if it is not ours or too
    /// old.
    pub fn check(
        &self,
        remote: SocketAddr,
        local: SocketAddr,
        ack: u32,
        seq: u32,
        now: Instant,
    ) -> Option<u16> {
        let count = cookie_time(now);
        let cookie = ack.wrapping_sub(1).wrapping_sub(
            self.hash(remote, local, 0, 0)
                .wrapping_add(seq.wrapping_sub(1)),
        );
        let diff = count.wrapping_sub(cookie >> COOKIEBITS) & (u32::MAX >> COOKIEBITS);
        if diff >= MAX_SYNCOOKIE_AGE {
            return None;
        }
        let data =
            cookie.wrapping_sub(self.hash(remote, local, count.wrapping_sub(diff), 1)) & COOKIEMASK;
        if data & ((1 << MSSIND_SHIFT) - 1) != 0 {
            return None; // not the sequence number the cookie was made for
        }
        msstab(local.is_ipv6())
            .get((data >> MSSIND_SHIFT) as usize)
            .copied()
    }
}

/// `tcp_cookie_time`: minutes of the stack's clock.
fn cookie_time(now: Instant) -> u32 {
    (now.as_nanos() / 60_000_000_000) as u32
}

/// `__cookie_v4_init_sequence` / `__cookie_v6_init_sequence`'s MSS choice: the
/// largest entry of the family's table (`ipv6`) the peer's MSS reaches, else the
/// smallest, even above it (index and value).
pub(crate) fn mss_index(mss: u16, ipv6: bool) -> (u32, u16) {
    let tab = msstab(ipv6);
    let i = (1..tab.len()).rev().find(|&i| mss >= tab[i]).unwrap_or(0);
    (i as u32, tab[i])
}

/// `cookie_init_timestamp`: a TSval (in our ms ticks, before the connection's
/// offset) no later than `ts_now` whose low `TSBITS` carry `o`.
pub(crate) fn init_timestamp(ts_now: u32, o: CookieOpts) -> u32 {
    let mut options = o.wscale.map_or(TS_OPT_WSCALE_MASK, |w| w.min(14) as u32);
    if o.sack {
        options |= TS_OPT_SACK;
    }
    if o.ecn {
        options |= TS_OPT_ECN;
    }
    let mut ts = ((ts_now >> TSBITS) << TSBITS) | options;
    if ts > ts_now {
        ts = ts.wrapping_sub(1 << TSBITS);
    }
    ts
}

/// `cookie_timestamp_decode`: the options from the echoed TSecr (less the offset).
pub(crate) fn decode_timestamp(tsecr: u32) -> CookieOpts {
    let w = tsecr & TS_OPT_WSCALE_MASK;
    CookieOpts {
        wscale: (w != TS_OPT_WSCALE_MASK).then_some(w as u8),
        sack: tsecr & TS_OPT_SACK != 0,
        ecn: tsecr & TS_OPT_ECN != 0,
    }
}

/// `cookie_tcp_check`'s reading of the ACK's timestamp option and
/// `cookie_timestamp_decode`: without one, no options (`tcp_parse_options` with
/// `estab` 0 takes none while `tcp_timestamps` is off, so its own check of that
/// sysctl never fails); with one, the options from its TSecr, less the
/// connection's offset unless the TSecr is 0 (then none is taken off, and 0 reads
/// as window scaling 0). `None` (the ACK makes no child) where a decoded option is
/// off on this host: SACK, window scaling.
pub(crate) fn cookie_timestamp_decode(
    cfg: &crate::config::Config,
    timestamp: Option<(u32, u32)>,
    ts_off: u32,
) -> Option<CookieOpts> {
    let Some((_, ecr)) = timestamp.filter(|_| cfg.tcp_timestamps) else {
        return Some(CookieOpts {
            wscale: None,
            sack: false,
            ecn: false,
        });
    };
    let o = decode_timestamp(if ecr != 0 {
        ecr.wrapping_sub(ts_off)
    } else {
        0
    });
    if (o.sack && !cfg.tcp_sack) || (o.wscale.is_some() && !cfg.tcp_window_scaling) {
        return None;
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_cookie_checks_for_two_minutes_and_only_for_its_connection() {
        let k = CookieSecret::new([5; 32]);
        let t0 = Instant(30_000_000_000);
        // Each family decodes with its own table (__cookie_v4_check, __cookie_v6_check).
        let v4 = (sa("10.0.0.9:4000"), sa("10.0.0.2:80"), MSSTAB);
        let v6 = (sa("[fd00::9]:4000"), sa("[fd00::2]:80"), MSSTAB6);
        for (i, (r, l, mss)) in [v4, v6].into_iter().flat_map(|(r, l, tab)| {
            tab.into_iter()
                .enumerate()
                .map(move |(i, m)| (i, (r, l, m)))
        }) {
            let isn = k.make(r, l, 1000, i as u32, t0);
            let ack = isn.wrapping_add(1);
            assert_eq!(k.check(r, l, ack, 1001, t0), Some(mss));
            assert_eq!(
                k.check(r, l, ack, 1001, Instant(t0.0 + 60_000_000_000)),
                Some(mss)
            );
            assert_eq!(
                k.check(r, l, ack, 1001, Instant(t0.0 + 150_000_000_000)),
                None
            );
            let other_port = SocketAddr::new(r.ip(), 4001);
            assert_eq!(k.check(other_port, l, ack, 1001, t0), None);
            assert_eq!(k.check(r, l, ack, 101_001, t0), None);
            // A segment a few bytes past ISN + 1 is no cookie ACK (Linux's low-bit
            // index would decode as index - k and pass).
            for off in 1..4 {
                assert_eq!(k.check(r, l, ack, 1001 + off, t0), None, "{i} +{off}");
            }
            assert_eq!(CookieSecret::new([6; 32]).check(r, l, ack, 1001, t0), None);
        }
    }

    #[test]
    fn mss_table_and_timestamp_options() {
        assert_eq!(mss_index(1460, false), (3, 1460));
        assert_eq!(mss_index(1400, false), (1, 1300));
        assert_eq!(mss_index(100, false), (0, 536));
        // net/ipv6/syncookies.c's table.
        assert_eq!(mss_index(1460, true), (2, 1440));
        assert_eq!(mss_index(1430, true), (1, 1420));
        assert_eq!(mss_index(9000, true), (3, 8940));
        assert_eq!(mss_index(1000, true), (0, 1220));
        let o = CookieOpts {
            wscale: Some(7),
            sack: true,
            ecn: true,
        };
        let ts = init_timestamp(123_456, o);
        assert!(ts <= 123_456 && 123_456 - ts < 64);
        assert_eq!(decode_timestamp(ts), o);
        let none = CookieOpts {
            wscale: None,
            sack: false,
            ecn: false,
        };
        assert_eq!(decode_timestamp(init_timestamp(5, none)), none);
    }

    #[test]
    fn cookie_timestamp_decode_refuses_options_turned_off() {
        let mut cfg = crate::config::Config::default();
        let o = CookieOpts {
            wscale: Some(7),
            sack: true,
            ecn: false,
        };
        let none = CookieOpts {
            wscale: None,
            sack: false,
            ecn: false,
        };
        let ecr = init_timestamp(123_456, o).wrapping_add(1000);
        assert_eq!(cookie_timestamp_decode(&cfg, Some((9, ecr)), 1000), Some(o));
        assert_eq!(cookie_timestamp_decode(&cfg, None, 1000), Some(none));
        // A TSecr of 0 is not offset: no SACK, window scaling 0.
        let zero = CookieOpts {
            wscale: Some(0),
            ..none
        };
        assert_eq!(
            cookie_timestamp_decode(&cfg, Some((9, 0)), 1000),
            Some(zero)
        );
        cfg.tcp_window_scaling = false;
        assert_eq!(cookie_timestamp_decode(&cfg, Some((9, ecr)), 1000), None);
        assert_eq!(cookie_timestamp_decode(&cfg, Some((9, 0)), 1000), None);
        let no_ws = init_timestamp(123_456, CookieOpts { wscale: None, ..o });
        assert!(cookie_timestamp_decode(&cfg, Some((9, no_ws)), 0).is_some());
        cfg.tcp_sack = false;
        assert_eq!(cookie_timestamp_decode(&cfg, Some((9, no_ws)), 0), None);
        // tcp_timestamps off: the option is not parsed, so not refused.
        cfg = crate::config::Config::default();
        cfg.tcp_timestamps = false;
        assert_eq!(
            cookie_timestamp_decode(&cfg, Some((9, ecr)), 1000),
            Some(none)
        );
    }
}
