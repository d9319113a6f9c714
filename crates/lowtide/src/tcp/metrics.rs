//! What a connection that ended well leaves for the next one between the same two
//! addresses (net/ipv4/tcp_metrics.c): its smoothed RTT and deviation, congestion
//! window, slow-start threshold and reordering degree, and the Fast Open client's
//! cookie. `tcp_update_metrics` saves them as the connection enters TIME-WAIT or
//! leaves LAST-ACK (unless `net.ipv4.tcp_no_metrics_save`); `tcp_init_metrics`
//! reads them when the next connection starts its transfer: a cached RTT above the
//! handshake's sample sets the first RTO, a cached reordering degree the dupthresh,
//! and (with `net.ipv4.tcp_no_ssthresh_metrics_save` 0) a cached ssthresh the slow
//! start's end. A route's `rtt`, `rttvar`, `ssthresh`, `cwnd` and `reordering`
//! metrics seed a new entry, and a locked one is never overwritten (`tcpm_suck_dst`).
//!
//! The table is Linux's: 16384 hash chains (`tcpmhash_entries` on a machine with at
//! least 512 MB), keyed by the destination address, each at most six entries long (a
//! seventh destination takes the place of the chain's least recently updated entry,
//! `TCP_METRICS_RECLAIM_DEPTH`), so that no peer can make it grow without bound; an
//! entry not updated for an hour starts again from the route (`tcpm_check_stamp`).
//! `ip tcp_metrics flush` empties it. The per-namespace `net_hash_mix` is 0 here: one
//! stack is one namespace.

use super::cong::INFINITE_SSTHRESH;
use super::fastopen::CacheEntry;
use crate::route::{Metrics as RouteMetrics, Rtax};
use crate::time::Instant;
use lowtide_wire::tcp::FastOpenOption;
use rustc_hash::FxHashMap;
use std::net::IpAddr;
use std::time::Duration;

/// `TCP_METRICS_TIMEOUT`: an entry older than this starts again from the route.
const TCP_METRICS_TIMEOUT: Duration = Duration::from_secs(60 * 60);
/// `TCP_METRICS_RECLAIM_DEPTH`: a chain longer than this recycles its oldest entry.
const TCP_METRICS_RECLAIM_DEPTH: usize = 5;
/// `tcp_metrics_hash_log`: log2 of the number of chains (16 * 1024 slots).
const TCP_METRICS_HASH_LOG: u32 = 14;
/// `GOLDEN_RATIO_32` (include/linux/hash.h), for `hash_32`.
const GOLDEN_RATIO_32: u32 = 0x61C8_8647;

/// `enum tcp_metric_index` (include/uapi/linux/tcp_metrics.h), the kernel's part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TcpMetric {
    /// `TCP_METRIC_RTT`: smoothed RTT, microseconds x 8 (as `tp->srtt_us`).
    Rtt = 0,
    /// `TCP_METRIC_RTTVAR`: mean deviation, microseconds x 4 (as `tp->mdev_us`).
    RttVar = 1,
    /// `TCP_METRIC_SSTHRESH`: slow-start threshold, segments.
    Ssthresh = 2,
    /// `TCP_METRIC_CWND`: congestion window, segments.
    Cwnd = 3,
    /// `TCP_METRIC_REORDERING`: reordering degree, segments.
    Reordering = 4,
}

impl TcpMetric {
    const ALL: [TcpMetric; 5] = [
        TcpMetric::Rtt,
        TcpMetric::RttVar,
        TcpMetric::Ssthresh,
        TcpMetric::Cwnd,
        TcpMetric::Reordering,
    ];

    /// The route metric that seeds and may lock it.
    fn rtax(self) -> Rtax {
        match self {
            TcpMetric::Rtt => Rtax::Rtt,
            TcpMetric::RttVar => Rtax::RttVar,
            TcpMetric::Ssthresh => Rtax::Ssthresh,
            TcpMetric::Cwnd => Rtax::Cwnd,
            TcpMetric::Reordering => Rtax::Reordering,
        }
    }
}

/// One source and destination's entry (`struct tcp_metrics_block`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsBlock {
    saddr: IpAddr,
    daddr: IpAddr,
    /// Last update (`tcpm_stamp`).
    stamp: Instant,
    /// Metrics the route locks (`tcpm_lock`, a bit per [`TcpMetric`]).
    lock: u32,
    vals: [u32; 5],
    /// The Fast Open client's part (`struct tcp_fastopen_metrics`).
    pub fastopen: CacheEntry,
}

