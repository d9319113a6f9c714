//! TIME-WAIT and orphaned FIN-WAIT-2 as Linux keeps them (tcp_minisocks.c,
//! inet_timewait_sock.c): not the connection's `Tcb` but a few words of it
//! (`struct tcp_timewait_sock`), enough to answer a retransmitted FIN, to reject
//! old duplicates (PAWS), to accept a SYN that may reopen the connection and to
//! hand its sequence space and timestamps to a new `connect` (`tcp_tw_reuse`).

use super::consts::{TCP_PAWS_MSL_SECS, TCP_PAWS_WRAP_SECS, TCP_TIMEWAIT_LEN};
use super::seq::Seq;
pub(crate) use super::sock::TimeWaitSock;
use super::{Ctx, TcpState};
use crate::config::Config;
use crate::mib::Mib;
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};

/// What `tcp_timewait_state_process` decided (`enum tcp_tw_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TwStatus {
    /// `TCP_TW_SUCCESS`: dropped, nothing to send.
    Success,
    /// `inet_twsk_deschedule_put` then `TCP_TW_SUCCESS`: the socket goes now.
    Kill,
    /// `TCP_TW_ACK`: answer with an ACK (`tcp_v4_timewait_ack`) carrying `tw_tos`
    /// whole, ECN bits included.
    Ack,
    /// `TCP_TW_ACK_OOW`: the ACK to an out-of-window or PAWS-rejected segment
    /// (`tcp_timewait_check_oow_rate_limit`), sent without `tw_tos`'s ECN bits.
    AckOow,
    /// `TCP_TW_RST`: answer with a reset, and the socket goes.
    Rst,
    /// `TCP_TW_SYN`: a SYN that may open a new connection with this ISN, if a
    /// listener takes it.
    Syn(u32),
}

/// `tcp_in_window` of tcp_minisocks.c (TIME-WAIT's and a request's window test).
pub(super) fn in_window(seq: Seq, end_seq: Seq, s_win: Seq, e_win: Seq) -> bool {
    if seq == s_win {
        return true;
    }
    if end_seq.after(s_win) && seq.before(e_win) {
        return true;
    }
    seq == e_win && seq == end_seq
}

/// `tcp_paws_reject` with `tcp_paws_check`'s window 0, for a `ts_recent` last set
/// `age_secs` ago: a timestamp older than `ts_recent` is rejected, unless
/// `ts_recent` is 0 (none seen) or `TCP_PAWS_WRAP` old; a reset passes once it is
/// `TCP_PAWS_MSL` old.
pub(super) fn paws_reject(ts_recent: u32, tsval: u32, rst: bool, age_secs: u64) -> bool {
    let ok = (ts_recent.wrapping_sub(tsval) as i32) <= 0
        || age_secs >= TCP_PAWS_WRAP_SECS
        || ts_recent == 0;
    if ok {
        return false;
    }
    !(rst && age_secs >= TCP_PAWS_MSL_SECS)
}

/// Whole seconds of the stack's clock (`ktime_get_seconds`).
fn secs(t: Instant) -> u64 {
    t.as_nanos() / 1_000_000_000
}

/// `tw_kill`: a TIME-WAIT socket scheduled for at most 4 s counts as killed
/// (TcpExtTWKilled), else as timed (TcpExtTW) (`__inet_twsk_schedule`).
fn schedule_mib(timeo: Duration) -> Mib {
    match timeo <= Duration::from_secs(4) {
        true => Mib::TcpExtTWKilled,
        false => Mib::TcpExtTW,
    }
}

impl TimeWaitSock {
    /// `inet_twsk_schedule`: the first arming of `tw_timer`, counted.
    pub fn schedule(&mut self, ctx: &mut Ctx, timeo: Duration) {
        ctx.mib.inc(schedule_mib(timeo));
        self.expires = ctx.now + timeo;
        self.runs = crate::time::timer_list_runs(ctx.now, self.expires);
    }

