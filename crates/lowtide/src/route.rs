//! Routes and their metrics: what `ip route add|change|replace PREFIX ... mtu lock N
//! advmss N initcwnd N ...` gives Linux's TCP. Linux keeps them in the FIB and hands
//! a connection a `dst_entry` whose metrics (`RTAX_*`, include/uapi/linux/rtnetlink.h)
//! TCP reads with `dst_metric`, `dst_metric_locked` and `dst_feature`
//! (include/net/dst.h). lowtide keeps the prefixes and their metrics only: the stack
//! has one device, so a route is the metrics of the longest prefix that matches a
//! destination. A change makes each connection's route obsolete, as a FIB change
//! bumps the route generation: the connection looks its route up again at its next
//! transmission (`__sk_dst_check`), and its MSS follows at the next
//! `tcp_current_mss`.

use crate::time::Instant;
use core::time::Duration;
use rustc_hash::FxHashMap;
use std::net::IpAddr;

/// `IP_MAX_MTU`: the largest MTU a route gives (`ipv4_mtu`).
const IP_MAX_MTU: u32 = 0xFFF0;
/// `IPV6_MIN_MTU` ([RFC 8200 section 5](https://www.rfc-editor.org/rfc/rfc8200#section-5)):
/// no IPv6 path MTU is below it (`__ip6_rt_update_pmtu`).
pub(crate) const IPV6_MIN_MTU: u32 = 1280;

/// A route metric (`RTAX_*`), by Linux's name for it in `ip route`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Rtax {
    /// `RTAX_MTU` (`mtu`): the path MTU; locked, no path MTU discovery.
    Mtu = 2,
    /// `RTAX_WINDOW` (`window`): the largest window to advertise (`window_clamp`).
    Window = 3,
    /// `RTAX_RTT` (`rtt`), milliseconds: an RTT estimate for new connections.
    Rtt = 4,
    /// `RTAX_RTTVAR` (`rttvar`), milliseconds.
    RttVar = 5,
    /// `RTAX_SSTHRESH` (`ssthresh`): the initial slow-start threshold, when locked.
    Ssthresh = 6,
    /// `RTAX_CWND` (`cwnd`): a clamp on the congestion window, when locked.
    Cwnd = 7,
    /// `RTAX_ADVMSS` (`advmss`): the MSS to advertise.
    AdvMss = 8,
    /// `RTAX_REORDERING` (`reordering`): the initial reordering degree.
    Reordering = 9,
    /// `RTAX_HOPLIMIT` (`hoplimit`): the TTL or hop limit.
    HopLimit = 10,
    /// `RTAX_INITCWND` (`initcwnd`): the initial congestion window, in segments.
    InitCwnd = 11,
    /// `RTAX_FEATURES` (`features ecn`): [`RTAX_FEATURE_ECN`] asks for ECN.
    Features = 12,
    /// `RTAX_RTO_MIN` (`rto_min`), milliseconds: the RTO's lower bound.
    RtoMin = 13,
    /// `RTAX_INITRWND` (`initrwnd`): the initial receive window, in segments.
    InitRwnd = 14,
    /// `RTAX_QUICKACK` (`quickack`): never delay an ACK.
    QuickAck = 15,
    /// `RTAX_CC_ALGO` (`congctl`): the congestion control for new connections.
    CcAlgo = 16,
    /// `RTAX_FASTOPEN_NO_COOKIE` (`fastopen_no_cookie`).
    FastopenNoCookie = 17,
}

/// `RTAX_FEATURE_ECN`: the route asks for ECN (`dst_feature`).
pub const RTAX_FEATURE_ECN: u32 = 1 << 0;

/// `RTAX_MAX` + 1: room for every metric by number.
const SLOTS: usize = 18;