impl MetricsBlock {
    /// `tcp_metric_get`.
    pub fn get(&self, m: TcpMetric) -> u32 {
        self.vals[m as usize]
    }

    /// `tcp_metric_locked`.
    pub fn locked(&self, m: TcpMetric) -> bool {
        self.lock & (1 << m as u32) != 0
    }

    fn set(&mut self, m: TcpMetric, val: u32) {
        self.vals[m as usize] = val;
    }

    /// Sets `m` unless the route locks it.
    fn set_unlocked(&mut self, m: TcpMetric, val: u32) {
        if !self.locked(m) {
            self.set(m, val);
        }
    }

    /// `tcpm_suck_dst`: values and locks from the route (`rtt` in the route's
    /// milliseconds x 8, `rttvar` x 4, as iproute2 stores them); `fastopen_clear`
    /// when the entry is recycled for another destination.
    fn suck_dst(&mut self, now: Instant, dst: &RouteMetrics, fastopen_clear: bool) {
        self.stamp = now;
        self.lock = 0;
        for m in TcpMetric::ALL {
            if dst.locked(m.rtax()) {
                self.lock |= 1 << m as u32;
            }
            let raw = dst.get(m.rtax());
            let v = match m {
                TcpMetric::Rtt | TcpMetric::RttVar => raw.saturating_mul(1000),
                _ => raw,
            };
            self.set(m, v);
        }
        if fastopen_clear {
            self.fastopen = CacheEntry::default();
        }
    }

    fn check_stamp(&mut self, now: Instant, dst: &RouteMetrics) {
        if now.saturating_since(self.stamp) > TCP_METRICS_TIMEOUT {
            self.suck_dst(now, dst, false);
        }
    }
}

/// What `tcp_update_metrics` reads of a connection as it ends.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnFigures {
    /// `tp->srtt_us` (x 8).
    pub srtt8: u32,
    /// `tp->mdev_us` (x 4).
    pub mdev: u32,
    /// `icsk_backoff`: the RTO was backed off (the RTT is in doubt).
    pub backoff: u32,
    pub cwnd: u32,
    pub ssthresh: u32,
    /// `icsk_ca_state == TCP_CA_Open`.
    pub ca_open: bool,
    pub reordering: u32,
}

/// What `tcp_init_metrics` gives a connection starting its transfer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct InitFigures {
    /// A locked route `cwnd`: the congestion window's clamp.
    pub cwnd_clamp: Option<u32>,
    /// A cached slow-start threshold (0: none).
    pub ssthresh: u32,
    /// A cached reordering degree (0: none).
    pub reordering: u32,
    /// The cached smoothed RTT, microseconds x 8 (0: none).
    pub crtt8: u32,
}

/// The stack's metrics table (`tcp_metrics_hash`).
#[derive(Debug, Default)]
pub struct TcpMetrics {
    /// Chains by hash, newest entry first; a missing key is an empty chain.
    chains: FxHashMap<u32, Vec<MetricsBlock>>,
}

/// `ipv4_addr_hash` / `ipv6_addr_hash`, then `hash_32(.., tcp_metrics_hash_log)`.
fn chain_of(daddr: IpAddr) -> u32 {
    let h = match daddr {
        IpAddr::V4(a) => u32::from_be_bytes(a.octets()),
        IpAddr::V6(a) => {
            let o = a.octets();
            let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
            w(0) ^ w(4) ^ w(8) ^ w(12)
        }
    };
    h.wrapping_mul(GOLDEN_RATIO_32) >> (32 - TCP_METRICS_HASH_LOG)
}

impl TcpMetrics {
    /// The entry for `saddr -> daddr`, if any (`__tcp_get_metrics`, read only).
    pub fn block(&self, saddr: IpAddr, daddr: IpAddr) -> Option<&MetricsBlock> {
        // An IPv4-mapped address is its IPv4 address (`tcp_get_metrics` on an AF_INET6
        // socket with a mapped peer).
        let (s, d) = (saddr.to_canonical(), daddr.to_canonical());
        self.chains
            .get(&chain_of(d))?
            .iter()
            .find(|b| b.saddr == s && b.daddr == d)
    }

