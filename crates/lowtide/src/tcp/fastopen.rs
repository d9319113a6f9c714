//! TCP Fast Open (RFC 7413) as Linux's net/ipv4/tcp_fastopen.c has it: the
//! `net.ipv4.tcp_fastopen` bits, the server's keys and cookies (SipHash of the
//! addresses), the client's cookie cache (tcp_metrics.c's `tcp_fastopen_cache`) and
//! the blackhole detection that pauses active Fast Open.

pub use super::sock::TfoClientFail;
use crate::time::Instant;
use core::hash::Hasher;
use core::time::Duration;
use lowtide_wire::tcp::FastOpenOption;
use serde::Serialize;
use std::net::IpAddr;

/// `TFO_CLIENT_ENABLE`: active Fast Open (`MSG_FASTOPEN`, `TCP_FASTOPEN_CONNECT`).
pub const TFO_CLIENT_ENABLE: u32 = 1;
/// `TFO_SERVER_ENABLE`: passive Fast Open on listeners that asked for it.
pub const TFO_SERVER_ENABLE: u32 = 2;
/// `TFO_CLIENT_NO_COOKIE`: send data in the SYN without a cookie.
pub const TFO_CLIENT_NO_COOKIE: u32 = 4;
/// `TFO_SERVER_COOKIE_NOT_REQD`: accept SYN data without a cookie.
pub const TFO_SERVER_COOKIE_NOT_REQD: u32 = 0x200;
/// `TFO_SERVER_WO_SOCKOPT1`: every listener does Fast Open, without `TCP_FASTOPEN`.
pub const TFO_SERVER_WO_SOCKOPT1: u32 = 0x400;
/// `TCP_FASTOPEN_KEY_LENGTH`: bytes in one key.
pub const TCP_FASTOPEN_KEY_LENGTH: usize = 16;
/// `TCP_FASTOPEN_KEY_MAX`: a primary and a backup key.
pub const TCP_FASTOPEN_KEY_MAX: usize = 2;
/// `TCP_FASTOPEN_COOKIE_SIZE`: the cookie a Linux server makes (one SipHash).
pub const TCP_FASTOPEN_COOKIE_SIZE: usize = 8;
/// How long a reset Fast Open child keeps its place in the listener's queue
/// (`reqsk_fastopen_remove`: 60 s, against spoofed RSTs).
pub const TFO_RST_HOLD: Duration = Duration::from_secs(60);

/// A Fast Open context: the primary key and, for rotation, a backup
/// (`struct tcp_fastopen_context`). Each key is 16 bytes, read as two little-endian
/// u64 for SipHash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FastOpenKeys {
    /// The keys, primary first; empty until one is set or drawn.
    pub keys: Vec<[u8; TCP_FASTOPEN_KEY_LENGTH]>,
}

impl FastOpenKeys {
    /// Keys from raw bytes (`TCP_FASTOPEN_KEY`): 16 (primary) or 32 (with backup).
    pub fn from_bytes(b: &[u8]) -> Option<FastOpenKeys> {
        if b.len() != TCP_FASTOPEN_KEY_LENGTH && b.len() != 2 * TCP_FASTOPEN_KEY_LENGTH {
            return None;
        }
        let keys = b
            .chunks_exact(TCP_FASTOPEN_KEY_LENGTH)
            .map(|c| c.try_into().expect("16 bytes"))
            .collect();
        Some(FastOpenKeys { keys })
    }

