//! A hostile peer beside a run's flows (issue 27): a third endpoint (10.0.0.3, and
//! the addresses it spoofs) on its own clean 10 Gbit/s path to host B, the victim,
//! with the forward path's delay. It writes its segments by hand and attacks B's
//! listener while the run's flows go on:
//!
//! - [`Attack::OfoFill`]: one connection, then 1-byte segments with 1-byte gaps
//!   over the window B advertises (its upper half first, then the lower half, so
//!   the later, lower segments make B prune the higher ones), never the byte at
//!   `rcv_nxt`;
//! - [`Attack::Prepend`]: one connection, a large out-of-order run of full
//!   segments from the middle of the window, then segments each starting one byte
//!   lower than the last, overlapping the run (the quadratic merge of issue 27
//!   item 2);
//! - [`Attack::ConnFlood`]: spoofed SYNs from as many addresses (half-open
//!   handshakes that overflow the SYN queue, so that B sends cookies), then
//!   handshakes from the peer's own address completed and left silent.
//!
//! B accepts the peer's connections and never reads them, the worst case for its
//! memory. After every receive batch of B the victim's bound is checked
//! ([`HostileResult::violation`]): an attacked connection's `sk_rmem_alloc` within
//! its `sk_rcvbuf` plus one arriving skb (`tcp_try_rmem_schedule` admits a segment
//! while the buffer is not full, as Linux's), and for the flood B's connection
//! table within the flows, the SYN queue (backlog + 1) and the silent handshakes.

use crate::world::{Event, World, HOST_B, LISTEN_PORT};
use lowtide::tcp::skbuff::rx_truesize;
use lowtide::{Instant, SocketHandle};
use lowtide_link::{LinkConfig, LinkDir, Pipe, WireSeg};
use lowtide_wire::build::{syn_options, tcp_packet, Csum};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
use serde::Serialize;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The hostile peer's own address (its spoofed SYNs come from 10.1.0.0/16 and up).
pub const HOSTILE_ADDR: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
/// Its path's rate, both ways: faster than any drawn link, so the attack is not
/// slowed by its own wire.
const HOSTILE_RATE_BPS: u64 = 10_000_000_000;
/// Link directions of the peer's path in [`World::links`]: to B, and back.
pub(crate) const HOSTILE_TX: usize = 2;
pub(crate) const HOSTILE_RX: usize = 3;
/// At most this many 1-byte segments fill the window (20,000 truesizes are 18 MB,
/// far beyond any buffer the runs draw).
const FILL_MAX_SEGS: u32 = 20_000;
/// The prepend attack's run: at most this many full segments of [`RUN_SEG`] bytes.
const RUN_MAX_SEGS: u32 = 2_000;
const RUN_SEG: u32 = 1_000;
/// Then at most this many segments of [`PREPEND_LEN`] bytes, each one byte lower.
const PREPEND_MAX: u32 = 5_000;
const PREPEND_LEN: u32 = 200;
/// The flood: spoofed SYNs, then handshakes completed and left silent.
const FLOOD_SYNS: u32 = 2_000;
pub(crate) const FLOOD_SILENT: u32 = 64;
/// The peer's own SYNs are sent again after 1 s, doubling, this many times.
const SYN_RETRIES: u32 = 8;
const SYN_RTO_NS: u64 = 1_000_000_000;
/// Packets put on the peer's wire per event.
const BURST: usize = 64;
/// The peer's first port.
const BASE_PORT: u16 = 20_000;
const ZEROS: [u8; RUN_SEG as usize] = [0; RUN_SEG as usize];

/// A hostile peer's attack (`sim stream --hostile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attack {
    /// 1-byte segments with 1-byte gaps over the window.
    OfoFill,
    /// Segments each starting one byte lower than the last, before a large
    /// out-of-order run.
    Prepend,
    /// Spoofed SYNs (half-open handshakes), then silent completed handshakes.
    ConnFlood,
}

impl Attack {
    /// Every attack, in the order the soak draws them.
    pub const ALL: [Attack; 3] = [Attack::OfoFill, Attack::Prepend, Attack::ConnFlood];

    /// The name `--hostile` takes.
    pub fn name(self) -> &'static str {
        match self {
            Attack::OfoFill => "ofo-fill",
            Attack::Prepend => "prepend",
            Attack::ConnFlood => "conn-flood",
        }
    }
}