    /// Entries held now (`ip tcp_metrics show | wc -l`).
    pub fn len(&self) -> usize {
        self.chains.values().map(Vec::len).sum()
    }

    /// No entry held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `tcp_get_metrics`: the entry, aged against the route (`tcpm_check_stamp`);
    /// with `create`, a new one from the route (`tcpm_new`), recycling the chain's
    /// oldest entry when the chain is already deeper than the reclaim depth.
    fn get_mut(
        &mut self,
        now: Instant,
        dst: &RouteMetrics,
        (saddr, daddr): (IpAddr, IpAddr),
        create: bool,
    ) -> Option<&mut MetricsBlock> {
        // An IPv4-mapped address is its IPv4 address (`tcp_get_metrics` on an AF_INET6
        // socket with a mapped peer).
        let (s, d) = (saddr.to_canonical(), daddr.to_canonical());
        let found = self.block(s, d).is_some();
        if !found && !create {
            return None;
        }
        let chain = self.chains.entry(chain_of(d)).or_default();
        if found {
            let b = chain.iter_mut().find(|b| b.saddr == s && b.daddr == d)?;
            b.check_stamp(now, dst);
            return Some(b);
        }
        let reclaim = chain.len() > TCP_METRICS_RECLAIM_DEPTH;
        let i = match reclaim {
            true => (0..chain.len())
                .min_by_key(|&i| chain[i].stamp)
                .expect("a deep chain"),
            false => {
                let fresh = MetricsBlock {
                    saddr: s,
                    daddr: d,
                    stamp: now,
                    lock: 0,
                    vals: [0; 5],
                    fastopen: CacheEntry::default(),
                };
                chain.insert(0, fresh);
                0
            }
        };
        let b = &mut chain[i];
        (b.saddr, b.daddr) = (s, d);
        b.suck_dst(now, dst, reclaim);
        Some(b)
    }

    /// `tcp_update_metrics`, as a connection that ended well leaves (`no_save`:
    /// `net.ipv4.tcp_no_metrics_save`; `no_ssthresh_save`:
    /// `net.ipv4.tcp_no_ssthresh_metrics_save`; `sysctl_reordering`:
    /// `net.ipv4.tcp_reordering`). A connection whose RTT is in doubt (its RTO
    /// backed off, or no sample) only clears the cached RTT.
    pub(crate) fn update(
        &mut self,
        now: Instant,
        dst: &RouteMetrics,
        key: (IpAddr, IpAddr),
        tp: &ConnFigures,
        (no_ssthresh_save, sysctl_reordering): (bool, u32),
    ) {
        if tp.backoff != 0 || tp.srtt8 == 0 {
            if let Some(tm) = self.get_mut(now, dst, key, false) {
                tm.set_unlocked(TcpMetric::Rtt, 0);
            }
            return;
        }
        let Some(tm) = self.get_mut(now, dst, key, true) else {
            return;
        };
        let rtt = tm.get(TcpMetric::Rtt);
        let mut m = rtt as i64 - tp.srtt8 as i64;
        // "If newly calculated rtt larger than stored one, store new one.
        // Otherwise, use EWMA. Remember, rtt overestimation is always better
        // than underestimation."
        let new_rtt = if m <= 0 {
            tp.srtt8
        } else {
            rtt - (m >> 3) as u32
        };
        tm.set_unlocked(TcpMetric::Rtt, new_rtt);
        if !tm.locked(TcpMetric::RttVar) {
            // "Scale deviation to rttvar fixed point"
            m = m.abs() >> 1;
            let m = (m as u32).max(tp.mdev);
            let var = tm.get(TcpMetric::RttVar);
            let var = if m >= var { m } else { var - ((var - m) >> 2) };
            tm.set(TcpMetric::RttVar, var);
        }
        update_window_metrics(tm, tp, no_ssthresh_save, sysctl_reordering);
        tm.stamp = now;
    }