impl Rtax {
    /// The metric `ip route` calls `name`.
    pub fn by_name(name: &str) -> Option<Rtax> {
        Some(match name {
            "mtu" => Rtax::Mtu,
            "window" => Rtax::Window,
            "rtt" => Rtax::Rtt,
            "rttvar" => Rtax::RttVar,
            "ssthresh" => Rtax::Ssthresh,
            "cwnd" => Rtax::Cwnd,
            "advmss" => Rtax::AdvMss,
            "reordering" => Rtax::Reordering,
            "hoplimit" => Rtax::HopLimit,
            "initcwnd" => Rtax::InitCwnd,
            "features" => Rtax::Features,
            "rto_min" => Rtax::RtoMin,
            "initrwnd" => Rtax::InitRwnd,
            "quickack" => Rtax::QuickAck,
            "congctl" => Rtax::CcAlgo,
            "fastopen_no_cookie" => Rtax::FastopenNoCookie,
            _ => return None,
        })
    }
}

/// A route's metrics: a value per `RTAX_*` (0 is unset, as in Linux), the locked
/// ones (`RTAX_LOCK`), and the congestion control `congctl` names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metrics {
    vals: [u32; SLOTS],
    locks: u32,
    cc_algo: Option<String>,
}

impl Metrics {
    /// Sets `m` to `val`, locked or not (`ip route ... m [lock] val`).
    pub fn set(&mut self, m: Rtax, val: u32, lock: bool) {
        self.vals[m as usize] = val;
        self.set_lock(m, lock);
    }

    /// `dst_metric`: the value of `m`, 0 when unset.
    pub fn get(&self, m: Rtax) -> u32 {
        self.vals[m as usize]
    }

    /// `dst_metric_locked`: `m` was given with `lock`.
    pub fn locked(&self, m: Rtax) -> bool {
        self.locks & (1 << m as u32) != 0
    }

    /// `congctl [lock] NAME`: the congestion control of new connections on the
    /// route; locked, `TCP_CONGESTION` may not change it (`icsk_ca_dst_locked`).
    pub fn set_congctl(&mut self, name: &str, lock: bool) {
        self.cc_algo = Some(name.to_string());
        self.vals[Rtax::CcAlgo as usize] = 1;
        self.set_lock(Rtax::CcAlgo, lock);
    }

    /// The congestion control `congctl` names, if any.
    pub fn congctl(&self) -> Option<&str> {
        self.cc_algo.as_deref()
    }

    /// `dst_feature(dst, RTAX_FEATURE_ECN)`.
    pub fn ecn(&self) -> bool {
        self.get(Rtax::Features) & RTAX_FEATURE_ECN != 0
    }

    fn set_lock(&mut self, m: Rtax, lock: bool) {
        if lock {
            self.locks |= 1 << m as u32;
        } else {
            self.locks &= !(1 << m as u32);
        }
    }
}

/// One route: a destination prefix and its metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The prefix's address.
    pub dst: IpAddr,
    /// Its length in bits.
    pub prefix_len: u8,
    /// What TCP reads from it.
    pub metrics: Metrics,
}

impl Route {
    fn matches(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| -> (u128, u32) {
            match a {
                IpAddr::V4(v4) => (u32::from(v4) as u128, 32),
                IpAddr::V6(v6) => (u128::from(v6), 128),
            }
        };
        let ((p, width), (a, aw)) = (bits(self.dst), bits(ip));
        if width != aw {
            return false;
        }
        let len = u32::from(self.prefix_len).min(width);
        let shift = width - len;
        len == 0 || (p >> shift) == (a >> shift)
    }
}

/// The routes with metrics, and a generation that changes with every change; and
/// the path MTUs learned from ICMP per destination, until they expire (Linux's route
/// exceptions, `fib_nh_exception`).
#[derive(Debug, Clone, Default)]
pub struct RouteTable {
    routes: Vec<Route>,
    generation: u32,
    none: Metrics,
    learned: FxHashMap<IpAddr, Learned>,
}

/// A path MTU learned from ICMP for one destination (`struct fib_nh_exception`:
/// `fnhe_pmtu`, `fnhe_expires`, `fnhe_mtu_locked`).
#[derive(Debug, Clone, Copy)]
struct Learned {
    mtu: u32,
    expires: Instant,
    /// Raised to `ip_rt_min_pmtu`: the route's MTU is locked while it holds (no DF
    /// on the route's packets, no further learning; `rt_mtu_locked`).
    locked: bool,
}

