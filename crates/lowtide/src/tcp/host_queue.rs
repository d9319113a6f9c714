//! A packet still in the host's own queue is not sent again (tcp_output.c
//! `skb_still_in_host_queue`, since Linux 3.16's "tcp: avoid retransmits of TCP
//! packets hanging in host queues"; plugged into TSQ by 5.13's f4dae54e486d).
//!
//! Every skb of the write and retransmit queues is allocated with a fast clone
//! (`tcp_stream_alloc_skb(..., true)`), and `tcp_transmit_skb` hands that clone to
//! the device. While the device (qdisc or driver) still holds it, `skb_fclone_busy`
//! is true: a retransmission of the skb would only queue behind its original, so
//! `__tcp_retransmit_skb` and `tcp_send_loss_probe` give up (`-EBUSY`), counting
//! `TcpExtTCPSpuriousRtxHostQueues`, and set `TSQ_THROTTLED` so that the clone's TX
//! completion (`tcp_wfree` -> `tcp_tsq_write`) runs the retransmit queue again.
//! lowtide's clone is the [`Transmit`](crate::Transmit) its TX token names: the skb
//! records the clone's id ([`Skb::fclone`](super::rtx::skb::Skb::fclone)) from the
//! transmission to its completion (or the queue's drop). A device that orphans its
//! packets (tun, [`Stack::set_tx_orphan`](crate::Stack::set_tx_orphan)) clears the
//! clone's owner at once (`skb_orphan`: `skb2.sk != sk`), so its skbs are never busy.

use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;
use crate::socket::TxToken;

impl Tcb {
    /// The retransmit queue's skb at `seq` has just been handed to the device
    /// (`tcp_transmit_skb`'s `skb_clone`): if its fast clone was free, that clone
    /// carries this packet, busy until the packet's TX completion; if it was busy,
    /// Linux clones into a new buffer, which no one watches. An orphaning device
    /// leaves it free.
    pub(crate) fn fclone_sent(&mut self, ctx: &mut Ctx, seq: u64) {
        if ctx.tx_orphan || self.rtx.fclone(seq) != 0 {
            return;
        }
        let Some(token) = self.tx_token_mut(ctx, seq) else {
            return;
        };
        self.fclone_next = self.fclone_next.wrapping_add(1).max(1);
        token.fclone = self.fclone_next;
        self.rtx.set_fclone(seq, self.fclone_next);
    }

    /// The device freed the packet of `token` (sent or dropped it): its skb's fast
    /// clone, if it was one, is free again.
    pub(crate) fn fclone_freed(&mut self, token: &TxToken) {
        if token.fclone != 0 {
            self.rtx.fclone_freed(token.seq, token.fclone);
        }
    }

