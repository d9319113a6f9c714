//! A two-host test network in virtual time, in quinn's `Pair` manner: `step()` moves
//! to the next packet arrival or timer, `drive()` runs until idle. Packets can be
//! dropped or rewritten by a filter to stage losses and hostile input.

#![allow(dead_code)]

pub mod drill;

use lowtide::{Config, Instant, RxChecksum, SocketEvent, SocketHandle, Stack, TcpState};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpOptions, TcpRepr};
pub use lowtide_wire::testing::{tcp_packet, Csum};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub const A: &str = "10.0.0.1";
pub const B: &str = "10.0.0.2";

/// Which way a packet travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    AtoB,
    BtoA,
}

/// What the filter does with a wire segment.
pub enum Verdict {
    Pass,
    Drop,
}

type Filter = Box<dyn FnMut(Dir, &mut Vec<u8>) -> Verdict>;
/// Picks the packets the sending host's device queue drops.
type LocalDrop = Box<dyn FnMut(Dir, &lowtide::Transmit) -> bool>;
/// Extra one-way delay of a wire segment sent at a time (to stage reordering or
/// held-back ACKs).
type Delayer = Box<dyn FnMut(Instant, Dir, &[u8]) -> Duration>;

pub struct Pair {
    pub now: Instant,
    pub a: Stack,
    pub b: Stack,
    pub delay: Duration,
    /// Arrivals: (time, seq) -> (to B?, packet)
    in_flight: BTreeMap<(Instant, u64), (Dir, Vec<u8>)>,
    seq: u64,
    pub filter: Option<Filter>,
    pub extra_delay: Option<Delayer>,
    /// Stages drops in the sending host's own device queue: a packet it picks is
    /// handed back with `handle_tx_dropped` instead of being sent.
    pub local_drop: Option<LocalDrop>,
    pub events_a: Vec<SocketEvent>,
    pub events_b: Vec<SocketEvent>,
    pub wire: Vec<(Instant, Dir, Vec<u8>)>,
    /// Segments the filter dropped, when recording.
    pub dropped: Vec<(Instant, Dir, Vec<u8>)>,
    pub record: bool,
    /// When set, A's device holds its packets: their TX tokens wait here until
    /// the test completes them (`Stack::handle_tx_complete`).
    pub held_a: Option<Vec<lowtide::TxToken>>,
}

pub fn addr(ip: &str, port: u16) -> SocketAddr {
    SocketAddr::new(ip.parse().unwrap(), port)
}

impl Pair {
    pub fn new(cfg: Config) -> Pair {
        Self::with_configs(cfg.clone(), cfg)
    }

    pub fn with_configs(ca: Config, cb: Config) -> Pair {
        let mut a = Stack::new(ca, 1);
        a.add_address(A.parse::<IpAddr>().unwrap());
        let mut b = Stack::new(cb, 2);
        b.add_address(B.parse::<IpAddr>().unwrap());
        Pair {
            now: Instant::ZERO,
            a,
            b,
            delay: Duration::from_millis(10),
            in_flight: BTreeMap::new(),
            seq: 0,
            filter: None,
            extra_delay: None,
            local_drop: None,
            events_a: Vec::new(),
            events_b: Vec::new(),
            wire: Vec::new(),
            dropped: Vec::new(),
            record: false,
            held_a: None,
        }
    }

    /// Moves packets each stack wants to send onto the wire, completing them at once.
    pub fn flush(&mut self) {
        for dir in [Dir::AtoB, Dir::BtoA] {
            loop {
                let st = match dir {
                    Dir::AtoB => &mut self.a,
                    Dir::BtoA => &mut self.b,
                };
                let Some(mut tx) = st.poll_transmit(self.now) else {
                    break;
                };
                if self.local_drop.as_mut().is_some_and(|f| f(dir, &tx)) {
                    st.handle_tx_dropped(self.now, tx.token);
                    continue;
                }
                match self.held_a.as_mut().filter(|_| dir == Dir::AtoB) {
                    Some(held) => held.push(tx.token),
                    None => st.handle_tx_complete(self.now, tx.token),
                }
                // A payload kept apart (a zerocopy send's) joins its headers; an ICMP
                // error (a hostile packet's protocol unreachable) goes whole.
                tx.flatten();
                let segs = tx.segments();
                assert!(!segs.is_empty(), "the stack's own output parses");
                for mut s in segs {
                    if let Some(f) = self.filter.as_mut() {
                        if let Verdict::Drop = f(dir, &mut s) {
                            if self.record {
                                self.dropped.push((self.now, dir, s));
                            }
                            continue;
                        }
                    }
                    if self.record {
                        self.wire.push((self.now, dir, s.clone()));
                    }
                    self.seq += 1;
                    let extra = self
                        .extra_delay
                        .as_mut()
                        .map_or(Duration::ZERO, |f| f(self.now, dir, &s));
                    self.in_flight
                        .insert((self.now + self.delay + extra, self.seq), (dir, s));
                }
            }
        }
        while let Some(e) = self.a.poll_event() {
            self.events_a.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            self.events_b.push(e);
        }
    }

