//! The established connection table (`tcp_hashinfo.ehash`): a hash table whose
//! bucket is a keyed hash of the 4-tuple with the stack's secret, as
//! `inet_ehashfn` keys its jhash with `inet_ehash_secret` (here SipHash-2-4, as
//! `secure.rs` uses). A peer cannot choose tuples that share a bucket without the
//! key, so a lookup stays a short chain walk whatever tuples it sends; with an
//! unkeyed hash (the `FxHashMap` this replaced) it can pile its tuples into one.
//! (The probes run in a flat array rather than Linux's chains: see [`ConnTable`].)

use super::FourTuple;
use core::cell::Cell;
use std::net::IpAddr;

/// Slots of a new table.
const MIN_SLOTS: usize = 16;

/// Connections by 4-tuple: open addressing with linear probing from the tuple's
/// keyed hash, at most half full (it doubles beyond), deletions shifting the
/// entries after them back (no tombstones). The keyed hash is what Linux's chained
/// `ehash` relies on too; probing a flat array keeps a lookup to one or two cache
/// lines where a chain per bucket costs a pointer chase more.
#[derive(Debug)]
pub struct ConnTable {
    key: (u64, u64),
    slots: Vec<Option<(FourTuple, u32)>>,
    len: usize,
    /// Tuples compared by lookups so far (`INET_MATCH` calls).
    compares: Cell<u64>,
}

impl ConnTable {
    /// An empty table keyed with `key`.
    pub fn new(key: (u64, u64)) -> ConnTable {
        ConnTable {
            key,
            slots: vec![None; MIN_SLOTS],
            len: 0,
            compares: Cell::new(0),
        }
    }

    /// Rekeys the table (a new stack secret): every entry moves to its new slot.
    pub fn rekey(&mut self, key: (u64, u64)) {
        self.key = key;
        self.rehash(self.slots.len());
    }

    /// `inet_ehashfn`: a keyed hash of the tuple's addresses and ports
    /// (`jhash_3words(laddr, faddr, lport << 16 | fport, secret)` on Linux), also
    /// what spreads SYNs over a `SO_REUSEPORT` group (`inet_lookup_reuseport`).
    pub fn ehashfn(&self, t: &FourTuple) -> u64 {
        let ports = ((t.local.port() as u64) << 16) | t.remote.port() as u64;
        match (t.local.ip(), t.remote.ip()) {
            (IpAddr::V4(l), IpAddr::V4(r)) => {
                let addrs = ((u32::from(l) as u64) << 32) | u32::from(r) as u64;
                siphash13(self.key, &[addrs, ports])
            }
            (l, r) => {
                let (l, r) = (v6_bits(l), v6_bits(r));
                let w = |x: u128, hi: bool| if hi { (x >> 64) as u64 } else { x as u64 };
                siphash13(
                    self.key,
                    &[w(l, true), w(l, false), w(r, true), w(r, false), ports],
                )
            }
        }
    }

    /// Where the tuple's probe starts: its [`ConnTable::ehashfn`].
    pub fn home(&self, t: &FourTuple) -> usize {
        self.ehashfn(t) as usize & (self.slots.len() - 1)
    }

    /// The slot holding `t`, or the empty slot that ends its probe.
    fn probe(&self, t: &FourTuple) -> (usize, bool) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(t);
        let mut compared = 0;
        let found = loop {
            match &self.slots[i] {
                None => break false,
                Some((k, _)) => {
                    compared += 1;
                    if k == t {
                        break true;
                    }
                }
            }
            i = (i + 1) & mask;
        };
        self.compares.set(self.compares.get() + compared);
        (i, found)
    }

    /// The connection at `t`.
    pub fn get(&self, t: &FourTuple) -> Option<u32> {
        match self.probe(t) {
            (i, true) => self.slots[i].map(|(_, v)| v),
            _ => None,
        }
    }

    /// Whether a connection holds `t`.
    pub fn contains_key(&self, t: &FourTuple) -> bool {
        self.probe(t).1
    }

    /// Puts `v` at `t`, returning what was there.
    pub fn insert(&mut self, t: FourTuple, v: u32) -> Option<u32> {
        let (i, found) = self.probe(&t);
        let old = self.slots[i].replace((t, v)).map(|(_, v)| v);
        if !found {
            self.len += 1;
            if self.len * 2 > self.slots.len() {
                self.rehash(self.slots.len() * 2);
            }
        }
        old
    }

    /// Takes the entry at `t` out; the entries probed past it move back so that
    /// every probe still reaches its entry before an empty slot.
    pub fn remove(&mut self, t: &FourTuple) -> Option<u32> {
        let (mut hole, true) = self.probe(t) else {
            return None;
        };
        let mask = self.slots.len() - 1;
        let old = self.slots[hole].take().map(|(_, v)| v);
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((k, _)) = &self.slots[j] else {
                break;
            };
            // The entry at j may fill the hole unless its home lies in (hole, j].
            let home = self.home(k);
            let stays = if hole < j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
        old
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.iter().flatten().map(|&(_, v)| v)
    }

    /// Tuples compared by lookups so far: a lookup's cost, whatever the machine.
    pub fn compares(&self) -> u64 {
        self.compares.get()
    }

    fn rehash(&mut self, n: usize) {
        let old = core::mem::replace(&mut self.slots, vec![None; n]);
        self.len = 0;
        for (t, v) in old.into_iter().flatten() {
            self.insert(t, v);
        }
    }
}