    /// `inet_twsk_reschedule`: the timer again from now, not counted.
    fn reschedule(&mut self, now: Instant, timeo: Duration) {
        self.expires = now + timeo;
        self.runs = crate::time::timer_list_runs(now, self.expires);
    }

    /// `tcp_paws_reject` against `ts_recent` (`tcp_paws_check` with window 0; a
    /// reset is let through once `ts_recent` is `TCP_PAWS_MSL` old).
    fn paws_reject(&self, now: Instant, stamp: Instant, tsval: u32, rst: bool) -> bool {
        let age = secs(now).saturating_sub(secs(stamp));
        paws_reject(self.ts_recent, tsval, rst, age)
    }

    /// `tcp_timewait_check_oow_rate_limit`: an ACK unless one went within
    /// `tcp_invalid_ratelimit` (`tcp_oow_rate_limited`: data without SYN is never
    /// limited).
    fn oow_ack(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize, mib: Mib) -> TwStatus {
        let syn = th.flags.contains(TcpFlags::SYN);
        let data = len > 0 || th.flags.contains(TcpFlags::FIN);
        if (data && !syn) || !super::ratelimit::oow_limited(ctx, mib, &mut self.last_oow_ack_time) {
            return TwStatus::AckOow;
        }
        TwStatus::Success
    }

    /// `tcp_timewait_state_process`: a segment for this socket; `len` is its
    /// payload.
    pub fn state_process(&mut self, ctx: &mut Ctx, th: &TcpRepr, len: usize) -> TwStatus {
        let f = th.flags;
        let (rst, syn, ack, fin) = (
            f.contains(TcpFlags::RST),
            f.contains(TcpFlags::SYN),
            f.contains(TcpFlags::ACK),
            f.contains(TcpFlags::FIN),
        );
        let seq = Seq(th.seq);
        let end_seq = seq + (len as u32 + syn as u32 + fin as u32);
        // tcp_parse_options(estab = 0): the timestamp counts if tcp_timestamps is
        // on, and only when this connection used timestamps.
        let mut saw_tstamp = None;
        let mut paws_reject = false;
        if let (Some(stamp), Some((tsval, _)), true) = (
            self.ts_recent_stamp,
            th.options.timestamp,
            ctx.cfg.tcp_timestamps,
        ) {
            saw_tstamp = Some(tsval);
            paws_reject = self.paws_reject(ctx.now, stamp, tsval, rst);
        }

        if self.substate == TcpState::FinWait2 {
            // "Just repeat all the checks of tcp_rcv_state_process()".
            let e_win = self.rcv_nxt + self.rcv_wnd;
            if paws_reject || !in_window(seq, end_seq, self.rcv_nxt, e_win) {
                return self.oow_ack(ctx, th, len, Mib::TcpExtTCPACKSkippedFinWait2);
            }
            if rst {
                return TwStatus::Kill;
            }
            if syn && !seq.before(self.rcv_nxt) {
                return TwStatus::Rst;
            }
            // A duplicate ACK.
            if !ack || !end_seq.after(self.rcv_nxt) || end_seq == seq {
                return TwStatus::Success;
            }
            // New data or FIN: new data after the half-duplex close is reset.
            if !fin || end_seq != self.rcv_nxt + 1 {
                return TwStatus::Rst;
            }
            // The FIN: true TIME-WAIT.
            self.substate = TcpState::TimeWait;
            self.rcv_nxt = end_seq;
            if let Some(v) = saw_tstamp {
                // tw_entry_stamp too: tcp_tw_reuse_delay counts from the FIN.
                self.entry = ctx.now;
                self.ts_recent_stamp = Some(ctx.now);
                self.ts_recent = v;
            }
            self.reschedule(ctx.now, TCP_TIMEWAIT_LEN);
            return TwStatus::Ack;
        }

        // Real TIME-WAIT. In window, it may only be a reset or a bare ACK.
        if !paws_reject && seq == self.rcv_nxt && (seq == end_seq || rst) {
            if rst {
                // TIME-WAIT assassination (RFC 1337): obeyed unless tcp_rfc1337.
                if ctx.cfg.tcp_rfc1337 == 0 {
                    return TwStatus::Kill;
                }
            } else {
                self.reschedule(ctx.now, TCP_TIMEWAIT_LEN);
            }
            if let Some(v) = saw_tstamp {
                self.ts_recent = v;
                self.ts_recent_stamp = Some(ctx.now);
            }
            return TwStatus::Success;
        }

        // Out of window: ACKed, except a new SYN (RFC 1122 section 4.2.2.13) that is
        // no old duplicate: after rcv_nxt, or with a newer timestamp.
        let newer_ts = saw_tstamp.is_some_and(|v| (self.ts_recent.wrapping_sub(v) as i32) < 0);
        if syn && !rst && !ack && !paws_reject && (seq.after(self.rcv_nxt) || newer_ts) {
            return TwStatus::Syn(self.reuse_isn());
        }
        if paws_reject {
            ctx.mib.inc(Mib::TcpExtPAWSTimewait);
        }
        if rst {
            return TwStatus::Success;
        }
        // An ACK-less SYN may be an old duplicate or a new SYN below rcv_nxt: it
        // does not extend TIME-WAIT.
        if paws_reject || ack {
            self.reschedule(ctx.now, TCP_TIMEWAIT_LEN);
        }
        self.oow_ack(ctx, th, len, Mib::TcpExtTCPACKSkippedTimeWait)
    }