    /// Injects a raw packet into a stack now.
    pub fn inject(&mut self, to_b: bool, pkt: &[u8]) {
        let st = if to_b { &mut self.b } else { &mut self.a };
        st.handle_packet(self.now, pkt, RxChecksum::Verify);
        self.flush();
    }

    fn next_time(&mut self) -> Option<Instant> {
        self.flush();
        let pkt = self.in_flight.keys().next().map(|k| k.0);
        [pkt, self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Advances to the next event; false when nothing is left.
    pub fn step(&mut self) -> bool {
        self.flush();
        let Some(t) = self.next_time() else {
            return false;
        };
        self.now = self.now.max(t);
        while let Some((&(at, s), _)) = self.in_flight.iter().next() {
            if at > self.now {
                break;
            }
            let (dir, pkt) = self.in_flight.remove(&(at, s)).unwrap();
            let st = if dir == Dir::AtoB {
                &mut self.b
            } else {
                &mut self.a
            };
            st.handle_packet(self.now, &pkt, RxChecksum::Verify);
            self.flush();
        }
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
        self.flush();
        wmem_sum_holds(&self.a);
        wmem_sum_holds(&self.b);
        true
    }

    /// Steps until `until` (virtual) or until idle.
    pub fn drive_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.next_time().is_some_and(|t| t <= end) {
            self.step();
        }
        self.now = self.now.max(end);
        self.flush();
    }

    /// Steps while `cond` is false, up to a virtual-time cap; panics at the cap.
    pub fn drive_until(&mut self, cap: Duration, mut cond: impl FnMut(&mut Pair) -> bool) {
        let end = self.now + cap;
        while !cond(self) {
            assert!(self.now <= end, "condition not reached within {cap:?}");
            if !self.step() {
                assert!(cond(self), "network idle before condition held");
                return;
            }
        }
    }
}

/// The stack's kept `sk_wmem_queued` sum ([`Stack::wmem_queued`], which the
/// simulator samples) equals a pass over its sockets: checked after every step of
/// every test that steps a [`Pair`].
pub fn wmem_sum_holds(st: &Stack) {
    let kept = st.wmem_queued();
    assert_eq!(kept, st.tcp_memory().wmem_queued, "kept sk_wmem_queued sum");
}

/// Deterministic payload for tests.
pub fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(7) as u8 ^ salt)
        .collect()
}

// ---- helpers shared by the state and fuzz tests ------------------------------------

pub const A6: &str = "fd00::1";
pub const B6: &str = "fd00::2";

impl Pair {
    /// Injects a raw packet into a stack now with the given checksum mode.
    pub fn inject_csum(&mut self, to_b: bool, pkt: &[u8], csum: RxChecksum) {
        let st = if to_b { &mut self.b } else { &mut self.a };
        st.handle_packet(self.now, pkt, csum);
        self.flush();
    }

    /// Takes the packets in flight towards `to` (B if `to_b`) off the wire, unsent.
    pub fn take_in_flight(&mut self, to_b: bool) -> Vec<Vec<u8>> {
        let want = if to_b { Dir::AtoB } else { Dir::BtoA };
        let keys: Vec<_> = self
            .in_flight
            .iter()
            .filter(|(_, (d, _))| *d == want)
            .map(|(k, _)| *k)
            .collect();
        keys.into_iter()
            .map(|k| self.in_flight.remove(&k).unwrap().1)
            .collect()
    }

    /// Wire segments recorded since index `from` going `dir`, parsed.
    pub fn sent_since(&self, from: usize, dir: Dir) -> Vec<Seg> {
        self.wire[from..]
            .iter()
            .filter(|(_, d, _)| *d == dir)
            .map(|(_, _, p)| Seg::parse(p))
            .collect()
    }
}

