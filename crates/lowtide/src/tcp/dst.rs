//! A connection's route (`sk_dst_cache`) and what TCP takes from its metrics
//! (`crate::route`): `tcp_connect_init` and `tcp_openreq_init_rwin` (advmss, window,
//! initrwnd), `tcp_ca_dst_init`/`tcp_ca_openreq_child` (congctl), `tcp_init_cwnd`
//! (initcwnd), `tcp_rto_min` (rto_min), `tcp_in_quickack_mode` (quickack), and the
//! route check before each transmission (`__sk_dst_check`) that takes a changed
//! route's MTU to the next `tcp_current_mss`; and what a connection reads from and
//! leaves in the metrics cache (`tcp_init_metrics`, `tcp_update_metrics`,
//! `tcp/metrics.rs`).

use super::cong::{CaState, INFINITE_SSTHRESH};
use super::metrics::ConnFigures;
pub(crate) use super::sock::Dst;
use super::sock::Tcb;
use super::Ctx;
use crate::config::Config;
use crate::route::{RouteTable, Rtax};
use crate::time::Instant;
use core::time::Duration;

/// `ip_rt_min_advmss` (`net.ipv4.route.min_adv_mss`): the least IPv4 MSS a route
/// advertises by default.
const IP_RT_MIN_ADVMSS: u32 = 256;
/// `ip6_rt_min_advmss` (`net.ipv6.route.min_adv_mss`, `IPV6_MIN_MTU` - 20 - 40).
const IP6_RT_MIN_ADVMSS: u32 = 1220;

impl Tcb {
    /// The connection takes its route (`ip_route_connect`, `inet_csk_route_req`):
    /// the path MTU its MSS starts from, and the route's metrics (`Tcb::rto_min`).
    pub(crate) fn attach_dst(&mut self, routes: &RouteTable, now: Instant, mtu: u32) {
        let remote = self.tuple.remote.ip();
        let metrics = routes.lookup(remote);
        self.dst = Dst {
            metrics: metrics.clone(),
            generation: routes.generation(),
            mtu,
            mtu_locked: routes.learned_mtu_locked(now, remote),
            mtu_expires: routes.learned_expiry(now, remote),
            obsolete: false,
        };
        self.pmtu_cookie = mtu;
        // tcp_in_quickack_mode: icsk_ack.dst_quick_ack.
        self.ack.dst_quick_ack = metrics.get(Rtax::QuickAck) != 0;
    }

    /// `tcp_rto_min`: the route's `rto_min` when locked (and not 0), else the
    /// socket's `icsk_rto_min` (`tcp_rto_min_us`, `TCP_RTO_MIN_US`).
    pub(crate) fn rto_min(&self) -> Duration {
        let m = &self.dst.metrics;
        match m.get(Rtax::RtoMin) {
            ms if ms != 0 && m.locked(Rtax::RtoMin) => Duration::from_millis(ms as u64),
            _ => self.icsk.rto_min,
        }
    }

    /// `dst_metric_advmss`: the route's advmss, else its MTU less the headers, at
    /// least `ip_rt_min_advmss` (IPv6: `ip6_rt_min_advmss`).
    pub(crate) fn dst_advmss(&self) -> u32 {
        let m = self.dst.metrics.get(Rtax::AdvMss);
        if m != 0 {
            return m;
        }
        let (hdr, min) = match self.tuple.local.is_ipv6() {
            true => (60, IP6_RT_MIN_ADVMSS),
            false => (40, IP_RT_MIN_ADVMSS),
        };
        self.dst.mtu.saturating_sub(hdr).max(min).min(65535 - 40)
    }

    /// What `tcp_connect_init` and `tcp_openreq_init_rwin` take from the route
    /// before the initial window is chosen: the congestion control the route names
    /// (`tcp_ca_dst_init`, `tcp_ca_openreq_child`: over the socket's own choice),
    /// `RTAX_WINDOW` as `window_clamp` unless the socket set one, and `advmss` the
    /// route's (`tcp_mss_clamp`: never above `TCP_MAXSEG`). Returns `RTAX_INITRWND`.
    pub(crate) fn dst_connect_init(&mut self, cfg: &Config) -> u32 {
        if let Some(cc) = self
            .dst
            .metrics
            .congctl()
            .and_then(|n| super::cong::by_name_cfg(n, cfg))
        {
            self.cc = cc;
            self.ca_dst_locked = self.dst.metrics.locked(Rtax::CcAlgo);
        }
        if self.window_clamp == 0 {
            self.window_clamp = self.dst.metrics.get(Rtax::Window);
        }
        let advmss = self.dst_advmss();
        self.advmss = match self.rx_opt.user_mss {
            0 => advmss,
            user => advmss.min(user),
        };
        self.dst.metrics.get(Rtax::InitRwnd)
    }

    /// `tcp_init_cwnd`: the route's initcwnd, else the stack's (`TCP_INIT_CWND`),
    /// no more than `snd_cwnd_clamp`.
    pub(crate) fn init_cwnd(&self, cfg: &Config) -> u32 {
        match self.dst.metrics.get(Rtax::InitCwnd) {
            0 => cfg.initcwnd,
            n => n,
        }
        .min(self.cw.snd_cwnd_clamp)
    }