    /// The ISN of a connection that takes over this 4-tuple: above anything this
    /// one sent (`tw_snd_nxt + 65535 + 2`, never 0).
    pub fn reuse_isn(&self) -> u32 {
        match self.snd_nxt.0.wrapping_add(65535 + 2) {
            0 => 1,
            isn => isn,
        }
    }

    /// `tcp_twsk_unique`: may a `connect` take this 4-tuple over? Only with
    /// timestamps seen, and, when the kernel picks the port (`from_search`: its
    /// `twp`), only with `net.ipv4.tcp_tw_reuse` (2: loopback addresses only; never
    /// in FIN-WAIT-2) after `tcp_tw_reuse_delay`.
    pub fn unique(&self, cfg: &Config, now: Instant, from_search: bool) -> bool {
        let mut reuse = cfg.tcp_tw_reuse;
        if self.substate == TcpState::FinWait2 {
            reuse = 0;
        }
        if reuse == 2 {
            let lo = |a: std::net::IpAddr| match a {
                std::net::IpAddr::V4(v4) => v4.is_loopback(),
                std::net::IpAddr::V6(v6) => {
                    v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
                }
            };
            if !lo(self.tuple.remote.ip()) && !lo(self.tuple.local.ip()) {
                reuse = 0;
            }
        }
        let thresh = self.entry + Duration::from_millis(cfg.tcp_tw_reuse_delay as u64);
        self.ts_recent_stamp.is_some() && (!from_search || (reuse != 0 && now > thresh))
    }