impl RouteTable {
    /// Adds `route`, or replaces the one with the same prefix (`ip route
    /// add|change|replace`): its metrics become `route.metrics`, whole.
    pub fn replace(&mut self, route: Route) {
        let same = |r: &Route| r.dst == route.dst && r.prefix_len == route.prefix_len;
        match self.routes.iter_mut().find(|r| same(r)) {
            Some(r) => *r = route,
            None => self.routes.push(route),
        }
        self.generation = self.generation.wrapping_add(1);
    }

    /// Removes the route of this prefix (`ip route del`); whether there was one.
    pub fn delete(&mut self, dst: IpAddr, prefix_len: u8) -> bool {
        let before = self.routes.len();
        self.routes
            .retain(|r| !(r.dst == dst && r.prefix_len == prefix_len));
        let gone = self.routes.len() != before;
        if gone {
            self.generation = self.generation.wrapping_add(1);
        }
        gone
    }

    /// The metrics of the longest prefix matching `ip` (none: all unset).
    pub fn lookup(&self, ip: IpAddr) -> &Metrics {
        self.routes
            .iter()
            .filter(|r| r.matches(ip))
            .max_by_key(|r| r.prefix_len)
            .map_or(&self.none, |r| &r.metrics)
    }

    /// Changes with every change of the table (`rt_genid`).
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// `dst_mtu` (`ipv4_mtu`/`ip6_mtu`): a learned path MTU that has not expired
    /// (bounded by the device's, which a device MTU change lowers with it), else the
    /// route's `mtu`, else the device's.
    pub fn mtu(&self, now: Instant, ip: IpAddr, device_mtu: u32) -> u32 {
        if let Some(l) = self.learned_in_effect(now, ip) {
            return l.mtu.min(device_mtu);
        }
        match self.lookup(ip).get(Rtax::Mtu) {
            0 => device_mtu,
            mtu => mtu.min(IP_MAX_MTU),
        }
    }

    /// `rt_mtu_locked`: the path MTU learned for `ip` was raised to
    /// `ip_rt_min_pmtu` and locked, and still holds. With the route's own `mtu lock`
    /// it makes `ip_mtu_locked`.
    pub fn learned_mtu_locked(&self, now: Instant, ip: IpAddr) -> bool {
        self.learned_now(now, ip).is_some_and(|l| l.locked)
    }

    /// When the path MTU learned for `ip` that [`RouteTable::mtu`] gives expires
    /// (`dst->expires`); `None` when the MTU is not a learned one.
    pub fn learned_expiry(&self, now: Instant, ip: IpAddr) -> Option<Instant> {
        self.learned_in_effect(now, ip).map(|l| l.expires)
    }

    /// The path MTU learned for `ip` that `dst_mtu` gives: unexpired, on a route
    /// whose own MTU is not locked.
    fn learned_in_effect(&self, now: Instant, ip: IpAddr) -> Option<&Learned> {
        match self.lookup(ip).locked(Rtax::Mtu) {
            true => None,
            false => self.learned_now(now, ip),
        }
    }

    /// The path MTU learned for `ip`, if it has not expired.
    fn learned_now(&self, now: Instant, ip: IpAddr) -> Option<&Learned> {
        self.learned.get(&ip).filter(|l| now < l.expires)
    }