impl core::fmt::Display for Attack {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Attack {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Attack::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("{s}: not an attack (ofo-fill, prepend, conn-flood)"))
    }
}

/// What the hostile peer did and what the victim (host B) held.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostileResult {
    /// The attack.
    pub attack: String,
    /// Segments the peer sent.
    pub packets: u64,
    /// Handshakes of its own it completed (a SYN-ACK came back).
    pub handshakes: u32,
    /// The attacked connection's largest `sk_rmem_alloc` (bytes), and its
    /// `sk_rcvbuf` then (out-of-order attacks).
    pub peak_rmem: u64,
    /// See `peak_rmem`.
    pub rcvbuf: u32,
    /// B's connection table at its fullest (SYN-RECV children included).
    pub peak_connections: u64,
    /// B's `tcp_memory_allocated` at its highest (pages).
    pub peak_pages: u64,
    /// The first time the victim's bound was broken, with the figures.
    pub violation: Option<String>,
    /// The attack never took place (no handshake, or no window learned).
    pub not_run: Option<String>,
}

/// One connection the peer opens from its own address.
struct PeerConn {
    port: u16,
    isn: u32,
    /// B's ISN, once its SYN-ACK came.
    irs: Option<u32>,
    syns: u32,
    syn_at: u64,
    /// Times the handshake's ACK and the probe went out, and the last time.
    probes: u32,
    probe_at: u64,
    /// B's window scale and last TSval.
    wscale: u8,
    ts_recent: u32,
    /// The attack's span (bytes above `rcv_nxt`), once a dup ACK told B's window.
    span: Option<u32>,
}

/// The hostile peer's state.
pub(crate) struct HostilePeer {
    attack: Attack,
    conns: Vec<PeerConn>,
    /// Packets ready for the wire.
    out: VecDeque<Vec<u8>>,
    /// Next segment of the out-of-order attack, and next spoofed SYN.
    next: u32,
    flood_next: u32,
    /// When the peer's wire is free again (ns).
    pub link_free_at: u64,
    /// B's sockets of the peer's connections.
    pub victims: Vec<SocketHandle>,
    pub result: HostileResult,
    /// The bound on B's connection table (flood).
    conn_bound: u64,
    /// The largest skb B may queue from the peer (GRO may merge its run).
    max_skb: u32,
    seed: u64,
}