    /// `tcp_init_metrics`, as the transfer starts (`tcp_init_transfer`): ssthresh
    /// back to infinite, then what the metrics cache holds for this address pair:
    /// a locked route `cwnd` as the window's clamp, a cached ssthresh (with
    /// `tcp_no_ssthresh_metrics_save` 0) and reordering degree, and an RTO from a
    /// cached RTT larger than the handshake's sample (`crtt + max(2 crtt,
    /// rto_min)`, in jiffies at HZ 1000); with neither, RFC 6298 5.7's 3 s fallback.
    pub(crate) fn init_metrics(&mut self, ctx: &mut Ctx) {
        self.cw.snd_ssthresh = INFINITE_SSTHRESH;
        let no_ssthresh = ctx.cfg.tcp_no_ssthresh_metrics_save != 0;
        let key = (self.tuple.local.ip(), self.tuple.remote.ip());
        let f = ctx
            .metrics
            .init_figures(ctx.now, &self.dst.metrics, key, no_ssthresh);
        if let Some(clamp) = f.cwnd_clamp {
            // Linux takes a locked `cwnd 0` as is; a window of 0 would never send.
            self.cw.snd_cwnd_clamp = clamp.max(1);
        }
        if f.ssthresh != 0 {
            self.cw.snd_ssthresh = f.ssthresh.min(self.cw.snd_cwnd_clamp);
        }
        if f.reordering != 0 {
            self.reordering = f.reordering;
        }
        if f.crtt8 > self.rtt.est.srtt8 {
            let crtt = Duration::from_millis((f.crtt8 / 8000) as u64);
            self.icsk.rto = crtt + (2 * crtt).max(self.rto_min());
        } else if self.rtt.est.srtt8 == 0 {
            self.rto_fallback();
        }
    }

    /// `tcp_update_metrics`, as a connection that ended well goes (into TIME-WAIT,
    /// or from LAST-ACK to CLOSED), unless `net.ipv4.tcp_no_metrics_save`.
    pub(crate) fn update_metrics(&mut self, ctx: &mut Ctx) {
        if ctx.cfg.tcp_no_metrics_save != 0 {
            return;
        }
        let tp = ConnFigures {
            srtt8: self.rtt.est.srtt8,
            mdev: self.rtt.est.mdev,
            backoff: self.icsk.backoff,
            cwnd: self.cw.snd_cwnd,
            ssthresh: self.cw.snd_ssthresh,
            ca_open: self.ca_state == CaState::Open,
            reordering: self.reordering,
        };
        let key = (self.tuple.local.ip(), self.tuple.remote.ip());
        let sysctls = (
            ctx.cfg.tcp_no_ssthresh_metrics_save != 0,
            ctx.cfg.tcp_reordering,
        );
        ctx.metrics
            .update(ctx.now, &self.dst.metrics, key, &tp, sysctls);
    }

    /// `__sk_dst_check` before a transmission: a route that changed since the
    /// connection took it is looked up again; its MTU reaches the MSS at the next
    /// `tcp_current_mss` ([`Tcb::sync_dst_mtu`]).
    pub(crate) fn dst_check(&mut self, ctx: &Ctx) {
        if self.dst.generation == ctx.routes.generation() && !self.dst.obsolete {
            return;
        }
        self.dst.obsolete = false;
        let remote = self.tuple.remote.ip();
        self.dst.metrics = ctx.routes.lookup(remote).clone();
        self.dst.generation = ctx.routes.generation();
        self.refresh_dst_mtu(ctx);
    }

    /// The route's MTU as the table holds it now: `dst_mtu`, whether a learned
    /// one locked it, and when a learned one expires.
    pub(crate) fn refresh_dst_mtu(&mut self, ctx: &Ctx) {
        let remote = self.tuple.remote.ip();
        self.dst.mtu = ctx.routes.mtu(ctx.now, remote, ctx.cfg.mtu);
        self.dst.mtu_locked = ctx.routes.learned_mtu_locked(ctx.now, remote);
        self.dst.mtu_expires = ctx.routes.learned_expiry(ctx.now, remote);
    }

    /// `tcp_current_mss`'s check: the route's MTU differs from `icsk_pmtu_cookie`,
    /// so the MSS is synced to it (`tcp_sync_mss`), up or down. A learned path MTU
    /// that has expired no longer counts (`ipv4_mtu`: "time_after_eq(jiffies,
    /// rt->dst.expires)"), so the MSS goes back up with the route's.
    pub(crate) fn sync_dst_mtu(&mut self, ctx: &mut Ctx) {
        if self.dst.mtu_expires.is_some_and(|e| ctx.now >= e) {
            self.refresh_dst_mtu(ctx);
        }
        if self.dst.mtu != self.pmtu_cookie && self.dst.mtu != 0 {
            let mtu = self.dst.mtu;
            self.route_mtu_changed(ctx, mtu);
        }
    }
}
