//! Nagle's algorithm with Minshall's variant and the TSO split point, as
//! tcp_output.c has them: `tcp_nagle_test`, `tcp_nagle_check`,
//! `tcp_minshall_check`, `tcp_mss_split_point`, and the `nonagle` bits
//! (`TCP_NAGLE_OFF`/`CORK`/`PUSH`) a push runs with
//! ([RFC 896](https://www.rfc-editor.org/rfc/rfc896), RFC 1122 section 4.2.3.4).

use super::rtx::skb::FLAG_FIN;
use super::sock::Tcb;

/// `TCP_NAGLE_OFF`: `TCP_NODELAY`.
pub(crate) const TCP_NAGLE_OFF: u8 = 1;
/// `TCP_NAGLE_CORK`: `TCP_CORK`, or a `MSG_MORE` push.
pub(crate) const TCP_NAGLE_CORK: u8 = 2;
/// `TCP_NAGLE_PUSH`: send even a partial segment now.
pub(crate) const TCP_NAGLE_PUSH: u8 = 4;

impl Tcb {
    /// `tp->nonagle`: the socket's own bits. `TCP_NAGLE_PUSH` stays set from
    /// `TCP_NODELAY` on (or `TCP_CORK` off with it) until the writer starts a new
    /// skb (`tcp_skb_entail`), so pushes from ACKs meanwhile send the tail too.
    pub(crate) fn tp_nonagle(&self) -> u8 {
        let mut bits = 0;
        if self.nodelay {
            bits |= TCP_NAGLE_OFF;
        }
        if self.cork {
            bits |= TCP_NAGLE_CORK;
        }
        if self.nonagle_push {
            bits |= TCP_NAGLE_PUSH;
        }
        bits
    }

    /// The `nonagle` of the running `tcp_write_xmit`: the push's own, else the
    /// socket's ([`Tcb::tp_nonagle`]).
    pub(crate) fn nonagle(&self) -> u8 {
        self.push_nonagle.unwrap_or_else(|| self.tp_nonagle())
    }

    /// `__tcp_push_pending_frames` with `nonagle` as the push's own.
    pub(crate) fn push_pending_frames_with(&mut self, ctx: &mut super::Ctx, nonagle: u8) {
        let prior = self.push_nonagle.replace(nonagle);
        self.write_xmit(ctx);
        self.push_nonagle = prior;
    }

    /// `tcp_minshall_update`, run by `tcp_write_xmit` only, after it sent `len`
    /// bytes ending at `snd_nxt`: an skb with a short segment (a GSO packet's
    /// short last one too) is the latest small segment. What `tcp_write_wakeup`
    /// (a window or cork probe) or an MTU probe sends leaves `snd_sml` alone.
    pub(crate) fn minshall_update(&mut self, len: usize, mss: u32) {
        let pcount = super::rtx::skb::pcount(len as u32, mss);
        if (len as u64) < pcount as u64 * mss as u64 {
            self.snd_sml = self.snd_nxt;
        }
    }

    /// `tcp_minshall_check`: a partial segment sent earlier is still unacked
    /// (`snd_sml`, set by `tcp_minshall_update`, between `snd_una` and `snd_nxt`).
    fn minshall_check(&self) -> bool {
        self.snd_sml > self.snd_una && self.snd_sml <= self.snd_nxt
    }

    /// `tcp_nagle_check`: true to hold a `partial` (sub-MSS) segment: corked, or
    /// with no bit of `nonagle` set while data is out and a partial segment is
    /// unacked (Minshall). Its callers exempt FIN, urgent mode and pushes.
    pub(crate) fn nagle_check(&self, partial: bool, nonagle: u8) -> bool {
        partial
            && (nonagle & TCP_NAGLE_CORK != 0
                || (nonagle == 0 && self.rtx.packets_out > 0 && self.minshall_check()))
    }

    /// `tcp_nagle_test`: may a one-segment skb of `len` bytes go now? Yes when
    /// pushed, in urgent mode (`tcp_urg_mode`), for a FIN, or unless
    /// [`Tcb::nagle_check`] holds it as a partial segment.
    pub(crate) fn nagle_test(&self, len: u64, flags: u8, mss: u32, nonagle: u8) -> bool {
        if nonagle & TCP_NAGLE_PUSH != 0 || self.urg_mode() || flags & FLAG_FIN != 0 {
            return true;
        }
        !self.nagle_check(len < mss as u64, nonagle)
    }

