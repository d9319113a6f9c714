//! What an ICMP or ICMPv6 error does to a connection, once the stack has found it
//! and checked that the quoted sequence number is in flight (`stack/icmp.rs`): the
//! end of `tcp_v4_err` / `tcp_v6_err`. In SYN-SENT, or in SYN-RECV of a
//! simultaneous open or of a Fast Open child not yet accepted, the error fails the
//! connection (`tcp_done_with_error`), and goes on the error queue as a
//! `sock_extended_err` (`ip_icmp_error`, whatever `IP_RECVERR` says;
//! `ipv6_icmp_error` only with `IPV6_RECVERR`); on a synchronized connection it is
//! a hard error with `IP_RECVERR`/`IPV6_RECVERR` (`sk_err`: the next read or write
//! fails with it, once), else a soft one, reported only if the connection times
//! out. An unreachable may first undo
//! one RTO backoff (TCP-LD, [RFC 6069](https://www.rfc-editor.org/rfc/rfc6069),
//! `tcp_ld_RTO_revert`).

use super::consts::TCP_TIMEOUT_INIT;
use super::errqueue::{ErrEntry, SockExtendedErr, SO_EE_ORIGIN_ICMP, SO_EE_ORIGIN_ICMP6};
use super::sock::{Pending, Tcb};
use super::{Ctx, TcpState};
use crate::socket::{EventKind, SocketError};
use core::time::Duration;
use std::net::IpAddr;

/// The ICMP message an error came in, as `ip_icmp_error`/`ipv6_icmp_error` keep
/// it on the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IcmpReport {
    /// `ee_type`, `ee_code`.
    pub kind: u8,
    pub code: u8,
    /// `ee_info`: what `icmp_unreach` passes (a parameter problem's pointer, else
    /// 0), or the ICMPv6 header's second word.
    pub info: u32,
    /// The message's sender (the offender address).
    pub offender: IpAddr,
    /// The quoted bytes from the TCP header on (the entry's `skb->len`).
    pub len: u32,
}

impl Tcb {
    /// `tcp_v4_err` / `tcp_v6_err` after the type switch: `err` about the segment
    /// at wire sequence `seq`. `revert`: the message may undo an RTO backoff
    /// (`ICMP_NET_UNREACH`/`ICMP_HOST_UNREACH`, `ICMPV6_NOROUTE`), never for a
    /// Fast Open child; IPv4 tries it whatever the state, IPv6 only once
    /// synchronized.
    pub(crate) fn icmp_error(
        &mut self,
        ctx: &mut Ctx,
        err: SocketError,
        seq: u32,
        revert: bool,
        report: &IcmpReport,
    ) {
        let fastopen = self.tfo.rsk.is_some();
        // "Only in fast or simultaneous open. If a fast open socket is already
        // accepted it is treated as a connected one below."
        let connecting = match self.state {
            TcpState::SynSent => true,
            TcpState::SynRecv => !(fastopen && self.parent.is_none()),
            _ => false,
        };
        if revert && !fastopen && (self.tuple.remote.is_ipv4() || !connecting) {
            self.ld_rto_revert(ctx, seq);
        }
        let v6 = self.tuple.remote.is_ipv6();
        let recverr = match v6 {
            false => self.recverr.0,
            true => self.recverr.1,
        };
        if connecting {
            // ip_icmp_error checks no IP_RECVERR (45af29ca761c, "tcp: allow
            // traceroute -Mtcp for unpriv users"); ipv6_icmp_error wants its own.
            if !v6 || recverr {
                self.icmp_errqueue(ctx, err, report);
            }
            self.done_with_error(ctx, err);
        } else if recverr {
            // sk_err and sk_error_report: the connection goes on.
            self.sk_err = Some(err);
            self.notify(ctx, EventKind::Error(err));
        } else {
            self.sk_err_soft = Some(err); // "only an error on timeout"
        }
    }

    /// `ip_icmp_error`/`ipv6_icmp_error`: the error on the error queue
    /// (`sock_queue_err_skb`, within `sk_rcvbuf`).
    fn icmp_errqueue(&mut self, ctx: &mut Ctx, err: SocketError, r: &IcmpReport) {
        let origin = match self.tuple.remote.is_ipv6() {
            false => SO_EE_ORIGIN_ICMP,
            true => SO_EE_ORIGIN_ICMP6,
        };
        let entry = ErrEntry {
            ee: SockExtendedErr {
                errno: err.errno() as u32,
                origin,
                kind: r.kind,
                code: r.code,
                info: r.info,
                data: 0,
            },
            tstamp: Some(ctx.now),
            len: r.len,
            offender: Some(r.offender),
            opt_stats: None,
        };
        if self.errq.queue_report(entry, self.rcvbuf) {
            self.notify(ctx, EventKind::ErrQueue);
        }
    }

    /// `tcp_ld_RTO_revert`: an unreachable about the head of a backed-off
    /// retransmission blames the path, not congestion: one backoff step is undone
    /// (the RTO from the estimator, `TCP_TIMEOUT_INIT` without a sample) and the
    /// timer rearmed from the head's last transmission; if that time is past, the
    /// retransmission timer fires now.
    fn ld_rto_revert(&mut self, ctx: &mut Ctx, seq: u32) {
        let una = self.snd_seq(self.snd_una).0;
        if seq != una || self.icsk.retransmits == 0 || self.icsk.backoff == 0 {
            return;
        }
        let Some(sent) = self.rtx.first().map(|h| h.tx_time) else {
            return;
        };
        self.icsk.backoff -= 1;
        self.icsk.rto = match self.rtt.srtt_us {
            0 => TCP_TIMEOUT_INIT,
            _ => self.rto_from_estimator(),
        };
        self.icsk.rto = self.rto_backoff(self.icsk.rto_max);
        // remaining = icsk_rto - usecs_to_jiffies(delta_us), in jiffies (HZ 1000).
        let rto_ms = self.rto_backed_off().as_millis() as i64;
        let delta_ms = ctx.now.saturating_since(sent).as_micros().div_ceil(1000) as i64;
        let remaining = rto_ms - delta_ms;
        if remaining > 0 {
            let at = ctx.now + Duration::from_millis(remaining as u64);
            self.icsk.pending = Some((Pending::Retrans, at));
        } else {
            // "RTO revert clocked out retransmission. Will retransmit now." (with
            // icsk_timeout still the armed RTO's).
            let expires = self.icsk.pending.take().map_or(ctx.now, |p| p.1);
            self.retransmit_timer(ctx, expires);
        }
    }
}