    /// `__ip_rt_update_pmtu`/`__ip6_rt_update_pmtu`: an ICMP message says the path
    /// MTU to `ip` is `mtu`; remembers it for `ttl` (`net.ipv4.route.mtu_expires`)
    /// and returns the MTU that holds after. Nothing is learned on a route whose MTU
    /// is locked (`ip_mtu_locked`), nor above the MTU that holds. IPv4 takes a value
    /// under `min_pmtu` (`net.ipv4.route.min_pmtu`) as that, locked; and keeps the expiry of the value it
    /// already holds until half its life is gone. IPv6 takes at least
    /// `IPV6_MIN_MTU`, and only a lower value. A new or changed value makes the
    /// connections look their route up again (the exception marks the nexthop's
    /// cached routes stale, `update_or_create_fnhe`), so every connection to `ip`
    /// follows it at its next `tcp_current_mss`.
    pub fn learn_pmtu(
        &mut self,
        now: Instant,
        ip: IpAddr,
        mtu: u32,
        (ttl, min_pmtu): (Duration, u32),
        device_mtu: u32,
    ) -> u32 {
        let old = self.mtu(now, ip, device_mtu);
        if self.lookup(ip).locked(Rtax::Mtu) || self.learned_mtu_locked(now, ip) {
            return old;
        }
        let entry = match ip {
            IpAddr::V4(_) => {
                if old < mtu {
                    return old;
                }
                let locked = mtu < min_pmtu;
                let mtu = match locked {
                    true => old.min(min_pmtu),
                    false => mtu,
                };
                // "rt->rt_pmtu == mtu && !lock && time_before(jiffies,
                // dst->expires - ip_rt_mtu_expires / 2)"
                let held = self.learned_now(now, ip);
                if held.is_some_and(|l| l.mtu == mtu && !locked && now + ttl / 2 < l.expires) {
                    return old;
                }
                Learned {
                    mtu,
                    expires: now + ttl,
                    locked,
                }
            }
            IpAddr::V6(_) => {
                let mtu = mtu.max(IPV6_MIN_MTU);
                if mtu >= old {
                    return old;
                }
                Learned {
                    mtu,
                    expires: now + ttl,
                    locked: false,
                }
            }
        };
        self.learned.retain(|_, l| now < l.expires);
        self.learned.insert(ip, entry);
        self.generation = self.generation.wrapping_add(1);
        entry.mtu.min(device_mtu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dst: &str, len: u8, m: Rtax, v: u32) -> Route {
        let mut metrics = Metrics::default();
        metrics.set(m, v, false);
        Route {
            dst: dst.parse().unwrap(),
            prefix_len: len,
            metrics,
        }
    }

    #[test]
    fn the_longest_matching_prefix_gives_the_metrics() {
        let mut t = RouteTable::default();
        t.replace(route("0.0.0.0", 0, Rtax::InitCwnd, 4));
        t.replace(route("192.0.2.0", 24, Rtax::InitCwnd, 11));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(t.lookup(ip("192.0.2.1")).get(Rtax::InitCwnd), 11);
        assert_eq!(t.lookup(ip("198.51.100.1")).get(Rtax::InitCwnd), 4);
        // An IPv4 prefix never matches an IPv6 address.
        assert_eq!(t.lookup(ip("2001:db8::1")).get(Rtax::InitCwnd), 0);
    }

    #[test]
    fn replace_swaps_the_whole_metric_set_and_bumps_the_generation() {
        let mut t = RouteTable::default();
        let g0 = t.generation();
        t.replace(route("192.0.2.1", 32, Rtax::AdvMss, 600));
        t.replace(route("192.0.2.1", 32, Rtax::Mtu, 1500));
        let m = t.lookup("192.0.2.1".parse().unwrap());
        assert_eq!((m.get(Rtax::AdvMss), m.get(Rtax::Mtu)), (0, 1500));
        assert_eq!(t.generation(), g0.wrapping_add(2));
        assert!(t.delete("192.0.2.1".parse().unwrap(), 32));
        assert!(!t.delete("192.0.2.1".parse().unwrap(), 32));
    }

    const TTL: Duration = Duration::from_secs(600);

    fn secs(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }

    #[test]
    fn a_learned_path_mtu_holds_until_it_expires_unless_the_route_mtu_is_locked() {
        let mut t = RouteTable::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let (t0, t1) = (secs(0), secs(600));
        let g = t.generation();
        assert_eq!(t.learn_pmtu(t0, ip, 1400, (TTL, 552), 1500), 1400);
        assert_ne!(
            t.generation(),
            g,
            "the connections look their route up again"
        );
        let g = t.generation();
        assert_eq!(t.learn_pmtu(t0, ip, 1450, (TTL, 552), 1500), 1400); // never raised
        assert_eq!(t.generation(), g);
        assert_eq!(t.mtu(t0, ip, 1500), 1400);
        assert_eq!(t.mtu(t1, ip, 1500), 1500); // expired
        t.replace(route("192.0.2.1", 32, Rtax::Mtu, 1300));
        assert_eq!(t.mtu(t1, ip, 1500), 1300);
        let mut locked = Metrics::default();
        locked.set(Rtax::Mtu, 640, true);
        t.replace(Route {
            dst: ip,
            prefix_len: 32,
            metrics: locked,
        });
        assert_eq!(t.learn_pmtu(t1, ip, 576, (TTL, 552), 1500), 640);
        assert_eq!(t.mtu(t1, ip, 1500), 640);
    }

    #[test]
    fn an_ipv4_path_mtu_under_min_pmtu_is_min_pmtu_locked_until_it_expires() {
        let mut t = RouteTable::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(t.learn_pmtu(secs(0), ip, 500, (TTL, 552), 1500), 552);
        assert!(t.learned_mtu_locked(secs(0), ip));
        // ip_mtu_locked: nothing more is learned while the lock holds.
        assert_eq!(t.learn_pmtu(secs(1), ip, 552, (TTL, 552), 1500), 552);
        assert!(t.learned_mtu_locked(secs(1), ip));
        assert!(!t.learned_mtu_locked(secs(600), ip));
        // Under a route MTU below min_pmtu, "min(old_mtu, ip_rt_min_pmtu)".
        t.replace(route("192.0.2.1", 32, Rtax::Mtu, 500));
        assert_eq!(t.learn_pmtu(secs(600), ip, 400, (TTL, 552), 1500), 500);
        assert!(t.learned_mtu_locked(secs(600), ip));
        let mut t = RouteTable::default();
        t.learn_pmtu(secs(0), ip, 1400, (TTL, 552), 1500);
        assert!(!t.learned_mtu_locked(secs(0), ip));
        // An IPv6 path MTU is never locked, and is at least IPV6_MIN_MTU.
        let ip6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            t.learn_pmtu(secs(0), ip6, 1000, (TTL, 552), 1500),
            IPV6_MIN_MTU
        );
        assert!(!t.learned_mtu_locked(secs(0), ip6));
    }

