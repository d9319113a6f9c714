//! A packetdrill-style driver on the Pair harness: host A is the stack under test,
//! host B's real stack is cut off after the handshake and the test plays B, forging
//! its ACKs (with SACK blocks) at scripted times. Sequence numbers are relative, as in
//! packetdrill scripts: A's first data byte is 1.

use super::*;
use lowtide::{Config, SocketHandle, TcpState};
use lowtide_wire::tcp::{SackBlock, TcpFlags, TcpOptions, TcpRepr};
use std::net::SocketAddr;
use std::time::Duration;

/// `tcpi_snd_ssthresh` before any reduction (`TCP_INFINITE_SSTHRESH`).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One data segment A put on the wire: relative `start..end`, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub at: lowtide::Instant,
    pub start: u32,
    pub end: u32,
}

pub struct Drill {
    pub p: Pair,
    pub c: SocketHandle,
    /// The forged ACKs' source (B) and destination (A).
    peer: SocketAddr,
    me: SocketAddr,
    /// B's next sequence number, A's initial sequence number, B's window scale.
    b_seq: u32,
    a_isn: u32,
    b_wscale: u8,
    /// Window the forged ACKs advertise, bytes.
    pub win: u32,
    /// Bytes the application still wants to write.
    unwritten: usize,
    /// How many of the dropped (that is, all) segments the test has looked at.
    seen: usize,
}

impl Drill {
    /// Handshake with `rtt` and `cfg` (timestamps off: packetdrill's peers send none),
    /// then every packet between the real stacks is dropped.
    pub fn new(cfg: Config, rtt: Duration) -> Drill {
        Self::with_sndbuf(cfg, rtt, Some(200_000))
    }

    /// [`Drill::new`] with `SO_SNDBUF` `sndbuf`, or the autotuned send buffer (None).
    pub fn with_sndbuf(mut cfg: Config, rtt: Duration, sndbuf: Option<u32>) -> Drill {
        cfg.tcp_timestamps = false;
        Self::with_pair(Pair::new(cfg), rtt, sndbuf)
    }

    /// [`Drill::with_sndbuf`] on a pair set up by the caller (own configurations,
    /// routes), which should turn timestamps off.
    pub fn with_pair(mut p: Pair, rtt: Duration, sndbuf: Option<u32>) -> Drill {
        p.delay = rtt / 2;
        p.record = true;
        let l = p.b.listen(addr(B, 80), 4).unwrap();
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_until(rtt * 3, |p| p.b.accept(l).is_ok());
        let peer = learn(&p, Dir::AtoB);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        let b_wscale = p
            .wire
            .iter()
            .map(|(_, d, pk)| (d, Seg::parse(pk)))
            .find(|(d, s)| **d == Dir::BtoA && s.has(TcpFlags::SYN))
            .and_then(|(_, s)| s.th.options.wscale)
            .unwrap_or(0);
        let a_isn = peer.ack.wrapping_sub(1);
        p.filter = Some(Box::new(|_, _| Verdict::Drop));
        p.dropped.clear();
        if let Some(b) = sndbuf {
            p.a.socket(c).set_sndbuf(p.now, b).unwrap();
        }
        Drill {
            p,
            c,
            peer: peer.src,
            me: peer.dst,
            b_seq: peer.seq,
            a_isn,
            b_wscale,
            win: 65535,
            unwritten: 0,
            seen: 0,
        }
    }

    /// A CUBIC sender with MSS 1000 (packetdrill's `<mss 1000>`), as the scripts'
    /// `defaults.sh` sets up.
    pub fn cubic(rtt: Duration) -> Drill {
        Drill::new(Self::cubic_cfg(1000), rtt)
    }

    /// packetdrill's defaults.sh as far as lowtide has them: CUBIC, no slow start
    /// after idle; MSS `mss` (no timestamps).
    pub fn cubic_cfg(mss: u32) -> Config {
        Config {
            tcp_congestion_control: "cubic".into(),
            tcp_slow_start_after_idle: false,
            mtu: mss + 40,
            ..Default::default()
        }
    }