impl HostilePeer {
    /// A peer for `attack`; `flows` and `backlog` bound the flood's victim table.
    pub fn new(attack: Attack, seed: u64, flows: u32, backlog: u32, gro: bool) -> HostilePeer {
        let n = match attack {
            Attack::ConnFlood => FLOOD_SILENT,
            _ => 1,
        };
        let conns = (0..n)
            .map(|i| PeerConn {
                port: BASE_PORT + i as u16,
                isn: crate::payload::splitmix64(seed ^ i as u64) as u32,
                irs: None,
                syns: 0,
                syn_at: 0,
                probes: 0,
                probe_at: 0,
                wscale: 0,
                ts_recent: 0,
                span: None,
            })
            .collect();
        let max_skb = match (attack, gro) {
            (Attack::Prepend, true) => 65_536,
            (Attack::Prepend, false) => RUN_SEG,
            _ => 1,
        };
        HostilePeer {
            attack,
            conns,
            out: VecDeque::new(),
            next: 0,
            flood_next: 0,
            link_free_at: 0,
            victims: Vec::new(),
            result: HostileResult {
                attack: attack.name().into(),
                ..HostileResult::default()
            },
            conn_bound: flows as u64 + backlog as u64 + 1 + n as u64,
            max_skb,
            seed,
        }
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(HOSTILE_ADDR), port)
    }

    fn victim() -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), LISTEN_PORT)
    }

    /// A segment of connection `c` (TSval: the time in ms).
    fn seg(&self, c: usize, now: u64, flags: TcpFlags, off: u32, payload: &[u8]) -> Vec<u8> {
        let k = &self.conns[c];
        let irs = k.irs.unwrap_or(0);
        let th = TcpRepr {
            seq: k.isn.wrapping_add(1).wrapping_add(off),
            ack: irs.wrapping_add(1),
            flags,
            window: 65535,
            options: TcpOptions {
                timestamp: Some(((now / 1_000_000) as u32, k.ts_recent)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        tcp_packet(
            Self::addr(k.port),
            Self::victim(),
            &th,
            payload,
            1,
            Csum::Full,
        )
    }

    /// A SYN from `src` with `isn` (MSS 1460, window scale 7, SACK, timestamps).
    fn syn(src: SocketAddr, isn: u32, now: u64) -> Vec<u8> {
        let th = TcpRepr {
            seq: isn,
            flags: TcpFlags::SYN,
            window: 65535,
            options: syn_options((now / 1_000_000) as u32),
            ..TcpRepr::default()
        };
        tcp_packet(src, Self::victim(), &th, &[], 1, Csum::Full)
    }

    /// Spoofed SYN `i`: its own address in 10.1.0.0/16 and up, port and ISN hashed.
    fn spoofed_syn(&self, i: u32, now: u64) -> Vec<u8> {
        let h = crate::payload::splitmix64(self.seed ^ (0x5eed << 32) ^ i as u64);
        let ip = Ipv4Addr::new(10, 1 + (i >> 16) as u8, (i >> 8) as u8, i as u8);
        let src = SocketAddr::new(IpAddr::V4(ip), 1024 + (h % 60_000) as u16);
        Self::syn(src, (h >> 32) as u32, now)
    }

    /// The next packet for the wire, if any now.
    pub fn next_packet(&mut self, now: u64) -> Option<Vec<u8>> {
        if let Some(p) = self.out.pop_front() {
            return Some(p);
        }
        if self.attack == Attack::ConnFlood && self.flood_next < FLOOD_SYNS {
            self.flood_next += 1;
            return Some(self.spoofed_syn(self.flood_next - 1, now));
        }
        self.syn_due(now)
            .or_else(|| self.probe_due(now))
            .or_else(|| self.attack_segment(now))
    }

    /// The out-of-order attacks' handshake ACK and probe again, while no ACK told
    /// the window (a listener whose accept queue was full dropped them).
    fn probe_due(&mut self, now: u64) -> Option<Vec<u8>> {
        let k = self.conns.first()?;
        let due = self.attack != Attack::ConnFlood
            && k.irs.is_some()
            && k.span.is_none()
            && (1..=SYN_RETRIES).contains(&k.probes)
            && now >= k.probe_at + (SYN_RTO_NS << (k.probes - 1));
        if !due {
            return None;
        }
        self.probe(0, now);
        self.out.pop_front()
    }

    /// Queues connection `c`'s handshake ACK and its probe of the window (the first
    /// byte above `rcv_nxt`, out of order).
    fn probe(&mut self, c: usize, now: u64) {
        let ack = self.seg(c, now, TcpFlags::ACK, 0, &[]);
        let probe = self.seg(c, now, TcpFlags::ACK, 1, &[0]);
        self.out.extend([ack, probe]);
        let k = &mut self.conns[c];
        (k.probes, k.probe_at) = (k.probes + 1, now);
    }

    /// The peer's own SYNs: the first ones (after the flood's), then again every
    /// backed-off RTO until a SYN-ACK comes.
    fn syn_due(&mut self, now: u64) -> Option<Vec<u8>> {
        let c = self.conns.iter().position(|k| {
            k.irs.is_none()
                && k.syns <= SYN_RETRIES
                && (k.syns == 0 || now >= k.syn_at + (SYN_RTO_NS << (k.syns - 1)))
        })?;
        let k = &mut self.conns[c];
        (k.syns, k.syn_at) = (k.syns + 1, now);
        Some(Self::syn(Self::addr(k.port), k.isn, now))
    }

    /// When the peer has something to send at the latest (a SYN's retransmission).
    pub fn wake_at(&self) -> Option<u64> {
        let syn = (self.conns.iter())
            .filter(|k| k.irs.is_none() && k.syns >= 1 && k.syns <= SYN_RETRIES)
            .map(|k| k.syn_at + (SYN_RTO_NS << (k.syns - 1)));
        let probe = (self.conns.iter())
            .filter(|k| self.attack != Attack::ConnFlood && k.irs.is_some() && k.span.is_none())
            .filter(|k| (1..=SYN_RETRIES).contains(&k.probes))
            .map(|k| k.probe_at + (SYN_RTO_NS << (k.probes - 1)));
        syn.chain(probe).min()
    }

    /// Whether a packet is ready now (besides SYN retransmissions).
    pub fn has_more(&self) -> bool {
        !self.out.is_empty()
            || (self.attack == Attack::ConnFlood && self.flood_next < FLOOD_SYNS)
            || self.conns.iter().any(|k| k.syns == 0)
            || self.attack_left()
    }

    fn attack_left(&self) -> bool {
        let Some(span) = self.conns.first().and_then(|k| k.span) else {
            return false;
        };
        self.next < self.plan_len(span)
    }

    /// Segments of the out-of-order attack over `span` bytes.
    fn plan_len(&self, span: u32) -> u32 {
        match self.attack {
            Attack::OfoFill => (span / 2).min(FILL_MAX_SEGS),
            Attack::Prepend => {
                let (run, pre) = Self::prepend_plan(span);
                run + pre
            }
            Attack::ConnFlood => 0,
        }
    }

    /// The prepend attack: full segments from `span / 2`, then that many lower starts.
    fn prepend_plan(span: u32) -> (u32, u32) {
        let g = span / 2;
        let run = ((span - g) / RUN_SEG).min(RUN_MAX_SEGS);
        (run, g.saturating_sub(1).min(PREPEND_MAX))
    }

    /// Segment `self.next` of the attack: (offset above `rcv_nxt`, length).
    fn attack_segment(&mut self, now: u64) -> Option<Vec<u8>> {
        let span = self.conns.first()?.span?;
        let i = self.next;
        if i >= self.plan_len(span) {
            return None;
        }
        self.next += 1;
        let (off, len) = match self.attack {
            Attack::OfoFill => {
                let n = self.plan_len(span);
                let half = n / 2;
                let k = if i < n - half {
                    half + i
                } else {
                    i - (n - half)
                };
                (2 * k + 1, 1)
            }
            _ => {
                let (run, _) = Self::prepend_plan(span);
                match i < run {
                    true => (span / 2 + i * RUN_SEG, RUN_SEG),
                    false => (span / 2 - (i - run + 1), PREPEND_LEN),
                }
            }
        };
        Some(self.seg(0, now, TcpFlags::ACK, off, &ZEROS[..len as usize]))
    }

    /// A packet B sent to the peer (or to an address it spoofed).
    pub fn receive(&mut self, now: u64, pkt: &[u8]) {
        let Ok(ip) = IpRepr::parse(pkt, false) else {
            return;
        };
        let Ok((th, _)) = TcpRepr::parse(&pkt[ip.header_len..]) else {
            return;
        };
        if ip.dst != IpAddr::V4(HOSTILE_ADDR) {
            return; // a SYN-ACK to a spoofed address: nobody answers it
        }
        let Some(c) = self.conns.iter().position(|k| k.port == th.dst_port) else {
            return;
        };
        let k = &mut self.conns[c];
        if th.flags.contains(TcpFlags::RST) {
            if k.span.is_none() && k.irs.is_some() {
                // The handshake did not hold (its ACK was dropped and the probe
                // failed the cookie check): a new one, from a new ISN.
                (k.irs, k.isn, k.probes, k.syn_at) = (None, k.isn.wrapping_add(1 << 28), 0, now);
            }
            return;
        }
        if let Some((tsval, _)) = th.options.timestamp {
            k.ts_recent = tsval;
        }
        if th.flags.contains(TcpFlags::SYN) {
            if k.irs.is_none() {
                k.irs = Some(th.seq);
                k.wscale = th.options.wscale.unwrap_or(0).min(14);
                self.result.handshakes += 1;
            }
            // The handshake's ACK (again for a retransmitted SYN-ACK); the
            // out-of-order attacks probe the window with their first byte.
            match self.attack {
                Attack::ConnFlood => {
                    let ack = self.seg(c, now, TcpFlags::ACK, 0, &[]);
                    self.out.push_back(ack);
                }
                _ => self.probe(c, now),
            }
            return;
        }
        if k.span.is_none() && k.irs.is_some() && self.attack != Attack::ConnFlood {
            // The dup ACK of the probe: B's whole window.
            let wnd = (th.window as u32) << k.wscale;
            k.span = Some(wnd & !1);
            if self.plan_len(wnd & !1) == 0 {
                self.result.not_run = Some(format!("window of {wnd} bytes"));
            }
        }
    }

    /// Checks the victim after a receive batch of B.
    pub fn check(&mut self, now: Instant, stack: &lowtide::Stack) {
        let r = &mut self.result;
        r.peak_pages = r.peak_pages.max(stack.tcp_memory_allocated());
        let conns = stack.connection_count() as u64;
        r.peak_connections = r.peak_connections.max(conns);
        if r.violation.is_some() {
            return;
        }
        if self.attack == Attack::ConnFlood && conns > self.conn_bound {
            r.violation = Some(format!(
                "{conns} connections at {now:?}, over the bound of {} (flows, backlog + 1, silent handshakes)",
                self.conn_bound
            ));
        }
        for &v in &self.victims {
            let Ok(i) = stack.info(now, v) else { continue };
            if i.rmem_alloc > r.peak_rmem {
                (r.peak_rmem, r.rcvbuf) = (i.rmem_alloc, i.rcvbuf);
            }
            let bound = i.rcvbuf as u64 + rx_truesize(self.max_skb) as u64;
            if i.rmem_alloc > bound {
                r.violation = Some(format!(
                    "sk_rmem_alloc {} at {now:?}, over sk_rcvbuf {} + one skb ({bound})",
                    i.rmem_alloc, i.rcvbuf
                ));
            }
        }
    }

    /// The result at the end of the run.
    pub fn finish(&self) -> HostileResult {
        let mut r = self.result.clone();
        if r.not_run.is_none() && self.attack != Attack::ConnFlood {
            if r.handshakes == 0 {
                r.not_run = Some("no SYN-ACK came".into());
            } else if self.conns[0].span.is_none() {
                r.not_run = Some("no ACK told the window".into());
            }
        }
        r
    }
}

/// The peer's path: to B and back, clean, at [`HOSTILE_RATE_BPS`] with `delay_ns`.
pub(crate) fn hostile_links(delay_ns: u64, seed: u64) -> ([LinkDir; 2], [Pipe; 2]) {
    let cfg = LinkConfig {
        rate_bps: HOSTILE_RATE_BPS,
        delay_ns,
        ..LinkConfig::default()
    };
    (
        [
            LinkDir::new(cfg.clone(), seed),
            LinkDir::new(cfg.clone(), seed ^ 1),
        ],
        [Pipe::for_config(&cfg), Pipe::for_config(&cfg)],
    )
}

/// Whether B's packet `pkt` goes to the hostile peer (any address but host A's).
pub(crate) fn to_hostile(pkt: &[u8]) -> bool {
    pkt.first().is_some_and(|b| b >> 4 == 4) && pkt.get(16..20) != Some(&[10, 0, 0, 1][..])
}

impl World {
    /// The peer's turn: what arrived from B, then a burst on its wire if free.
    pub(crate) fn hostile_event(&mut self) {
        let now = self.now.as_nanos();
        if self.hostile_at == Some(self.now) {
            self.hostile_at = None;
        }
        let Some(peer) = self.hostile.as_mut() else {
            return;
        };
        while let Some(seg) = self.pipes[HOSTILE_RX].pop_arrived(now) {
            peer.receive(now, &seg.flatten());
        }
        if peer.link_free_at <= now {
            let (link, pipe) = (&mut self.links[HOSTILE_TX], &mut self.pipes[HOSTILE_TX]);
            for _ in 0..BURST {
                let Some(pkt) = peer.next_packet(now) else {
                    break;
                };
                peer.result.packets += 1;
                let (_, end) = link.serialize(now, pkt.len());
                peer.link_free_at = end;
                link.propagate(end, WireSeg::whole(pkt), |at, p| pipe.push(at, p));
            }
            self.arm_rx_poll(HOST_B);
        }
        self.arm_hostile();
    }

    /// Whether the hostile peer (if any) has made its whole attack: a fixed-size
    /// run lasts until then, so that a short transfer does not end it first.
    pub(crate) fn hostile_done(&self) -> bool {
        self.hostile.as_ref().is_none_or(|p| {
            !p.has_more() && p.wake_at().is_none() && self.pipes[HOSTILE_TX].head_time().is_none()
        })
    }

    /// Schedules the peer's next turn: its wire free with more to send, an arrival
    /// from B, or a SYN to send again.
    pub(crate) fn arm_hostile(&mut self) {
        let Some(peer) = self.hostile.as_ref() else {
            return;
        };
        let more = peer.has_more().then_some(peer.link_free_at);
        let next = [more, self.pipes[HOSTILE_RX].head_time(), peer.wake_at()]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next.map(|t| Instant(t.max(self.now.as_nanos()))) else {
            return;
        };
        if self.hostile_at.is_none_or(|cur| at < cur) {
            self.hostile_at = Some(at);
            self.queue.push(at, Event::Hostile);
        }
    }
}