    /// The keys as `TCP_FASTOPEN_KEY` returns them (`tcp_fastopen_get_cipher`).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.keys.iter().flatten().copied().collect()
    }

    /// `proc_tcp_fastopen_key` (write): `proc_dostring` keeps the text up to its
    /// first newline and at most 73 bytes (the table's `maxlen` less one); a `,`
    /// splits off a backup key; each key is `sscanf_key`'s.
    pub fn parse(text: &str) -> Option<FastOpenKeys> {
        let text = text.split(['\n', '\0']).next().unwrap_or("").as_bytes();
        let text = &text[..text.len().min(PROC_KEY_MAXLEN - 1)];
        let mut parts = text.splitn(2, |&b| b == b',');
        let mut keys = vec![sscanf_key(parts.next()?)?];
        if let Some(backup) = parts.next() {
            keys.push(sscanf_key(backup)?);
        }
        Some(FastOpenKeys { keys })
    }

    /// `proc_tcp_fastopen_key` (read): zeros when no key is set.
    pub fn format(&self) -> String {
        let zero = [[0u8; TCP_FASTOPEN_KEY_LENGTH]];
        let keys: &[[u8; TCP_FASTOPEN_KEY_LENGTH]] = match self.keys.is_empty() {
            true => &zero,
            false => &self.keys,
        };
        let words = |k: &[u8; 16]| -> String {
            let w: Vec<String> = k
                .chunks_exact(4)
                .map(|c| format!("{:08x}", u32::from_le_bytes(c.try_into().expect("4"))))
                .collect();
            w.join("-")
        };
        keys.iter().map(words).collect::<Vec<_>>().join(",")
    }

    /// `tcp_fastopen_cookie_gen`: the cookie of the primary key for a SYN from
    /// `src` to `dst`, or none without a key.
    pub fn cookie_gen(&self, src: IpAddr, dst: IpAddr) -> Option<FastOpenOption> {
        self.keys.first().map(|k| cookie_gen_cipher(k, src, dst))
    }

    /// `tcp_fastopen_cookie_gen_check`: which key (1 primary, 2 backup) made
    /// `cookie`, if any, with the primary key's cookie.
    pub fn cookie_check(
        &self,
        src: IpAddr,
        dst: IpAddr,
        cookie: &FastOpenOption,
    ) -> (u8, Option<FastOpenOption>) {
        let valid = self.cookie_gen(src, dst);
        for (i, k) in self.keys.iter().enumerate() {
            let c = cookie_gen_cipher(k, src, dst);
            if c.bytes() == cookie.bytes() {
                return (i as u8 + 1, valid);
            }
        }
        (0, valid)
    }
}

/// `proc_tcp_fastopen_key`'s table `maxlen`: two keys of 32 hex digits, with room
/// for their dashes and the comma.
const PROC_KEY_MAXLEN: usize =
    TCP_FASTOPEN_KEY_LENGTH * 2 * TCP_FASTOPEN_KEY_MAX + TCP_FASTOPEN_KEY_MAX * 5;

/// `sscanf_key`: `sscanf(buf, "%x-%x-%x-%x")` must convert four words, as the
/// kernel's `vsscanf` reads them: spaces skipped before each, a `0x` prefix taken, a
/// first hex digit required, the digits read modulo 2^64 and stored as the low 32
/// bits; each `-` matched exactly; what follows the fourth word is not read.
fn sscanf_key(buf: &[u8]) -> Option<[u8; TCP_FASTOPEN_KEY_LENGTH]> {
    let mut key = [0u8; TCP_FASTOPEN_KEY_LENGTH];
    let mut i = 0;
    for w in 0..4 {
        if w > 0 {
            (buf.get(i) == Some(&b'-')).then_some(())?;
            i += 1;
        }
        while buf.get(i).is_some_and(|b| b" \t\n\x0b\x0c\r".contains(b)) {
            i += 1;
        }
        buf.get(i).filter(|b| b.is_ascii_hexdigit())?;
        // _parse_integer_fixup_radix: "0x" goes for base 16.
        if buf[i] == b'0' && buf.get(i + 1).is_some_and(|b| b | 0x20 == b'x') {
            i += 2;
        }
        let mut v = 0u64;
        while let Some(d) = buf.get(i).and_then(|b| (*b as char).to_digit(16)) {
            v = v.wrapping_mul(16).wrapping_add(d as u64);
            i += 1;
        }
        key[w * 4..w * 4 + 4].copy_from_slice(&(v as u32).to_le_bytes());
    }
    Some(key)
}