    /// `tcp_mss_split_point`: how much of the skb at `seq` (`len` bytes, the write
    /// queue's last when `is_tail`) one TSO packet takes: `max_segs` whole
    /// segments, or less at the end of the skb or of the peer's window, up to the
    /// window's very edge, a sub-MSS last segment included, unless Nagle would hold
    /// that partial segment (`tcp_nagle_check`, no FIN exemption here): then up to
    /// its last whole segment.
    pub(crate) fn mss_split_point(
        &self,
        (seq, len): (u64, u64),
        mss: u32,
        max_segs: u32,
        is_tail: bool,
        nonagle: u8,
    ) -> u64 {
        let mss = mss as u64;
        let window = (self.snd_una + self.snd_wnd as u64).saturating_sub(seq);
        let max_len = mss * max_segs as u64;
        if max_len <= window && !is_tail {
            return max_len;
        }
        let needed = len.min(window);
        if max_len <= needed {
            return max_len;
        }
        let partial = needed % mss;
        if self.nagle_check(partial != 0, nonagle) {
            return needed - partial;
        }
        needed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Established, MSS 1000, `snd_una` 1 and `snd_nxt` 1 + `out`, with
    /// `packets_out` set to match whole segments of it.
    fn tcb(out: u64) -> Tcb {
        let mut t = Tcb::for_test(&Config::default());
        t.mss_cache = 1000;
        (t.snd_una, t.snd_nxt, t.write_seq) = (1, 1 + out, 1 + out);
        t.rtx.packets_out = out.div_ceil(1000) as u32;
        t.snd_wnd = 1 << 20;
        t
    }

    #[test]
    fn nagle_check_holds_a_partial_segment_corked_or_behind_an_unacked_small_one() {
        let mut t = tcb(1500);
        // No partial segment unacked (snd_sml at snd_una): Nagle does not hold.
        t.snd_sml = 1;
        assert!(!t.nagle_check(true, 0));
        // One is (Minshall): hold, unless TCP_NODELAY or a push.
        t.snd_sml = 1501;
        assert!(t.nagle_check(true, 0));
        assert!(!t.nagle_check(true, TCP_NAGLE_OFF));
        assert!(!t.nagle_check(true, TCP_NAGLE_PUSH));
        // A full segment is never held.
        assert!(!t.nagle_check(false, TCP_NAGLE_CORK));
        // Corked: held, whatever is in flight and even with TCP_NODELAY.
        let c = tcb(0);
        assert!(c.nagle_check(true, TCP_NAGLE_CORK | TCP_NAGLE_OFF));
        // Nothing out: not held.
        assert!(!c.nagle_check(true, 0));
        // snd_sml beyond snd_nxt is no unacked segment (tcp_minshall_check).
        t.snd_sml = 1502;
        assert!(!t.nagle_check(true, 0));
    }

    #[test]
    fn nagle_test_exempts_pushes_fin_and_urgent_mode() {
        let mut t = tcb(1500);
        t.snd_sml = 1501;
        assert!(!t.nagle_test(100, 0, 1000, 0), "held");
        assert!(t.nagle_test(1000, 0, 1000, 0), "a full segment");
        assert!(t.nagle_test(100, 0, 1000, TCP_NAGLE_PUSH | TCP_NAGLE_CORK));
        assert!(t.nagle_test(100, FLAG_FIN, 1000, TCP_NAGLE_CORK));
        // tcp_urg_mode: snd_up ahead of snd_una.
        t.urg.snd_up = 1501;
        assert!(t.nagle_test(100, 0, 1000, TCP_NAGLE_CORK));
    }

    #[test]
    fn nonagle_is_the_push_s_own_else_the_socket_s() {
        let mut t = tcb(0);
        t.nodelay = true;
        t.cork = true;
        t.nonagle_push = true;
        assert_eq!(t.nonagle(), TCP_NAGLE_OFF | TCP_NAGLE_CORK | TCP_NAGLE_PUSH);
        // tcp_push with MSG_MORE: TCP_NAGLE_CORK alone.
        t.push_nonagle = Some(TCP_NAGLE_CORK);
        assert_eq!(t.nonagle(), TCP_NAGLE_CORK);
    }

    use crate::socket::SendFlags;
    use crate::tcp::TestStack;
    const NOW: crate::time::Instant = crate::time::Instant(1_000_000_000);

    /// An established socket with nothing sent, a large send buffer and window.
    fn writer() -> (Config, TestStack, Tcb) {
        let mut t = tcb(0);
        t.state = crate::tcp::TcpState::Established;
        (t.max_window, t.sndbuf) = (1 << 20, 1 << 20);
        (Config::default(), TestStack::default(), t)
    }

    /// `tp->nonagle`'s `TCP_NAGLE_PUSH` from `TCP_NODELAY` outlives its own push: a
    /// later push (an ACK's) sends the corked partial tail too, until the writer
    /// starts a new skb (`tcp_skb_entail`).
    #[test]
    fn nodelay_s_push_bit_stays_until_a_new_skb() {
        let (cfg, mut st, mut t) = writer();
        t.snd_wnd = 0;
        t.set_cork(&mut st.ctx(&cfg, NOW, false), true);
        let flags = SendFlags::default();
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 500], &[], flags);
        assert_eq!(sent, Ok(500));
        // TCP_NODELAY on pushes, but the peer's window is closed.
        t.set_nodelay(&mut st.ctx(&cfg, NOW, false), true);
        assert_eq!(t.snd_nxt, 1);
        // The window opens (tcp_data_snd_check): the corked partial tail goes.
        t.snd_wnd = 1 << 20;
        t.write_xmit(&mut st.ctx(&cfg, NOW, false));
        assert_eq!(t.snd_nxt, 501);
        // A new skb ends the push bit: corked again.
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 300], &[], flags);
        assert_eq!(sent, Ok(300));
        t.write_xmit(&mut st.ctx(&cfg, NOW, false));
        assert_eq!((t.snd_nxt, t.nonagle_push), (501, false));
    }

    /// F-RTO's step 2.b (`tcp_xmit_recovery`, `REXMIT_NEW`) pushes with
    /// `TCP_NAGLE_OFF` as its own nonagle: a corked partial tail goes; the
    /// socket's cork holds the next one again.
    #[test]
    fn frto_new_data_push_ignores_cork() {
        let (cfg, mut st, mut t) = writer();
        let flags = SendFlags::default();
        t.set_cork(&mut st.ctx(&cfg, NOW, false), true);
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 500], &[], flags);
        assert_eq!((sent, t.snd_nxt), (Ok(500), 1), "corked");
        t.write_xmit(&mut st.ctx(&cfg, NOW, false));
        assert_eq!(t.snd_nxt, 1, "a plain push keeps the cork");
        t.frto_rexmit_new = true;
        t.write_xmit(&mut st.ctx(&cfg, NOW, false));
        assert_eq!((t.snd_nxt, t.push_nonagle), (501, None));
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 300], &[], flags);
        assert_eq!((sent, t.snd_nxt), (Ok(300), 501), "corked again");
    }

    /// `tcp_minshall_update` runs in `tcp_write_xmit` only: a corked tail sent by
    /// the probe timer (`tcp_write_wakeup`) leaves `snd_sml` where it was, so the
    /// next small write goes while the probe's data is unacked; one that
    /// `tcp_write_xmit` sent holds the one after it.
    #[test]
    fn only_write_xmit_moves_snd_sml() {
        use crate::mib::Mib;
        let (cfg, mut st, mut t) = writer();
        t.snd_sml = 1;
        let flags = SendFlags::default();
        t.set_cork(&mut st.ctx(&cfg, NOW, false), true);
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 100], &[], flags);
        assert_eq!((sent, t.snd_nxt), (Ok(100), 1), "corked");
        assert!(t.write_wakeup(&mut st.ctx(&cfg, NOW, false), Mib::TcpExtTCPWinProbe));
        assert_eq!(
            (t.snd_nxt, t.snd_sml),
            (101, 1),
            "the probe is no small segment"
        );
        // The probe has left the device (tun orphans its skbs): no auto corking
        // behind it.
        t.wmem_alloc = 0;
        t.set_cork(&mut st.ctx(&cfg, NOW, false), false);
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 100], &[], flags);
        assert_eq!(
            (sent, t.snd_nxt, t.snd_sml),
            (Ok(100), 201, 201),
            "not held"
        );
        let sent = t.sendmsg(&mut st.ctx(&cfg, NOW, false), &[7; 100], &[], flags);
        assert_eq!((sent, t.snd_nxt), (Ok(100), 201), "held behind 101:201");
        // A full segment is no small one.
        let mut f = tcb(0);
        f.minshall_update(1000, 1000);
        assert_eq!(f.snd_sml, 0);
        f.minshall_update(1500, 1000);
        assert_eq!(f.snd_sml, f.snd_nxt);
    }

    #[test]
    fn split_point_goes_to_the_window_edge_unless_nagle_holds_the_partial_segment() {
        let mut t = tcb(0);
        t.snd_wnd = 2500;
        // The window (2500) ends the send of a 5000-byte skb: a partial last segment.
        assert_eq!(t.mss_split_point((1, 5000), 1000, 10, true, 0), 2500);
        // Behind an unacked partial segment, Nagle cuts at the last whole segment...
        let mut n = tcb(1500);
        n.snd_sml = 1501;
        n.snd_wnd = 4000;
        assert_eq!(n.mss_split_point((1501, 5000), 1000, 10, true, 0), 2000);
        // ...for an skb that is not the tail too, whose window-limited send asks
        // Nagle as the tail's does (tcp_write_xmit passes its own nonagle)...
        assert_eq!(n.mss_split_point((1501, 5000), 1000, 10, false, 0), 2000);
        // ...but not when pushed, nor with TCP_NODELAY.
        assert_eq!(
            n.mss_split_point((1501, 5000), 1000, 10, false, TCP_NAGLE_PUSH),
            2500
        );
        assert_eq!(
            n.mss_split_point((1501, 5000), 1000, 10, true, TCP_NAGLE_OFF),
            2500
        );
        // Corked, the end of the skb itself is cut to whole segments.
        assert_eq!(
            t.mss_split_point((1, 2500), 1000, 10, true, TCP_NAGLE_CORK),
            2000
        );
        // max_segs whole segments when they fit: no Nagle question.
        t.snd_wnd = 1 << 20;
        assert_eq!(
            t.mss_split_point((1, 5000), 1000, 3, true, TCP_NAGLE_CORK),
            3000
        );
        assert_eq!(t.mss_split_point((1, 5000), 1000, 3, false, 0), 3000);
        // The whole skb when it is shorter than both.
        assert_eq!(t.mss_split_point((1, 4500), 1000, 10, true, 0), 4500);
    }
}