    /// `skb_still_in_host_queue`: the skb at `seq` was sent and its fast clone is
    /// still in the host's qdisc or driver (`skb_fclone_busy`). Then
    /// `TSQ_THROTTLED` is set, so that the clone's completion sends again
    /// (`tcp_tsq_write`: the retransmit queue, then new data), and
    /// `TcpExtTCPSpuriousRtxHostQueues` counts the retransmission not made.
    pub(crate) fn still_in_host_queue(&mut self, ctx: &mut Ctx, seq: u64) -> bool {
        if self.rtx.fclone(seq) == 0 {
            return false;
        }
        self.pace.tsq_throttled = true;
        ctx.mib.inc(Mib::TcpExtTCPSpuriousRtxHostQueues);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::socket::SendFlags;
    use crate::tcp::rtx::skb::{Skb, LOST, SACKED_RETRANS};
    use crate::tcp::sock::Pending;
    use crate::tcp::{TcpState, TestStack};
    use crate::time::Instant;

    const NOW: Instant = Instant(1_000_000_000);

    /// Established with SACK, MSS 1000, cwnd 10, a wide window, a known RTT, and
    /// `bytes` written and sent (their packets still in `st.out`: the device holds
    /// them, none completed).
    fn sent(cfg: &Config, st: &mut TestStack, bytes: usize) -> Tcb {
        sent_through(cfg, st, bytes, false)
    }

    /// [`sent`] through a device that orphans its packets (`tx_orphan`) or not.
    fn sent_through(cfg: &Config, st: &mut TestStack, bytes: usize, orphan: bool) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.state = TcpState::Established;
        t.rx_opt.sack_ok = true;
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1, 1);
        (t.max_window, t.snd_wnd, t.sndbuf) = (1 << 20, 1 << 20, 1 << 20);
        t.cw.snd_cwnd = 10;
        t.rtt.srtt_us = 10_000 << 3;
        let data = vec![7u8; bytes];
        let n = t.sendmsg(
            &mut st.ctx(cfg, NOW, orphan),
            &data,
            &[],
            SendFlags::default(),
        );
        assert_eq!(n, Ok(bytes));
        assert_eq!(t.snd_nxt, 1 + bytes as u64, "all sent");
        t
    }

    /// The device completes every packet it holds.
    fn complete_all(t: &mut Tcb, st: &mut TestStack, cfg: &Config, now: Instant) {
        let tokens: Vec<TxToken> = st.out.drain(..).map(|tx| tx.token).collect();
        for token in tokens {
            t.on_tx_complete(&mut st.ctx(cfg, now, false), &token);
        }
    }

    /// `__tcp_retransmit_skb`: -EBUSY while the skb's fast clone is in the device,
    /// counted, with `TSQ_THROTTLED` set; its completion frees the clone and runs
    /// the retransmit queue (`tcp_tsq_write`), which sends the lost skb then.
    #[test]
    fn a_retransmission_waits_for_the_completion_of_the_original() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = sent(&cfg, &mut st, 1000);
        let id = st.out[0].token.fclone;
        assert_ne!(id, 0, "the packet is the skb's fast clone");
        assert_eq!(t.rtx.fclone(1), id);
        let packets = st.out.len();
        let later = NOW + core::time::Duration::from_millis(300);
        assert_eq!(
            t.retransmit_skb(&mut st.ctx(&cfg, later, false), 1, 1),
            None
        );
        assert_eq!(st.out.len(), packets, "nothing sent");
        assert_eq!(st.mib.get(Mib::TcpExtTCPSpuriousRtxHostQueues), 1);
        assert_eq!(st.mib.get(Mib::TcpRetransSegs), 0);
        assert!(t.pace.tsq_throttled);
        assert!(!t.rtx.first().expect("queued").has(SACKED_RETRANS));
        // Lost meanwhile (an RTO's tcp_enter_loss): the completion sends it.
        t.rtx.update(1, LOST, 0);
        complete_all(&mut t, &mut st, &cfg, later);
        assert_eq!(st.out.len(), 1, "retransmitted on the completion");
        assert_eq!(st.out[0].token.seq, 1);
        assert!(t.rtx.first().expect("queued").has(SACKED_RETRANS));
        assert_eq!(st.mib.get(Mib::TcpRetransSegs), 1);
        // The clone was freed; the retransmission is the one in the device now.
        let again = st.out[0].token.fclone;
        assert!(again != 0 && again != id);
        assert_eq!(t.rtx.fclone(1), again);
    }

    /// A device that orphans its packets (tun: `skb_orphan`, `skb2.sk` no longer
    /// the socket) never holds a clone back.
    #[test]
    fn an_orphaning_device_holds_no_clone() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = sent_through(&cfg, &mut st, 1000, true);
        assert_eq!(st.out[0].token.fclone, 0);
        assert!(t
            .retransmit_skb(&mut st.ctx(&cfg, NOW, true), 1, 1)
            .is_some());
        assert_eq!(st.mib.get(Mib::TcpExtTCPSpuriousRtxHostQueues), 0);
    }

    /// `tcp_send_loss_probe`: the last skb still in the host's queue gets no probe
    /// ("goto rearm_timer": no `TCPLossProbes`, no `tlp_high_seq`), not even its
    /// last segment split off; the RTO is rearmed. Once completed, it is probed.
    #[test]
    fn the_loss_probe_waits_for_the_last_skb_in_the_host_queue() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = sent(&cfg, &mut st, 3000);
        let skbs = t.rtx.len();
        let packets = st.out.len();
        let pto = NOW + core::time::Duration::from_millis(30);
        t.icsk.pending = Some((Pending::LossProbe, pto));
        t.send_loss_probe(&mut st.ctx(&cfg, pto, false));
        assert_eq!(st.out.len(), packets, "no probe");
        assert_eq!(t.rtx.len(), skbs, "nothing split off");
        assert_eq!(t.tlp_high_seq, None);
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 0);
        assert_eq!(st.mib.get(Mib::TcpExtTCPSpuriousRtxHostQueues), 1);
        assert!(matches!(t.icsk.pending, Some((Pending::Retrans, _))));
        complete_all(&mut t, &mut st, &cfg, pto);
        t.icsk.pending = Some((Pending::LossProbe, pto));
        t.send_loss_probe(&mut st.ctx(&cfg, pto, false));
        assert_eq!(st.mib.get(Mib::TcpExtTCPLossProbes), 1);
        assert_eq!(st.out.back().map(|tx| tx.token.seq), Some(2001));
    }

    /// `tcp_retransmit_timer`: the head still in the host's queue is not sent
    /// again (-EBUSY is not a local drop: the timeout still backs off).
    #[test]
    fn an_rto_does_not_duplicate_a_queued_head() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let mut t = sent(&cfg, &mut st, 2000);
        let packets = st.out.len();
        let rto = NOW + t.icsk.rto;
        t.icsk.pending = Some((Pending::Retrans, rto));
        let backoff = t.icsk.backoff;
        t.retransmit_timer(&mut st.ctx(&cfg, rto, false), rto);
        assert_eq!(st.out.len(), packets, "no retransmission");
        assert_eq!(st.mib.get(Mib::TcpExtTCPSpuriousRtxHostQueues), 1);
        assert_eq!(st.mib.get(Mib::TcpExtTCPTimeouts), 1);
        assert_eq!(t.icsk.backoff, backoff + 1);
        assert!(matches!(t.icsk.pending, Some((Pending::Retrans, _))));
        // The completions free the clones; the lost skbs go then.
        complete_all(&mut t, &mut st, &cfg, rto);
        assert_eq!(st.out.front().map(|tx| tx.token.seq), Some(1));
        assert_eq!(
            st.mib.get(Mib::TcpExtTCPSlowStartRetrans),
            st.out.len() as u64
        );
    }

    /// The fast clone follows the skb, not its bytes: a split's second part is a
    /// new skb with a free clone (`tcp_fragment`), a trimmed head keeps it
    /// (`tcp_trim_head`), and a busy skb joins no retransmission
    /// (`tcp_can_collapse`'s `skb_cloned`).
    #[test]
    fn the_clone_stays_with_its_skb() {
        let mut t = Tcb::for_test(&Config::default());
        t.rtx.push(Skb::sent_for_test(1, 3000, 3, NOW));
        t.rtx.push(Skb::sent_for_test(3001, 1000, 1, NOW));
        t.rtx.set_fclone(1, 7);
        t.rtx.split_at(2001, 1000);
        assert_eq!((t.rtx.fclone(1), t.rtx.fclone(2001)), (7, 0));
        t.rtx.trim_head(1, 1001);
        assert_eq!(t.rtx.fclone(1001), 7, "trimmed, the same skb");
        t.rtx.fclone_freed(1, 7);
        assert_eq!(t.rtx.fclone(1001), 0, "its completion still finds it");
        // A one-segment skb whose clone is busy does not join the one before.
        t.rtx.split_at(1501, 1000);
        t.rtx.set_fclone(1501, 9);
        assert_eq!(t.rtx.retrans_try_collapse(1001, 1000, 1 << 20), 0);
        t.rtx.fclone_freed(1501, 9);
        assert!(t.rtx.retrans_try_collapse(1001, 1000, 1 << 20) > 0);
        assert_eq!(t.rtx.first().map(|s| s.end_seq), Some(2001));
    }
}