    /// `tcp_init_metrics`' lookup: what the entry for `key` holds, if there is
    /// one (`no_ssthresh_save` hides a cached ssthresh).
    pub(crate) fn init_figures(
        &mut self,
        now: Instant,
        dst: &RouteMetrics,
        key: (IpAddr, IpAddr),
        no_ssthresh_save: bool,
    ) -> InitFigures {
        let Some(tm) = self.get_mut(now, dst, key, false) else {
            return InitFigures::default();
        };
        InitFigures {
            cwnd_clamp: tm.locked(TcpMetric::Cwnd).then(|| tm.get(TcpMetric::Cwnd)),
            ssthresh: match no_ssthresh_save {
                true => 0,
                false => tm.get(TcpMetric::Ssthresh),
            },
            reordering: tm.get(TcpMetric::Reordering),
            crtt8: tm.get(TcpMetric::Rtt),
        }
    }

    /// `tcp_peer_is_proven`: the entry for `key` holds an RTT (a stale entry,
    /// refreshed from the route by `tcpm_check_stamp`, holds the route's).
    pub(crate) fn peer_is_proven(
        &mut self,
        now: Instant,
        dst: &RouteMetrics,
        key: (IpAddr, IpAddr),
    ) -> bool {
        self.get_mut(now, dst, key, false)
            .is_some_and(|tm| tm.get(TcpMetric::Rtt) != 0)
    }

    /// `tcp_fastopen_cache_get`: the MSS and cookie kept for `src -> dst`; without
    /// a cookie, `exp` says to ask in the experimental format (`try_exp == 1`).
    pub fn fastopen_get(&self, src: IpAddr, dst: IpAddr) -> (u16, Option<FastOpenOption>, bool) {
        match self.block(src, dst).map(|b| &b.fastopen) {
            None => (0, None, false),
            Some(e) => (e.mss, e.cookie, e.cookie.is_none() && e.try_exp == 1),
        }
    }

    /// The Fast Open part of `src -> dst`'s entry, for tests and inspection.
    pub fn fastopen_entry(&self, src: IpAddr, dst: IpAddr) -> CacheEntry {
        self.block(src, dst).map(|b| b.fastopen).unwrap_or_default()
    }

    /// `tcp_fastopen_cache_set`: remembers a SYN-ACK's MSS and cookie (an answer
    /// without a cookie keeps the old one and may switch the request format,
    /// `try_exp`), and counts SYN-data losses.
    #[allow(clippy::too_many_arguments)] // tcp_fastopen_cache_set's own arguments
    pub(crate) fn fastopen_set(
        &mut self,
        now: Instant,
        dst: &RouteMetrics,
        key: (IpAddr, IpAddr),
        mss: u16,
        cookie: Option<FastOpenOption>,
        syn_lost: bool,
        try_exp: u8,
    ) {
        let Some(tm) = self.get_mut(now, dst, key, true) else {
            return;
        };
        let e = &mut tm.fastopen;
        if mss != 0 {
            e.mss = mss;
        }
        match cookie.filter(|c| c.len > 0) {
            Some(c) => e.cookie = Some(c),
            None if try_exp > e.try_exp && e.cookie.is_none() => e.try_exp = try_exp,
            None => {}
        }
        if syn_lost {
            e.syn_loss = e.syn_loss.saturating_add(1);
            e.last_syn_loss = Some(now);
        } else {
            e.syn_loss = 0;
        }
    }

    /// `ip tcp_metrics flush`: forget everything.
    pub fn flush(&mut self) {
        self.chains.clear();
    }
}