    /// The peer's window from now on, announced at once by an ACK of nothing new (as
    /// the handshake's last ACK of a script announces it).
    pub fn set_win(&mut self, win: u32) {
        self.win = win;
        // tcpi_bytes_acked counts the SYN (tcp_snd_una_update): it is snd_una - ISN.
        let una = self.info().bytes_acked as u32;
        self.ack(Duration::ZERO, una);
    }

    /// `write(fd, ..., n)`: queued now and topped up as the send buffer frees.
    pub fn write(&mut self, n: usize) {
        self.unwritten += n;
        self.top_up();
    }

    fn top_up(&mut self) {
        while self.unwritten > 0 {
            let chunk = vec![0u8; self.unwritten.min(65536)];
            match self.p.a.send(self.p.now, self.c, &chunk) {
                Ok(n) if n > 0 => self.unwritten -= n,
                _ => break,
            }
        }
        self.p.flush();
    }

    /// Advances virtual time by `d`, letting A's timers run.
    pub fn wait(&mut self, d: Duration) {
        self.p.drive_for(d);
        self.top_up();
    }

    /// `+d < . 1:1(0) ack <ack> win <win>`.
    pub fn ack(&mut self, d: Duration, ack: u32) {
        self.ack_sack(d, ack, &[]);
    }

    /// `+d < . 1:1(0) ack <ack> win <win> <sack l:r ...>`.
    pub fn ack_sack(&mut self, d: Duration, ack: u32, sack: &[(u32, u32)]) {
        self.ack_flags(d, ack, sack, TcpFlags::ACK);
    }

    /// `+d < E. 1:1(0) ack <ack> win <win>`: an ACK echoing a CE mark.
    pub fn ack_ece(&mut self, d: Duration, ack: u32) {
        self.ack_flags(d, ack, &[], TcpFlags::ACK | TcpFlags::ECE);
    }

    fn ack_flags(&mut self, d: Duration, ack: u32, sack: &[(u32, u32)], flags: TcpFlags) {
        self.p.drive_for(d);
        let mut options = TcpOptions::default();
        for (i, &(l, r)) in sack.iter().enumerate() {
            options.sack[i] = SackBlock {
                start: self.a_isn.wrapping_add(l),
                end: self.a_isn.wrapping_add(r),
            };
        }
        options.sack_len = sack.len() as u8;
        let th = TcpRepr {
            seq: self.b_seq,
            ack: self.a_isn.wrapping_add(ack),
            flags,
            window: (self.win >> self.b_wscale).min(65535) as u16,
            options,
            ..Default::default()
        };
        let pkt = build(self.peer, self.me, &th, &[], 9);
        self.p.inject(false, &pkt);
        self.top_up();
    }

    /// A's data segments since the last call (one per wire segment: the harness cuts
    /// TSO packets to MSS).
    pub fn sent(&mut self) -> Vec<Sent> {
        let new = self.p.dropped[self.seen..]
            .iter()
            .filter(|(_, d, _)| *d == Dir::AtoB)
            .map(|(at, _, pk)| (*at, Seg::parse(pk)))
            .filter(|(_, s)| !s.payload.is_empty())
            .map(|(at, s)| {
                let start = s.th.seq.wrapping_sub(self.a_isn);
                Sent {
                    at,
                    start,
                    end: start + s.payload.len() as u32,
                }
            })
            .collect();
        self.seen = self.p.dropped.len();
        new
    }

    /// The byte ranges A sent since the last call, adjacent segments merged
    /// (packetdrill's `> P. a:b(n)` lines, however they were cut into TSO packets).
    pub fn sent_ranges(&mut self) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = Vec::new();
        for s in self.sent() {
            match out.last_mut() {
                Some(last) if last.1 == s.start => last.1 = s.end,
                _ => out.push((s.start, s.end)),
            }
        }
        out
    }

    pub fn info(&self) -> lowtide::TcpInfo {
        self.p.a.info(self.p.now, self.c).unwrap()
    }

    pub fn cwnd(&self) -> u32 {
        self.info().snd_cwnd
    }

    pub fn ssthresh(&self) -> u32 {
        self.info().snd_ssthresh
    }

    pub fn ca_state(&self) -> &'static str {
        self.info().ca_state
    }
}