/// `__tcp_fastopen_cookie_gen_cipher`: SipHash-2-4 of the SYN's source then
/// destination address (4 or 16 bytes each), keyed with the key's two little-endian
/// halves; the cookie is the hash's little-endian bytes. An IPv4-mapped IPv6 peer is
/// hashed as the IPv4 packet it arrived in.
pub fn cookie_gen_cipher(
    key: &[u8; TCP_FASTOPEN_KEY_LENGTH],
    src: IpAddr,
    dst: IpAddr,
) -> FastOpenOption {
    let k0 = u64::from_le_bytes(key[..8].try_into().expect("8 bytes"));
    let k1 = u64::from_le_bytes(key[8..].try_into().expect("8 bytes"));
    #[allow(deprecated)] // core's SipHasher is SipHash-2-4, Linux's siphash.
    let mut h = core::hash::SipHasher::new_with_keys(k0, k1);
    match (src.to_canonical(), dst.to_canonical()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            h.write(&s.octets());
            h.write(&d.octets());
        }
        (s, d) => {
            h.write(&v6_octets(s));
            h.write(&v6_octets(d));
        }
    }
    FastOpenOption::cookie(false, &h.finish().to_le_bytes())
}

fn v6_octets(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// Parses a `net.ipv4.tcp_fastopen`-style integer as `proc_dointvec` does
/// (`0x` hexadecimal, a leading `0` octal, else decimal; an optional sign).
pub fn parse_c_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()?
    } else if t.len() > 1 && t.starts_with('0') {
        i64::from_str_radix(&t[1..], 8).ok()?
    } else {
        t.parse::<i64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// One destination's Fast Open entry in the metrics cache (`struct
/// tcp_fastopen_metrics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheEntry {
    /// The server's MSS as last seen (0: unknown).
    pub mss: u16,
    /// Consecutive SYN-data losses.
    pub syn_loss: u16,
    /// Without a cookie: 1 asks in the experimental format next, 2 in option 34.
    pub try_exp: u8,
    /// When the last SYN-data loss happened.
    pub last_syn_loss: Option<Instant>,
    /// The cookie (`len == 0` and none: no cookie).
    pub cookie: Option<FastOpenOption>,
}

/// Stack-wide blackhole state (`tfo_active_disable_stamp`,
/// `tfo_active_disable_times`).
#[derive(Debug, Default, Clone, Copy)]
pub struct Blackhole {
    /// When active Fast Open was last paused.
    pub stamp: Option<Instant>,
    /// How many times it was paused since it last worked (reset to 0 by a
    /// connection that got data after a pause: `tcp_fastopen_active_disable_ofo_check`).
    pub times: u32,
}

impl Blackhole {
    /// `tcp_fastopen_active_disable`: pause active Fast Open (if the timeout sysctl
    /// is not 0); true when it did (the caller counts `TCPFastOpenBlackhole`).
    pub fn disable(&mut self, now: Instant, timeout_sec: u32) -> bool {
        if timeout_sec == 0 {
            return false;
        }
        self.stamp = Some(now);
        self.times += 1;
        true
    }

    /// `tcp_fastopen_active_should_disable`: whether active Fast Open is paused
    /// now: `timeout << min(times - 1, 6)` seconds after the last pause. `Some(true)`
    /// means paused, `Some(false)` not paused though a pause happened (the socket
    /// marks `syn_fastopen_ch`), `None` never paused.
    pub fn should_disable(&self, now: Instant, timeout_sec: u32) -> Option<bool> {
        if timeout_sec == 0 || self.times == 0 {
            return None;
        }
        let mult = 1u64 << (self.times - 1).min(6);
        let until = self.stamp.unwrap_or(now) + Duration::from_secs(mult * timeout_sec as u64);
        Some(now < until)
    }
}

/// A listener's Fast Open queue (`struct fastopen_queue`).
#[derive(Debug, Default, Clone)]
pub(crate) struct FastOpenQueue {
    /// `max_qlen`: most children at once that have not finished their handshake
    /// (plus reset ones held back); 0 turns passive Fast Open off.
    pub max_qlen: u32,
    /// `qlen`: such children now, plus the held-back reset ones.
    pub qlen: u32,
    /// `rskq_rst_head`: when each held-back reset child may leave (oldest first).
    pub rst: std::collections::VecDeque<Instant>,
}

