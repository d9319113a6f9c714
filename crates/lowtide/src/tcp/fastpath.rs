//! Header prediction, the fast path of `tcp_rcv_established` (Van Jacobson's, as
//! Linux keeps it): `pred_flags` arms it while nothing unusual is pending
//! (`tcp_fast_path_on`, `tcp_fast_path_check`), and a segment that matches it (only
//! ACK, PSH aside; the expected header length; the window unchanged; the next
//! sequence number; an ACK not beyond `snd_nxt`; an aligned timestamp that passes
//! PAWS) skips the slow path's checks. lowtide runs every segment through one path
//! that does what both do; what the prediction decides here is what Linux counts
//! (`TcpExtTCPHPHits`, `TcpExtTCPHPAcks`, `TcpExtTCPPureAcks`) and whether
//! `tcp_in_ack_event` says `CA_ACK_SLOWPATH`.

use super::sock::Tcb;
use super::{Ctx, TcpState};
use crate::mib::Mib;
use lowtide_wire::tcp::{TcpFlags, TcpRepr, TCP_HEADER_LEN};

/// `TCPOLEN_TSTAMP_ALIGNED`: NOP, NOP, then the 10-byte timestamp option.
const TCPOLEN_TSTAMP_ALIGNED: usize = 12;

impl Tcb {
    /// `tcp_fast_path_on`: predict segments carrying our current send window.
    pub(crate) fn fast_path_on(&mut self) {
        self.pred_wnd = Some((self.snd_wnd >> self.rx_opt.snd_wscale) as u16);
    }

    /// `tcp_fast_path_check`: arm the prediction if nothing needs the slow path:
    /// no out-of-order data, an open receive window, memory below the buffer, no
    /// urgent data.
    pub(crate) fn fast_path_check(&mut self) {
        if self.ofo.is_empty()
            && self.rcv_wnd != 0
            && self.rmem_alloc() < self.rcvbuf as u64
            && self.urg.data == 0
        {
            self.fast_path_on();
        }
    }

    /// `tp->pred_flags = 0`: every segment takes the slow path until re-armed.
    pub(crate) fn fast_path_off(&mut self) {
        self.pred_wnd = None;
    }

    /// `tcp_finish_connect`: the active opener predicts only an unscaled window
    /// (`__tcp_fast_path_on` with the SYN-ACK's); with window scaling the first
    /// `tcp_fast_path_check` arms it.
    pub(crate) fn fast_path_connected(&mut self) {
        self.pred_wnd = (self.rx_opt.snd_wscale == 0).then_some(self.snd_wnd as u16);
    }

    /// `tp->tcp_header_len`: the TCP header the prediction expects.
    fn predicted_header_len(&self) -> usize {
        TCP_HEADER_LEN
            + if self.rx_opt.tstamp_ok {
                TCPOLEN_TSTAMP_ALIGNED
            } else {
                0
            }
    }

    /// Whether `tcp_rcv_established` takes its fast path for this segment (`hdr_len`
    /// bytes of TCP header, `seq` and `ack` as offsets, `len` payload bytes): the
    /// `pred_flags` match, `tcp_parse_aligned_timestamp` with PAWS, and for data an
    /// skb that fits `sk_forward_alloc`. A header of exactly NOP, NOP and the
    /// timestamp is what "aligned" means; lowtide's parsed options do not keep
    /// the order, so any 12 bytes that hold only a timestamp pass.
    pub(crate) fn header_predicted(
        &self,
        ctx: &Ctx,
        th: &TcpRepr,
        (hdr_len, seq, ack, len): (usize, u64, u64, usize),
    ) -> bool {
        let Some(wnd) = self.pred_wnd else {
            return false;
        };
        // TCP_HP_BITS: every flag but PSH and the reserved bits must match; AE is a
        // flag since Linux 6.18 (TCP_RESERVED_BITS lost it to TCP_FLAG_AE).
        // `__tcp_fast_path_on` puts the ACE an AccECN connection expects into
        // pred_flags: `delivered_ce + 5` mod 8, no new CE mark (`tcp_accecn_process`
        // recomputes it when delivered_ce moves); any other ACE takes the slow path.
        let flags = th.flags.without(TcpFlags::PSH | TcpFlags::RES1);
        let ace = match self.ecn_mode_accecn() {
            true => super::ecn::ace_flags(
                (self.delivered_ce as u32).wrapping_add(super::ecn::TCP_ACCECN_CEP_INIT_OFFSET),
            ),
            false => TcpFlags(0),
        };
        if self.state != TcpState::Established
            || flags != TcpFlags::ACK | ace
            || th.window != wnd
            || hdr_len != self.predicted_header_len()
            || seq != self.rcv_nxt
            || ack > self.snd_nxt
        {
            return false;
        }
        if self.rx_opt.tstamp_ok {
            let o = &th.options;
            let Some((tsval, _)) = o.timestamp else {
                return false;
            };
            let only_ts = o.mss.is_none() && o.wscale.is_none() && !o.sack_permitted;
            // "If PAWS failed, check it more carefully in slow path".
            if !only_ts || o.sack_len > 0 || (tsval.wrapping_sub(self.rx_opt.ts_recent) as i32) < 0
            {
                return false;
            }
        }
        // Data: "(int)skb->truesize > sk->sk_forward_alloc" goes the slow way.
        len == 0 || self.rx_skb(ctx.cfg, len as u32).truesize as i64 <= self.forward_alloc()
    }