    /// `tcp_v4_timewait_ack` / `tcp_v6_timewait_ack`: a bare ACK with the window
    /// left, and timestamps when there is a `ts_recent` to echo; `tw_tos` less its
    /// ECN bits for an out-of-window one (`oow`: `TCP_TW_ACK_OOW`, Linux 6.15+, so
    /// that only acceptable ACKs stay in the connection's ECN service queue).
    pub fn send_ack(&self, ctx: &mut Ctx, oow: bool) {
        let ts = (self.ts_recent != 0).then(|| {
            let tsval = (ctx.now.as_millis() as u32).wrapping_add(self.ts_offset);
            (tsval, self.ts_recent)
        });
        let window = (self.rcv_wnd >> self.rcv_wscale).min(65535) as u16;
        let fields = (self.snd_nxt.0, self.rcv_nxt.0, window);
        let key = self.md5_key.as_ref();
        let tos = match oow {
            true => self.tos & !super::ecn::INET_ECN_MASK,
            false => self.tos,
        };
        super::reply::send_reply_ack(ctx, (self.tuple, tos, true, self.flow()), fields, ts, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{FourTuple, TestStack};
    use lowtide_wire::tcp::TcpOptions;

    fn tw(substate: TcpState) -> TimeWaitSock {
        TimeWaitSock {
            tuple: FourTuple {
                local: "10.0.0.1:80".parse().unwrap(),
                remote: "10.0.0.2:4000".parse().unwrap(),
            },
            substate,
            rcv_nxt: Seq(1000),
            snd_nxt: Seq(5000),
            rcv_wnd: 65535,
            rcv_wscale: 0,
            ts_recent: 100,
            ts_recent_stamp: Some(Instant::ZERO),
            ts_offset: 0,
            tx_delay: 0,
            txhash: 0,
            flowlabel: 0,
            tos: 0,
            last_oow_ack_time: None,
            entry: Instant::ZERO,
            expires: Instant::ZERO + TCP_TIMEWAIT_LEN,
            runs: Instant::ZERO + TCP_TIMEWAIT_LEN,
            family_v6: false,
            bind: Default::default(),
            md5_key: None,
        }
    }

    fn seg(seq: u32, flags: TcpFlags, tsval: Option<u32>) -> TcpRepr {
        TcpRepr {
            seq,
            ack: 5000,
            flags,
            options: TcpOptions {
                timestamp: tsval.map(|v| (v, 0)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        }
    }

    #[test]
    fn fin_wait2_takes_the_fin_and_resets_new_data() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let now = Instant::ZERO + Duration::from_secs(1);
        let mut ctx = st.ctx(&cfg, now, false);
        let mut t = tw(TcpState::FinWait2);
        let data = seg(1000, TcpFlags::ACK, Some(101));
        assert_eq!(t.state_process(&mut ctx, &data, 10), TwStatus::Rst);
        let dup = seg(1000, TcpFlags::ACK, Some(101));
        assert_eq!(t.state_process(&mut ctx, &dup, 0), TwStatus::Success);
        let syn = seg(1000, TcpFlags::SYN, Some(101));
        assert_eq!(t.state_process(&mut ctx, &syn, 0), TwStatus::Rst);
        let fin = seg(1000, TcpFlags::ACK | TcpFlags::FIN, Some(102));
        assert_eq!(t.state_process(&mut ctx, &fin, 0), TwStatus::Ack);
        assert_eq!(t.substate, TcpState::TimeWait);
        assert_eq!(t.rcv_nxt, Seq(1001));
        assert_eq!(t.ts_recent, 102);
        assert_eq!(
            t.entry, now,
            "tw_entry_stamp again, with the FIN's timestamp"
        );
        assert_eq!(t.expires, now + TCP_TIMEWAIT_LEN);
        // A reset beyond the window is answered with an ACK; one in it kills.
        let rst = seg(1000 + 70_000, TcpFlags::RST, None);
        let mut t2 = tw(TcpState::FinWait2);
        assert_eq!(t2.state_process(&mut ctx, &rst, 0), TwStatus::AckOow);
        let rst = seg(1001, TcpFlags::RST, None);
        assert_eq!(t2.state_process(&mut ctx, &rst, 0), TwStatus::Kill);
    }

    #[test]
    fn time_wait_reacks_fin_and_obeys_rfc1337() {
        let mut cfg = Config::default();
        let mut st = TestStack::default();
        let now = Instant::ZERO + Duration::from_secs(5);
        let mut t = tw(TcpState::TimeWait);
        let mut ctx = st.ctx(&cfg, now, false);
        let fin = seg(999, TcpFlags::ACK | TcpFlags::FIN, Some(101));
        assert_eq!(t.state_process(&mut ctx, &fin, 0), TwStatus::AckOow);
        assert_eq!(t.expires, now + TCP_TIMEWAIT_LEN);
        // A second one within tcp_invalid_ratelimit is a FIN (data): not limited.
        assert_eq!(t.state_process(&mut ctx, &fin, 0), TwStatus::AckOow);
        let old_ack = seg(900, TcpFlags::ACK, Some(101));
        assert_eq!(t.state_process(&mut ctx, &old_ack, 0), TwStatus::AckOow);
        assert_eq!(t.state_process(&mut ctx, &old_ack, 0), TwStatus::Success);
        assert_eq!(st.mib.get(Mib::TcpExtTCPACKSkippedTimeWait), 1);
        let rst = seg(1000, TcpFlags::RST, None);
        cfg.tcp_rfc1337 = 1;
        let mut ctx = st.ctx(&cfg, now, false);
        assert_eq!(t.state_process(&mut ctx, &rst, 0), TwStatus::Success);
        cfg.tcp_rfc1337 = 0;
        let mut ctx = st.ctx(&cfg, now, false);
        assert_eq!(t.state_process(&mut ctx, &rst, 0), TwStatus::Kill);
    }

    #[test]
    fn time_wait_syn_needs_a_higher_seq_or_newer_timestamp() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let now = Instant::ZERO + Duration::from_secs(5);
        let mut ctx = st.ctx(&cfg, now, false);
        let mut t = tw(TcpState::TimeWait);
        let isn = 5000 + 65535 + 2;
        let higher = seg(2000, TcpFlags::SYN, None);
        assert_eq!(t.state_process(&mut ctx, &higher, 0), TwStatus::Syn(isn));
        let newer_ts = seg(10, TcpFlags::SYN, Some(200));
        assert_eq!(t.state_process(&mut ctx, &newer_ts, 0), TwStatus::Syn(isn));
        // Lower sequence and the same timestamp: an old duplicate, ACKed; PAWS
        // rejects an older one (TcpExtPAWSTimewait).
        let same = seg(10, TcpFlags::SYN, Some(100));
        assert_eq!(t.state_process(&mut ctx, &same, 0), TwStatus::AckOow);
        let older = seg(2000, TcpFlags::SYN, Some(50));
        let mut ctx = st.ctx(&cfg, now + Duration::from_secs(1), false);
        assert_eq!(t.state_process(&mut ctx, &older, 0), TwStatus::AckOow);
        assert_eq!(st.mib.get(Mib::TcpExtPAWSTimewait), 1);
    }

    #[test]
    fn reuse_needs_timestamps_and_for_a_search_the_sysctl() {
        let mut cfg = Config::default();
        let mut t = tw(TcpState::TimeWait);
        let later = Instant::ZERO + Duration::from_secs(2);
        // Default 2: loopback only.
        assert!(!t.unique(&cfg, later, true));
        assert!(t.unique(&cfg, later, false), "a bound port needs no sysctl");
        cfg.tcp_tw_reuse = 1;
        assert!(t.unique(&cfg, later, true));
        assert!(!t.unique(&cfg, Instant::ZERO + Duration::from_millis(1000), true));
        t.substate = TcpState::FinWait2;
        assert!(!t.unique(&cfg, later, true));
        t.substate = TcpState::TimeWait;
        t.ts_recent_stamp = None;
        assert!(!t.unique(&cfg, later, false));
        let mut lo = tw(TcpState::TimeWait);
        lo.tuple.remote = "127.0.0.1:4000".parse().unwrap();
        cfg.tcp_tw_reuse = 2;
        assert!(lo.unique(&cfg, later, true));
    }

    #[test]
    fn isn_skips_zero() {
        let mut t = tw(TcpState::TimeWait);
        t.snd_nxt = Seq(0u32.wrapping_sub(65537));
        assert_eq!(t.reuse_isn(), 1);
    }
}