/// `tcp_update_metrics`' window part: in the initial slow start the largest cwnd
/// (and half of it as ssthresh) seen; in congestion avoidance in Open an average;
/// otherwise (after a loss) toward ssthresh, and a reordering degree above the
/// sysctl's.
fn update_window_metrics(
    tm: &mut MetricsBlock,
    tp: &ConnFigures,
    no_ssthresh_save: bool,
    sysctl_reordering: u32,
) {
    let ssthresh_ok = !no_ssthresh_save && !tm.locked(TcpMetric::Ssthresh);
    let cwnd_ok = !tm.locked(TcpMetric::Cwnd);
    let (cwnd, ssthresh) = (tp.cwnd, tp.ssthresh);
    if ssthresh >= INFINITE_SSTHRESH {
        // tcp_in_initial_slowstart: "Slow start still did not finish."
        let val = tm.get(TcpMetric::Ssthresh);
        if ssthresh_ok && val != 0 && (cwnd >> 1) > val {
            tm.set(TcpMetric::Ssthresh, cwnd >> 1);
        }
        if cwnd_ok && cwnd > tm.get(TcpMetric::Cwnd) {
            tm.set(TcpMetric::Cwnd, cwnd);
        }
    } else if cwnd >= ssthresh && tp.ca_open {
        // "Cong. avoidance phase, cwnd is reliable."
        if ssthresh_ok {
            tm.set(TcpMetric::Ssthresh, (cwnd >> 1).max(ssthresh));
        }
        if cwnd_ok {
            let val = tm.get(TcpMetric::Cwnd);
            tm.set(TcpMetric::Cwnd, ((val as u64 + cwnd as u64) >> 1) as u32);
        }
    } else {
        // "Else slow start did not finish, cwnd is non-sense, ssthresh may be
        // also invalid."
        if cwnd_ok {
            let val = tm.get(TcpMetric::Cwnd);
            tm.set(
                TcpMetric::Cwnd,
                ((val as u64 + ssthresh as u64) >> 1) as u32,
            );
        }
        let val = tm.get(TcpMetric::Ssthresh);
        if ssthresh_ok && val != 0 && ssthresh > val {
            tm.set(TcpMetric::Ssthresh, ssthresh);
        }
        let val = tm.get(TcpMetric::Reordering);
        if !tm.locked(TcpMetric::Reordering)
            && val < tp.reordering
            && tp.reordering != sysctl_reordering
        {
            tm.set(TcpMetric::Reordering, tp.reordering);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    const K: (&str, &str) = ("192.168.0.1", "192.0.2.1");

    fn key() -> (IpAddr, IpAddr) {
        (ip(K.0), ip(K.1))
    }

    fn conn(srtt_ms: u32, cwnd: u32, ssthresh: u32) -> ConnFigures {
        ConnFigures {
            srtt8: srtt_ms * 8000,
            mdev: 4000,
            backoff: 0,
            cwnd,
            ssthresh,
            ca_open: true,
            reordering: 3,
        }
    }

    #[test]
    fn fastopen_part_keeps_the_cookie_and_counts_losses() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        let k = key();
        c.fastopen_set(Instant::ZERO, &dst, k, 0, None, false, 1);
        assert_eq!(
            c.fastopen_get(k.0, k.1),
            (0, None, true),
            "no cookie: FOEXP"
        );
        let cookie = FastOpenOption::cookie(true, &[1; 8]);
        c.fastopen_set(Instant::ZERO, &dst, k, 1460, Some(cookie), false, 0);
        assert_eq!(c.fastopen_get(k.0, k.1), (1460, Some(cookie), false));
        let request = Some(FastOpenOption::request(false));
        c.fastopen_set(Instant::ZERO, &dst, k, 0, request, true, 2);
        let e = c.fastopen_entry(k.0, k.1);
        assert_eq!(
            (e.mss, e.syn_loss, e.try_exp),
            (1460, 1, 1),
            "try_exp moves only without a cookie"
        );
        assert_eq!(
            c.fastopen_get(k.1, k.0),
            (0, None, false),
            "keyed by source and destination"
        );
        let mapped = ip("::ffff:192.0.2.1");
        assert_eq!(
            c.fastopen_get(ip("::ffff:192.168.0.1"), mapped).0,
            1460,
            "a mapped address is its IPv4 one"
        );
        c.flush();
        assert!(c.is_empty());
    }

    #[test]
    fn update_takes_a_larger_rtt_at_once_and_a_smaller_one_by_an_eighth() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        let t = Instant::ZERO;
        c.update(t, &dst, key(), &conn(40, 10, INFINITE_SSTHRESH), (true, 3));
        let b = *c.block(key().0, key().1).expect("created");
        assert_eq!(b.get(TcpMetric::Rtt), 320_000);
        assert_eq!(b.get(TcpMetric::RttVar), 160_000, "|m| / 2 above mdev");
        assert_eq!(
            b.get(TcpMetric::Cwnd),
            10,
            "initial slow start: the largest cwnd"
        );
        c.update(t, &dst, key(), &conn(8, 10, INFINITE_SSTHRESH), (true, 3));
        let b = *c.block(key().0, key().1).expect("kept");
        assert_eq!(b.get(TcpMetric::Rtt), 320_000 - (256_000 >> 3));
        assert_eq!(
            b.get(TcpMetric::RttVar),
            160_000 - ((160_000 - 128_000) >> 2)
        );
    }

    #[test]
    fn a_backed_off_connection_only_clears_the_rtt() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        let mut doubt = conn(40, 10, 20);
        doubt.backoff = 1;
        c.update(Instant::ZERO, &dst, key(), &doubt, (true, 3));
        assert!(c.is_empty(), "no entry is created for an RTT in doubt");
        c.update(Instant::ZERO, &dst, key(), &conn(40, 30, 20), (true, 3));
        c.update(Instant::ZERO, &dst, key(), &doubt, (true, 3));
        let b = c.block(key().0, key().1).expect("kept");
        assert_eq!((b.get(TcpMetric::Rtt), b.get(TcpMetric::Cwnd)), (0, 15));
    }

    #[test]
    fn window_rules_by_phase() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        let t = Instant::ZERO;
        // Congestion avoidance in Open: ssthresh max(cwnd/2, ssthresh), cwnd averaged.
        c.update(t, &dst, key(), &conn(10, 40, 20), (false, 3));
        let b = *c.block(key().0, key().1).expect("created");
        assert_eq!(
            (b.get(TcpMetric::Ssthresh), b.get(TcpMetric::Cwnd)),
            (20, 20)
        );
        // After a loss (slow start below ssthresh): cwnd toward ssthresh, a larger
        // ssthresh and a reordering degree above the sysctl's kept.
        let mut lossy = conn(10, 5, 30);
        lossy.ca_open = false;
        lossy.reordering = 9;
        c.update(t, &dst, key(), &lossy, (false, 3));
        let b = *c.block(key().0, key().1).expect("kept");
        assert_eq!(b.get(TcpMetric::Cwnd), 25);
        assert_eq!(b.get(TcpMetric::Ssthresh), 30);
        assert_eq!(b.get(TcpMetric::Reordering), 9);
        // tcp_no_ssthresh_metrics_save hides it from the next connection.
        assert_eq!(c.init_figures(t, &dst, key(), true).ssthresh, 0);
        let f = c.init_figures(t, &dst, key(), false);
        assert_eq!(
            (f.ssthresh, f.reordering, f.crtt8, f.cwnd_clamp),
            (30, 9, 80_000, None)
        );
    }

    #[test]
    fn route_metrics_seed_and_lock() {
        let mut dst = RouteMetrics::default();
        dst.set(Rtax::Rtt, 800, false); // `rtt 100ms`: iproute2 stores ms x 8
        dst.set(Rtax::Cwnd, 12, true);
        let mut c = TcpMetrics::default();
        c.update(Instant::ZERO, &dst, key(), &conn(10, 40, 20), (true, 3));
        let b = *c.block(key().0, key().1).expect("created");
        assert_eq!(b.get(TcpMetric::Rtt), 800_000 - ((800_000 - 80_000) >> 3));
        assert_eq!(
            b.get(TcpMetric::Cwnd),
            12,
            "a locked metric stays the route's"
        );
        assert_eq!(
            c.init_figures(Instant::ZERO, &dst, key(), true).cwnd_clamp,
            Some(12)
        );
    }

    #[test]
    fn an_hour_old_entry_starts_again_from_the_route() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        c.update(Instant::ZERO, &dst, key(), &conn(10, 40, 20), (true, 3));
        let later = Instant::ZERO + TCP_METRICS_TIMEOUT + Duration::from_secs(1);
        assert_eq!(
            c.init_figures(later, &dst, key(), true),
            InitFigures::default()
        );
    }

    #[test]
    fn a_chain_holds_six_entries_and_recycles_its_oldest() {
        let (mut c, dst) = (TcpMetrics::default(), RouteMetrics::default());
        let d = ip(K.1);
        for i in 0..8u8 {
            let s = IpAddr::from([10, 0, 0, i]);
            let t = Instant::ZERO + Duration::from_secs(i as u64);
            c.fastopen_set(t, &dst, (s, d), 1000 + i as u16, None, false, 0);
        }
        assert_eq!(c.len(), 6, "one destination's chain stays at six entries");
        assert_eq!(c.fastopen_entry(IpAddr::from([10, 0, 0, 7]), d).mss, 1007);
        assert_eq!(
            c.fastopen_entry(IpAddr::from([10, 0, 0, 0]), d).mss,
            0,
            "the oldest went"
        );
        assert_eq!(c.fastopen_entry(IpAddr::from([10, 0, 0, 2]), d).mss, 1002);
    }
}