/// A parsed wire segment.
#[derive(Debug, Clone)]
pub struct Seg {
    pub ip: IpRepr,
    pub th: TcpRepr,
    pub payload: Vec<u8>,
}

impl Seg {
    pub fn parse(pkt: &[u8]) -> Seg {
        let ip = IpRepr::parse(pkt, false).expect("valid IP");
        let tcp = &pkt[ip.header_len..ip.header_len + ip.payload_len];
        let (th, hl) = TcpRepr::parse(tcp).expect("valid TCP");
        Seg {
            payload: tcp[hl..].to_vec(),
            ip,
            th,
        }
    }
    pub fn has(&self, f: TcpFlags) -> bool {
        self.th.flags.contains(f)
    }
    /// A bare ACK: ACK only (PSH allowed), no payload.
    pub fn is_pure_ack(&self) -> bool {
        self.payload.is_empty()
            && !self
                .th
                .flags
                .intersects(TcpFlags::SYN | TcpFlags::FIN | TcpFlags::RST)
            && self.has(TcpFlags::ACK)
    }
}

/// Sets the DS field (TOS / traffic class, ECN bits included) of the IPv4 or IPv6
/// packet `pkt` to `tos`, the IPv4 header checksum with it.
pub fn set_dsfield(pkt: &mut [u8], tos: u8) {
    if pkt[0] >> 4 == 4 {
        pkt[1] = tos;
        lowtide_wire::ip::fill_ipv4_checksum(&mut pkt[..20]);
    } else {
        pkt[0] = 0x60 | (tos >> 4);
        pkt[1] = (tos << 4) | (pkt[1] & 0x0f);
    }
}

/// Builds a checksummed IP + TCP packet ([`tcp_packet`] with the full checksum).
pub fn build(
    src: SocketAddr,
    dst: SocketAddr,
    th: &TcpRepr,
    payload: &[u8],
    ipv4_id: u16,
) -> Vec<u8> {
    tcp_packet(src, dst, th, payload, ipv4_id, Csum::Full)
}

/// What a forger knows about one side of a connection, learned from its last segment.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// The forged segments' source (the impersonated host).
    pub src: SocketAddr,
    pub dst: SocketAddr,
    /// Next sequence number the victim expects from `src`.
    pub seq: u32,
    /// What `src` would acknowledge: the victim's `snd_nxt`.
    pub ack: u32,
    /// The victim's last TSval (to echo) and the impersonated host's last TSval.
    pub ts_ecr: u32,
    pub ts_val: u32,
}

impl Peer {
    pub fn seg(&self, flags: TcpFlags, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let th = TcpRepr {
            seq,
            ack,
            flags,
            window: 65535,
            options: TcpOptions {
                timestamp: Some((self.ts_val, self.ts_ecr)),
                ..Default::default()
            },
            ..Default::default()
        };
        build(self.src, self.dst, &th, payload, 7)
    }
    /// An in-sequence segment with the flags, carrying an ACK of everything sent.
    pub fn now(&self, flags: TcpFlags, payload: &[u8]) -> Vec<u8> {
        self.seg(flags, self.seq, self.ack, payload)
    }
}

/// Learns how to impersonate the peer of the last segment sent in `victim_dir` (the
/// victim is its sender): the victim's segment tells what it expects.
pub fn learn(p: &Pair, victim_dir: Dir) -> Peer {
    let last = |d: Dir| {
        p.wire
            .iter()
            .rev()
            .find(|(_, dd, _)| *dd == d)
            .map(|(_, _, pk)| Seg::parse(pk))
    };
    let v = last(victim_dir).expect("victim sent something");
    let other = match victim_dir {
        Dir::AtoB => Dir::BtoA,
        Dir::BtoA => Dir::AtoB,
    };
    let o = last(other);
    let v_end = v.th.seq.wrapping_add(
        v.payload.len() as u32 + v.has(TcpFlags::SYN) as u32 + v.has(TcpFlags::FIN) as u32,
    );
    let (tsv, tse) = v.th.options.timestamp.unwrap_or((0, 0));
    Peer {
        src: SocketAddr::new(v.ip.dst, v.th.dst_port),
        dst: SocketAddr::new(v.ip.src, v.th.src_port),
        seq: v.th.ack,
        ack: v_end,
        ts_ecr: tsv,
        ts_val: o
            .and_then(|o| o.th.options.timestamp)
            .map_or(tse, |t| t.0)
            .wrapping_add(1),
    }
}

