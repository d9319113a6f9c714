//! TCP Fast Open on a connection (tcp_fastopen.c, tcp_minisocks.c `tcp_check_req`,
//! tcp_input.c, tcp_timer.c): a passive child created at the SYN, its handshake and
//! SYN-ACK timer.

use super::consts::TCP_TIMEOUT_INIT;
use super::rcvqueue::Payload;
use super::sock::{Pending, Tcb};
use super::{Ctx, TcpState};
use crate::mib::Mib;
use lowtide_wire::tcp::TcpRepr;

impl Tcb {
    /// `tcp_passive_fastopen`: a Fast Open child still in its handshake, which may
    /// already send and receive.
    pub(crate) fn passive_fastopen(&self) -> bool {
        self.state == TcpState::SynRecv && self.tfo.rsk.is_some()
    }

    /// `tcp_fastopen_create_child` after `syn_recv_sock`: the child starts its
    /// transfer now (`tcp_init_transfer`), takes the SYN's data
    /// (`tcp_fastopen_add_skb`) and goes to the accept queue at once.
    pub(crate) fn fastopen_create_child(&mut self, ctx: &mut Ctx, syn_data: &[u8]) {
        self.syn_recv_sock_tos(ctx.cfg); // tcp_fastopen_create_child's syn_recv_sock
        self.init_buffer_space(ctx);
        // tcp_create_openreq_child: the child starts with snd_una = ISN + 1; its
        // SYN-ACK belongs to the request, not to its send window.
        self.snd_una = 1;
        // tcp_create_openreq_child: segs_in starts at 1, the SYN; a SYN with data
        // counts once (tcp_fastopen_add_skb resets it to 0 before tcp_segs_in),
        // in data_segs_in too.
        self.segs_in = 1;
        if !syn_data.is_empty() {
            self.data_segs_in = 1;
            self.queue_in_order(ctx, Payload::Flat(syn_data));
            self.bytes_received = syn_data.len() as u64;
            self.tfo.syn_data_acked = true;
        }
        self.rcv_wup = self.rcv_nxt;
        self.accepted_ready = true;
        // tcp_create_openreq_child: the keepalive timer of a child that inherited
        // SO_KEEPALIVE runs from now, in SYN-RECV too (tcp_keepalive_timer).
        self.keepalive_on_establish(ctx);
    }

    /// `reqsk_fastopen_remove` (the child's side): the child leaves the listener's
    /// Fast Open queue; the stack settles the queue (`Stack::fastopen_released`).
    pub(crate) fn fastopen_remove(&mut self, reset: bool) {
        if let Some(l) = self.tfo.rsk.take() {
            self.tfo.released = Some((l, reset));
        }
    }

    /// `tcp_rcv_synrecv_state_fastopen`: the handshake of a Fast Open child is
    /// done: the SYN-ACK timer's count and stamp reset, the child leaves the Fast
    /// Open queue, and the RTO is armed for data it may have sent.
    pub(crate) fn fastopen_synrecv_done(&mut self, ctx: &mut Ctx, th: &TcpRepr) {
        // Still in the SYN-ACK timeout's Loss with nothing in flight: tcp_ack had
        // nothing to undo with, so undo here if the timestamps show it spurious. If
        // the peer's SACKs started a fast recovery, no undo mixes the two.
        if self.ca_state == super::cong::CaState::Loss && self.rtx.packets_out == 0 {
            self.note_tsecr(th);
            self.try_undo_recovery(ctx);
        }
        self.icsk.retransmits = 0;
        self.icsk.backoff = 0;
        // tcp_retrans_stamp_cleanup: a first SYN-ACK timeout set retrans_stamp
        // without entering Loss; a recovery the ACK started keeps its own.
        if !self.any_retrans_done() {
            self.undo.retrans_stamp = None;
        }
        self.fastopen_remove(false);
        self.establish_rcv_mss();
        self.rearm_rto(ctx);
    }

    /// `tcp_fastopen_synack_timer`: the retransmit timer of a Fast Open child
    /// before its handshake completes resends only the SYN-ACK, `TCP_SYNCNT` times
    /// (inherited from the listener), else one more time than `tcp_synack_retries`
    /// allows a request, backing off from `TCP_TIMEOUT_INIT`. Every expiry counts
    /// as a timeout (`tcp_syn_ack_timeout`: TcpExtTCPTimeouts), the last one too,
    /// and each resend as an RTO (`tcp_update_rto_stats`).
    pub(crate) fn fastopen_synack_timer(&mut self, ctx: &mut Ctx) {
        ctx.mib.inc(Mib::TcpExtTCPTimeouts);
        let max_retries = match self.icsk.syn_retries {
            0 => ctx.cfg.tcp_synack_retries.saturating_add(1),
            n => n,
        };
        if self.icsk.retransmits >= max_retries {
            return self.write_err(ctx);
        }
        if self.icsk.retransmits == 1 {
            self.enter_loss(ctx);
        }
        self.rtx_synack_rehash(ctx); // tcp_rtx_synack
        self.retransmit_syn(ctx);
        self.update_rto_stats(ctx.now);
        self.undo.retrans_stamp.get_or_insert(ctx.now);
        let shift = (self.icsk.retransmits as u32).min(16);
        let when = (TCP_TIMEOUT_INIT * (1u32 << shift)).min(self.icsk.rto_max);
        self.icsk.pending = Some((Pending::Retrans, ctx.now + when));
    }
}