impl FastOpenQueue {
    /// `tcp_fastopen_queue_check`: room for one more child, making room by letting
    /// an expired reset child go. `false` on overflow (the caller counts
    /// `TCPFastOpenListenOverflow` when `max_qlen` is not 0).
    pub fn check(&mut self, now: Instant) -> Result<(), bool> {
        if self.max_qlen == 0 {
            return Err(false);
        }
        if self.qlen >= self.max_qlen {
            match self.rst.front() {
                Some(&expires) if expires <= now => {
                    self.rst.pop_front();
                    self.qlen -= 1;
                }
                _ => return Err(true),
            }
        }
        Ok(())
    }

    /// `reqsk_fastopen_remove`: a child leaves the queue; one reset after `accept`
    /// while the listener listens stays counted for [`TFO_RST_HOLD`].
    pub fn remove(&mut self, now: Instant, reset: bool, accepted: bool) {
        self.qlen = self.qlen.saturating_sub(1);
        if accepted && reset {
            self.rst.push_back(now + TFO_RST_HOLD);
            self.qlen += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn cookies_are_linux_siphash_of_the_addresses() {
        // The cookies Linux makes for these keys and addresses (run_all.py's
        // TFO_COOKIE for ipv4 and ipv6, and the key of the simple*.pkt scripts).
        let k = FastOpenKeys::parse("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4").expect("key");
        let c = k
            .cookie_gen(ip("192.0.2.1"), ip("192.168.0.1"))
            .expect("cookie");
        assert_eq!(c.bytes(), [0x30, 0x21, 0xb9, 0xd8, 0x89, 0x01, 0x7e, 0xeb]);
        let mapped = k.cookie_gen(ip("::ffff:192.0.2.1"), ip("::ffff:192.168.0.1"));
        assert_eq!(mapped, Some(c));
        let c6 = k
            .cookie_gen(ip("fd3d:fa7b:d17d::1"), ip("fd3d:a0b:17d6::1"))
            .expect("cookie");
        assert_eq!(c6.bytes(), [0xc1, 0xd1, 0xe9, 0x74, 0x2a, 0x47, 0xa9, 0xbc]);
        let k2 = FastOpenKeys::parse("a0bf63f7-ed803d81-cd641d30-cebc4a90").expect("key");
        let c2 = k2
            .cookie_gen(ip("10.248.0.2"), ip("192.168.0.2"))
            .expect("cookie");
        assert_eq!(c2.bytes(), [0x00, 0xab, 0xaa, 0xab, 0xe8, 0xe9, 0x54, 0xc2]);
    }

    #[test]
    fn key_text_and_bytes_round_trip_with_a_backup() {
        let t = "a0bf63f7-ed803d81-cd641d30-cebc4a90,00000001-00000002-00000003-00000004";
        let k = FastOpenKeys::parse(t).expect("keys");
        assert_eq!(k.keys.len(), 2);
        assert_eq!(&k.keys[0][..4], &[0xf7, 0x63, 0xbf, 0xa0]);
        assert_eq!(k.format(), t);
        assert_eq!(FastOpenKeys::from_bytes(&k.to_bytes()), Some(k));
        assert_eq!(
            FastOpenKeys::default().format(),
            "00000000-00000000-00000000-00000000"
        );
        assert_eq!(FastOpenKeys::parse("1-2-3"), None);
        assert_eq!(FastOpenKeys::parse("1-2-3-zz"), None);
    }

    /// sscanf_key's "%x-%x-%x-%x" as the kernel's vsscanf reads it, and
    /// proc_dostring's first line of at most 73 bytes.
    #[test]
    fn key_text_is_read_as_sscanf() {
        let k = |t: &str| FastOpenKeys::parse(t).map(|k| k.format());
        let one = Some("00000001-00000002-00000003-00000004".to_string());
        assert_eq!(k("1-2-3-4"), one);
        assert_eq!(
            k("1-2-3-4-5"),
            one,
            "what follows the fourth word is not read"
        );
        assert_eq!(k("1-2-3-4xyz"), one);
        assert_eq!(
            k(" 1- 2-\t3-0x4\n5-6-7-8"),
            one,
            "spaces before a word, 0x, one line"
        );
        assert_eq!(k("1 -2-3-4"), None, "a dash matched exactly");
        assert_eq!(k("1-2-3-x4"), None, "a hex digit first");
        assert_eq!(k("1-2-3-"), None);
        assert_eq!(
            k("1-2-3-0x"),
            one.as_ref()
                .map(|_| "00000001-00000002-00000003-00000000".to_string())
        );
        assert_eq!(k("1-2-3-100000004"), one, "the low 32 bits");
        assert_eq!(
            k("1-2-3-4,5-6-7-8,9"),
            Some("00000001-00000002-00000003-00000004,00000005-00000006-00000007-00000008".into())
        );
        assert_eq!(k("1-2-3-4,zz"), None);
        assert_eq!(k("1-2-3-4,"), None, "an empty backup key");
        // Past 73 bytes the rest is cut: the backup key loses its last word.
        let long = format!("{},1-2-3-4", "0000000000000001-2-3-4".repeat(3));
        assert_eq!(k(&long[..]), None);
        assert_eq!(FastOpenKeys::from_bytes(&[0; 3]), None);
    }

    #[test]
    fn cookie_check_names_the_key_that_made_it() {
        let k = FastOpenKeys::parse("1-2-3-4,5-6-7-8").expect("keys");
        let (s, d) = (ip("10.0.0.2"), ip("10.0.0.1"));
        let primary = k.cookie_gen(s, d).expect("cookie");
        let backup = cookie_gen_cipher(&k.keys[1], s, d);
        assert_eq!(k.cookie_check(s, d, &primary), (1, Some(primary)));
        assert_eq!(k.cookie_check(s, d, &backup), (2, Some(primary)));
        let short = FastOpenOption::cookie(false, &primary.bytes()[..4]);
        assert_eq!(k.cookie_check(s, d, &short).0, 0);
        assert_eq!(
            FastOpenKeys::default().cookie_check(s, d, &primary),
            (0, None)
        );
    }

    #[test]
    fn proc_dointvec_bases() {
        assert_eq!(parse_c_int("0x70403"), Some(0x70403));
        assert_eq!(parse_c_int("010"), Some(8));
        assert_eq!(parse_c_int(" 3\n"), Some(3));
        assert_eq!(parse_c_int("-1"), Some(-1));
        assert_eq!(parse_c_int("x"), None);
    }

    #[test]
    fn blackhole_pause_doubles_up_to_64_times() {
        let mut b = Blackhole::default();
        let t0 = Instant::ZERO + Duration::from_secs(10);
        assert_eq!(b.should_disable(t0, 3600), None);
        assert!(!b.disable(t0, 0), "timeout 0: never paused");
        assert!(b.disable(t0, 10));
        assert_eq!(
            b.should_disable(t0 + Duration::from_secs(9), 10),
            Some(true)
        );
        assert_eq!(
            b.should_disable(t0 + Duration::from_secs(10), 10),
            Some(false)
        );
        for _ in 0..9 {
            b.disable(t0, 10);
        }
        assert_eq!(
            b.should_disable(t0 + Duration::from_secs(639), 10),
            Some(true)
        );
        assert_eq!(
            b.should_disable(t0 + Duration::from_secs(640), 10),
            Some(false)
        );
        assert_eq!(b.should_disable(t0, 0), None);
    }

    #[test]
    fn queue_check_and_reset_hold_as_reqsk_fastopen_remove() {
        let t0 = Instant::ZERO;
        let mut q = FastOpenQueue::default();
        assert_eq!(
            q.check(t0),
            Err(false),
            "max_qlen 0: off, no overflow counted"
        );
        q.max_qlen = 1;
        assert_eq!(q.check(t0), Ok(()));
        q.qlen = 1;
        assert_eq!(q.check(t0), Err(true), "full");
        q.remove(t0, false, true);
        assert_eq!(q.qlen, 0, "handshake done");
        q.qlen = 1;
        q.remove(t0, true, false);
        assert_eq!(q.qlen, 0, "reset before accept: gone at once");
        q.qlen = 1;
        q.remove(t0, true, true);
        assert_eq!(
            (q.qlen, q.rst.len()),
            (1, 1),
            "reset after accept: held 60 s"
        );
        assert_eq!(q.check(t0 + Duration::from_secs(59)), Err(true));
        assert_eq!(q.check(t0 + TFO_RST_HOLD), Ok(()));
        assert_eq!((q.qlen, q.rst.len()), (0, 0));
    }
}