/// An address as 128 bits (IPv4 as its mapped IPv6 form).
fn v6_bits(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

/// SipHash-1-3 (Aumasson and Bernstein; the variant Rust's `DefaultHasher` runs)
/// of whole little-endian 64-bit words: one compression round a word, three
/// finalization rounds. A few nanoseconds for a tuple, where the byte-wise
/// `Hasher` interface takes several times that.
fn siphash13(key: (u64, u64), words: &[u64]) -> u64 {
    let mut v = [
        key.0 ^ 0x736f_6d65_7073_6575,
        key.1 ^ 0x646f_7261_6e64_6f6d,
        key.0 ^ 0x6c79_6765_6e65_7261,
        key.1 ^ 0x7465_6462_7974_6573,
    ];
    let round = |v: &mut [u64; 4]| {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    };
    let last = ((words.len() as u64 * 8) & 0xff) << 56;
    for &m in words.iter().chain(core::iter::once(&last)) {
        v[3] ^= m;
        round(&mut v);
        v[0] ^= m;
    }
    v[2] ^= 0xff;
    for _ in 0..3 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::hash::Hasher;
    use std::net::SocketAddr;

    fn tuple(i: u32) -> FourTuple {
        let local: SocketAddr = "10.0.0.1:80".parse().unwrap();
        let ip = std::net::Ipv4Addr::from(0x0b00_0000 | (i >> 16));
        let remote = SocketAddr::new(ip.into(), (i & 0xffff) as u16);
        FourTuple { local, remote }
    }

    #[test]
    fn siphash13_is_the_reference_function() {
        // std's DefaultHasher::new() is SipHash-1-3 with a zero key.
        for words in [&[][..], &[1], &[0x0102_0304_0506_0708, u64::MAX, 7]] {
            let mut h = std::hash::DefaultHasher::new();
            words.iter().for_each(|&w| h.write_u64(w));
            assert_eq!(siphash13((0, 0), words), h.finish(), "{words:?}");
        }
        assert_ne!(siphash13((1, 0), &[1]), siphash13((0, 0), &[1]));
    }

    #[test]
    fn insert_get_replace_remove_and_grow() {
        let mut t = ConnTable::new((1, 2));
        for i in 0..1000 {
            assert_eq!(t.insert(tuple(i), i), None);
        }
        assert_eq!(t.len(), 1000);
        assert!(t.slots.len() >= 2000, "grew with its entries");
        assert_eq!(t.insert(tuple(7), 70), Some(7));
        assert_eq!(t.get(&tuple(7)), Some(70));
        assert_eq!(t.remove(&tuple(7)), Some(70));
        assert_eq!((t.get(&tuple(7)), t.remove(&tuple(7))), (None, None));
        assert_eq!(t.len(), 999);
        t.rekey((3, 4));
        assert!((0..1000)
            .filter(|&i| i != 7)
            .all(|i| t.get(&tuple(i)) == Some(i)));
        assert_eq!(t.values().count(), 999);
    }

    /// Tuples an attacker who knows `key` picks so that all start their probe in
    /// one slot of a table of up to 1024 slots.
    fn colliding(key: (u64, u64), n: usize) -> Vec<FourTuple> {
        let probe = ConnTable {
            slots: vec![None; 1024],
            ..ConnTable::new(key)
        };
        let want = probe.home(&tuple(0));
        (0..)
            .map(tuple)
            .filter(|t| probe.home(t) == want)
            .take(n)
            .collect()
    }

    /// Average tuples compared per lookup of each of `tuples`.
    fn compares_per_lookup(key: (u64, u64), tuples: &[FourTuple]) -> f64 {
        let mut t = ConnTable::new(key);
        for (i, x) in tuples.iter().enumerate() {
            t.insert(*x, i as u32);
        }
        let before = t.compares();
        assert!(tuples.iter().all(|x| t.get(x).is_some()));
        (t.compares() - before) as f64 / tuples.len() as f64
    }

    #[test]
    fn removal_keeps_every_probe_whole() {
        // Many tuples sharing start slots, removed in an order that leaves holes
        // inside runs and across the array's end.
        let mut t = ConnTable::new((5, 6));
        let mut live: Vec<FourTuple> = colliding((5, 6), 40);
        live.extend((0..300).map(|i| tuple(100_000 + i)));
        for (i, x) in live.iter().enumerate() {
            t.insert(*x, i as u32);
        }
        let mut k = 0;
        while !live.is_empty() {
            k = (k + 7) % live.len();
            let x = live.swap_remove(k);
            assert!(t.remove(&x).is_some());
            assert!(
                live.iter().all(|y| t.contains_key(y)),
                "{} left",
                live.len()
            );
        }
        assert!(t.is_empty() && t.values().next().is_none());
    }

    #[test]
    fn chosen_colliding_tuples_do_not_degrade_lookups_without_the_key() {
        let known = (0x1234, 0x5678);
        let tuples = colliding(known, 256);
        // Against the key they were chosen for, one chain: ~n/2 compares a lookup.
        assert!(compares_per_lookup(known, &tuples) > 100.0);
        // Against the stack's secret key they scatter: about one.
        let secret = (0x9e37_79b9_7f4a_7c15, 0xbf58_476d_1ce4_e5b9);
        let c = compares_per_lookup(secret, &tuples);
        assert!(c < 2.0, "{c}");
    }
}