    /// `tcp_ack`'s two ways with an acceptable ACK, and `tcp_in_ack_event`'s flags:
    /// an ACK that header prediction took and that advances `snd_una` counts
    /// `TCPHPAcks` and says only `CA_ACK_WIN_UPDATE`; any other (slow path, or a
    /// predicted duplicate) counts `TCPPureAcks` when it carries no data, SYN or FIN.
    pub(crate) fn ack_event_flags(
        &self,
        ctx: &mut Ctx,
        th: &TcpRepr,
        payload_len: usize,
        fast: bool,
        win_update: bool,
        ece: bool,
    ) -> u32 {
        use super::cong::{CA_ACK_ECE, CA_ACK_SLOWPATH, CA_ACK_WIN_UPDATE};
        if fast {
            ctx.mib.inc(Mib::TcpExtTCPHPAcks);
            return CA_ACK_WIN_UPDATE;
        }
        if payload_len == 0 && !th.flags.intersects(TcpFlags::SYN | TcpFlags::FIN) {
            ctx.mib.inc(Mib::TcpExtTCPPureAcks);
        }
        CA_ACK_SLOWPATH
            | if win_update { CA_ACK_WIN_UPDATE } else { 0 }
            | if ece { CA_ACK_ECE } else { 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::TestStack;

    /// The prediction's match, branch by branch: armed with the current window, a
    /// pure ACK at rcv_nxt matches; PSH does not matter; any other flag, another
    /// window, a header with SACK blocks, a later sequence number, an ACK beyond
    /// snd_nxt, a timestamp failing PAWS, or the prediction off does not.
    #[test]
    fn header_prediction_matches_as_pred_flags() {
        let cfg = Config::default();
        let mut st = TestStack::default();
        let ctx = st.ctx(&cfg, crate::time::Instant::ZERO, false);
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        (t.rcv_nxt, t.snd_nxt, t.snd_wnd, t.rx_opt.snd_wscale) = (1001, 501, 257 << 7, 7);
        (t.rx_opt.tstamp_ok, t.rx_opt.ts_recent) = (true, 100);
        let mut th = TcpRepr {
            flags: TcpFlags::ACK,
            window: 257,
            ..TcpRepr::default()
        };
        th.options.timestamp = Some((110, 0));
        let seg = (32, 1001, 501, 0);
        assert!(!t.header_predicted(&ctx, &th, seg), "not armed");
        t.fast_path_on();
        assert!(t.header_predicted(&ctx, &th, seg));
        th.flags = TcpFlags(TcpFlags::ACK.0 | TcpFlags::PSH.0);
        assert!(
            t.header_predicted(&ctx, &th, seg),
            "PSH is not in TCP_HP_BITS"
        );
        th.flags = TcpFlags(TcpFlags::ACK.0 | TcpFlags::ECE.0);
        assert!(!t.header_predicted(&ctx, &th, seg));
        th.flags = TcpFlags::ACK | TcpFlags::RES1;
        assert!(t.header_predicted(&ctx, &th, seg), "TCP_RESERVED_BITS");
        th.flags = TcpFlags::ACK | TcpFlags::AE;
        assert!(!t.header_predicted(&ctx, &th, seg), "AE is TCP_FLAG_AE");
        th.flags = TcpFlags::ACK;
        assert!(
            !t.header_predicted(&ctx, &th, (44, 1001, 501, 0)),
            "SACK blocks"
        );
        assert!(
            !t.header_predicted(&ctx, &th, (32, 1002, 501, 0)),
            "not rcv_nxt"
        );
        assert!(
            !t.header_predicted(&ctx, &th, (32, 1001, 502, 0)),
            "beyond snd_nxt"
        );
        th.options.timestamp = Some((99, 0));
        assert!(
            !t.header_predicted(&ctx, &th, seg),
            "PAWS: the slow path checks"
        );
        th.options.timestamp = Some((110, 0));
        th.window = 258;
        assert!(!t.header_predicted(&ctx, &th, seg), "another window");
        th.window = 257;
        t.fast_path_off();
        assert!(!t.header_predicted(&ctx, &th, seg));
        // tcp_finish_connect: a scaled window starts unpredicted.
        t.fast_path_connected();
        assert_eq!(t.pred_wnd, None);
        (t.rx_opt.snd_wscale, t.snd_wnd) = (0, 5000);
        t.fast_path_connected();
        assert_eq!(t.pred_wnd, Some(5000));
    }
}
