//! What an ICMP or ICMPv6 error does to a connection, once the stack has found it
//! and checked that the quoted sequence number is in flight (`stack/icmp.rs`): the
//! end of `tcp_v4_err` / `tcp_v6_err`. In SYN-SENT, or in SYN-RECV of a
//! simultaneous open or of a Fast Open child not yet accepted, the error fails the
//! connection (`tcp_done_with_error`); on a synchronized connection it is a soft
//! error, reported only if the connection times out. An unreachable may first undo
//! one RTO backoff (TCP-LD, [RFC 6069](https://www.rfc-editor.org/rfc/rfc6069),
//! `tcp_ld_RTO_revert`).

use super::consts::TCP_TIMEOUT_INIT;
use super::sock::{Pending, Tcb};
use super::{Ctx, TcpState};
use crate::mib::Mib;
use crate::socket::SocketError;
use core::time::Duration;

impl Tcb {
    /// `tcp_v4_err` / `tcp_v6_err` after the type switch: `err` about the segment
    /// at wire sequence `seq`. `revert`: the message may undo an RTO backoff
    /// (`ICMP_NET_UNREACH`/`ICMP_HOST_UNREACH`, `ICMPV6_NOROUTE`), never for a
    /// Fast Open child; IPv4 tries it whatever the state, IPv6 only once
    /// synchronized.
    pub(crate) fn icmp_error(&mut self, ctx: &mut Ctx, err: SocketError, seq: u32, revert: bool) {
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
        if connecting {
            ctx.mib.inc(Mib::TcpAttemptFails);
            self.set_error(ctx, err);
        } else {
            self.sk_err_soft = Some(err); // "only an error on timeout"
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
            // "RTO revert clocked out retransmission. Will retransmit now."
            self.icsk.pending = None;
            self.retransmit_timer(ctx);
        }
    }
}