    #[test]
    fn the_same_ipv4_path_mtu_renews_its_expiry_only_in_its_second_half() {
        let mut t = RouteTable::default();
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        t.learn_pmtu(secs(0), ip, 1400, (TTL, 552), 1500);
        t.learn_pmtu(secs(299), ip, 1400, (TTL, 552), 1500); // first half: kept
        assert_eq!(t.mtu(secs(600), ip, 1500), 1500);
        t.learn_pmtu(secs(0), ip, 1400, (TTL, 552), 1500);
        t.learn_pmtu(secs(301), ip, 1400, (TTL, 552), 1500); // second half: renewed
        assert_eq!(t.mtu(secs(900), ip, 1500), 1400);
        assert_eq!(t.mtu(secs(901), ip, 1500), 1500);
        // IPv6 learns only a lower value: the same one renews nothing.
        let ip6: IpAddr = "2001:db8::1".parse().unwrap();
        t.learn_pmtu(secs(0), ip6, 1400, (TTL, 552), 1500);
        t.learn_pmtu(secs(500), ip6, 1400, (TTL, 552), 1500);
        assert_eq!(t.mtu(secs(600), ip6, 1500), 1500);
    }

    #[test]
    fn locks_and_features() {
        let mut m = Metrics::default();
        m.set(Rtax::Mtu, 640, true);
        m.set(Rtax::Features, RTAX_FEATURE_ECN, false);
        m.set_congctl("reno", true);
        assert!(m.locked(Rtax::Mtu) && m.locked(Rtax::CcAlgo) && !m.locked(Rtax::Features));
        assert!(m.ecn());
        assert_eq!(m.congctl(), Some("reno"));
        m.set(Rtax::Mtu, 640, false);
        assert!(!m.locked(Rtax::Mtu));
    }
}