/// A connecting to a listener on B port 80 with everything B sends dropped (the
/// filter stays), driven for `wait`: A in SYN-SENT. Records the wire.
pub fn syn_sent_to_b(wait: Duration) -> (Pair, SocketHandle) {
    let mut p = Pair::new(Config::default());
    p.record = true;
    let _l = p.b.listen(addr(B, 80), 4).unwrap();
    p.filter = Some(Box::new(|d, _| match d {
        Dir::BtoA => Verdict::Drop,
        Dir::AtoB => Verdict::Pass,
    }));
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(wait);
    assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    (p, c)
}

/// Connects A to a listener on B port 80 and accepts: (pair, A's socket, B's socket).
/// Records the wire.
pub fn establish(cfg: Config) -> (Pair, SocketHandle, SocketHandle) {
    establish_with(Pair::new(cfg), A, B)
}

/// An established pair after a small exchange both ways (so both sides have state
/// to protect), idle.
pub fn warm() -> (Pair, SocketHandle, SocketHandle) {
    let (mut p, c, s) = establish(Config::default());
    assert_eq!(send_all(&mut p, true, c, s, b"hello"), b"hello");
    assert_eq!(send_all(&mut p, false, s, c, b"world"), b"world");
    p.drive_for(Duration::from_millis(300));
    (p, c, s)
}

/// As [`establish`] on a given pair and addresses (e.g. IPv6).
pub fn establish_with(mut p: Pair, a: &str, b: &str) -> (Pair, SocketHandle, SocketHandle) {
    p.record = true;
    let any = if b.contains(':') { "::" } else { "0.0.0.0" };
    let l =
        p.b.listen(addr(any, 80), 16)
            .or_else(|_| p.b.listen(addr(b, 80), 16))
            .unwrap();
    let c = p.a.connect(p.now, addr(a, 0), addr(b, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    p.drive_for(Duration::from_millis(20));
    let s = p.b.accept(l).unwrap();
    (p, c, s)
}

/// Reads everything `rx` on `st` has ready.
pub fn drain(st: &mut Stack, now: Instant, rx: SocketHandle) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = st.recv(now, rx, &mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// Moves `data` from `tx` (on A if `a_sends`) to `rx` on the peer, reading as it
/// arrives; returns what arrived (panics if the transfer stalls).
pub fn send_all(
    p: &mut Pair,
    a_sends: bool,
    tx: SocketHandle,
    rx: SocketHandle,
    data: &[u8],
) -> Vec<u8> {
    let mut sent = 0;
    let mut got = Vec::new();
    let end = p.now + Duration::from_secs(300);
    while got.len() < data.len() {
        assert!(p.now < end, "stalled at {} of {}", got.len(), data.len());
        let (s, r) = if a_sends {
            (&mut p.a, &mut p.b)
        } else {
            (&mut p.b, &mut p.a)
        };
        if sent < data.len() {
            if let Ok(n) = s.send(p.now, tx, &data[sent..]) {
                sent += n;
            }
        }
        got.extend(drain(r, p.now, rx));
        if got.len() < data.len() && !p.step() {
            panic!("idle with data missing: got {} sent {}", got.len(), sent);
        }
    }
    got
}

/// The connection of `h` went to TIME-WAIT: its socket is done (CLOSED, as
/// `tcp_time_wait` leaves Linux's) and a timewait socket holds its 4-tuple.
pub fn in_time_wait(st: &Stack, h: SocketHandle) -> bool {
    let Ok((local, remote)) = st.addresses(h) else {
        return false;
    };
    st.state(h) == Ok(TcpState::Closed)
        && st.timewait_state(local, remote) == Some(TcpState::TimeWait)
}

/// When a timer armed at `start` and re-armed as it runs, for each of `delays_ms`
/// in turn, runs on Linux's timer wheel (`lowtide::time::timer_list_runs`), in ms
/// from `start`: the start itself, then each run.
pub fn wheel_chain(start: Instant, delays_ms: &[u64]) -> Vec<u64> {
    let mut at = start;
    let mut out = vec![0];
    for &d in delays_ms {
        at = lowtide::time::timer_list_runs(at, at + Duration::from_millis(d));
        out.push(at.saturating_since(start).as_millis() as u64);
    }
    out
}
