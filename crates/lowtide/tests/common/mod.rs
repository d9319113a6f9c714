//! A two-host test network in virtual time, in quinn's `Pair` manner: `step()` moves
//! to the next packet arrival or timer, `drive()` runs until idle. Packets can be
//! dropped or rewritten by a filter to stage losses and hostile input.

#![allow(dead_code)]

use lowtide::{Config, Instant, RxChecksum, SocketEvent, Stack};
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

pub struct Pair {
    pub now: Instant,
    pub a: Stack,
    pub b: Stack,
    pub delay: Duration,
    /// Arrivals: (time, seq) -> (to B?, packet)
    in_flight: BTreeMap<(Instant, u64), (Dir, Vec<u8>)>,
    seq: u64,
    pub filter: Option<Filter>,
    pub events_a: Vec<SocketEvent>,
    pub events_b: Vec<SocketEvent>,
    pub wire: Vec<(Instant, Dir, Vec<u8>)>,
    pub record: bool,
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
            events_a: Vec::new(),
            events_b: Vec::new(),
            wire: Vec::new(),
            record: false,
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
                let Some(tx) = st.poll_transmit(self.now) else {
                    break;
                };
                st.handle_tx_complete(self.now, tx.token);
                let mut segs = Vec::new();
                lowtide_wire::gso::segment(&tx.packet, tx.gso_size, |s| segs.push(s)).unwrap();
                for mut s in segs {
                    if let Some(f) = self.filter.as_mut() {
                        if let Verdict::Drop = f(dir, &mut s) {
                            continue;
                        }
                    }
                    if self.record {
                        self.wire.push((self.now, dir, s.clone()));
                    }
                    self.seq += 1;
                    self.in_flight
                        .insert((self.now + self.delay, self.seq), (dir, s));
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

/// Deterministic payload for tests.
pub fn pattern(n: usize, salt: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(7) as u8 ^ salt)
        .collect()
}
