//! Packetization-layer path MTU discovery (RFC 4821) as Linux does it with
//! `net.ipv4.tcp_mtu_probing`: a binary search between `search_low` (from
//! `tcp_base_mss`) and `search_high` (the handshake's MSS clamp, or the route's MTU),
//! one probe at a time. A probe is a segment of the middle size built from the head
//! of the write queue (tcp_output.c `tcp_mtu_probe`); its ACK raises `search_low`
//! and the MSS (tcp_input.c `tcp_mtup_probe_success`), its loss lowers
//! `search_high` (`tcp_mtup_probe_failed`), and RTOs that keep firing are taken as
//! an ICMP blackhole that turns probing on or lowers `search_low` (tcp_timer.c
//! `tcp_mtu_probing`). Ported from Linux 6.18.

use super::cong::CaState;
use super::rtx::skb::{FLAG_EOR, FLAG_FIN, FLAG_PSH};
use super::sock::Tcb;
use super::Ctx;
use crate::mib::Mib;

/// What `tcp_mtu_probe` tells `tcp_write_xmit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    /// No probe now: send as usual (-1).
    NotNow,
    /// Wait for the window or cwnd to drain, sending nothing (0).
    Wait,
    /// A probe went out (1).
    Sent,
}

impl Tcb {
    /// IP header length of the connection's family (`net_header_len`).
    fn net_header_len(&self) -> u32 {
        if self.tuple.local.is_ipv6() {
            40
        } else {
            20
        }
    }

    /// `tcp_mss_to_mtu`: the MTU a segment of `mss` payload bytes needs, with the
    /// options every segment carries.
    pub(crate) fn mss_to_mtu(&self, mss: u32) -> u32 {
        let tcp_header_len = 20 + self.ts_option_len();
        mss + tcp_header_len + self.net_header_len()
    }

    /// `tcp_mtup_init`: probing on with `tcp_mtu_probing` 2; the search runs from
    /// `tcp_base_mss` up to the handshake's clamp.
    pub(crate) fn mtup_init(&mut self, ctx: &Ctx) {
        self.mtup.enabled = ctx.cfg.tcp_mtu_probing > 1;
        self.mtup.search_high = self.rx_opt.mss_clamp + 20 + self.net_header_len();
        self.mtup.search_low = self.mss_to_mtu(ctx.cfg.tcp_base_mss);
        self.mtup.probe_size = 0;
        if self.mtup.enabled {
            self.mtup.probe_timestamp = ctx.now;
        }
    }

    /// `tcp_mtu_check_reprobe`: `tcp_probe_interval` after the last search, the
    /// search starts again from the current MSS up to the clamp.
    fn mtu_check_reprobe(&mut self, ctx: &Ctx) {
        let interval = core::time::Duration::from_secs(ctx.cfg.tcp_probe_interval as u64);
        if ctx.now.saturating_since(self.mtup.probe_timestamp) >= interval {
            let mss = self.current_mss(ctx.cfg, ctx.now);
            self.mtup.probe_size = 0;
            self.mtup.search_high = self.rx_opt.mss_clamp + 20 + self.net_header_len();
            self.mtup.search_low = self.mss_to_mtu(mss);
            self.mtup.probe_timestamp = ctx.now;
        }
    }

    /// `tcp_can_coalesce_send_queue_head`: the probe may take `len` bytes from the
    /// head of the write queue unless an skb it takes whole ends a record or carries
    /// a timestamp mark (or, here, zerocopy data), nor may the skb it takes in
    /// part carry a zerocopy sender's bytes (`tcp_skb_can_collapse`'s
    /// `skb_pure_zcopy_same` of the pair; lowtide would copy them).
    fn can_coalesce_send_queue_head(&self, mut len: u64) -> bool {
        for (i, w) in self.write_queue.iter().enumerate() {
            let n = w.data.len() as u64;
            if len <= n {
                // Nor a pure one in part: its pages are not charged
                // (skb_pure_zcopy_same: the probe skb is not pure).
                return !w.pure && (i == 0 || w.data.zerocopy_id().is_none());
            }
            let end = w.seq + n;
            if w.flags & FLAG_EOR != 0 || w.zc.is_some() || self.tstamp_marked(w.seq, end) {
                return false;
            }
            len -= n;
        }
        true
    }

    /// `tcp_mtu_probe`: with probing on, nothing probing, the connection Open, a
    /// cwnd of at least 11, no SACK blocks to send, and enough data and window for
    /// the probe and `reordering + 1` segments after it, sends one segment of the
    /// search's middle size.
    pub(crate) fn mtu_probe(&mut self, ctx: &mut Ctx) -> ProbeResult {
        let sacking = self.dsack.is_some() || self.ofo.sack_blocks().next().is_some();
        if !self.mtup.enabled
            || self.mtup.probe_size != 0
            || self.ca_state != CaState::Open
            || self.cw.snd_cwnd < 11
            || sacking
        {
            return ProbeResult::NotNow;
        }
        let min = ctx.cfg.tcp_min_snd_mss;
        let (high, low) = (self.mtup.search_high, self.mtup.search_low);
        let probe_size = self.mtu_to_mss((high + low) >> 1, min);
        let size_needed = probe_size as u64 + (self.reordering as u64 + 1) * self.mss_cache as u64;
        let interval = high.saturating_sub(low);
        if probe_size > self.mtu_to_mss(high, min) || interval < ctx.cfg.tcp_probe_threshold {
            self.mtu_check_reprobe(ctx);
            return ProbeResult::NotNow;
        }
        if self.write_seq - self.snd_nxt < size_needed || (self.snd_wnd as u64) < size_needed {
            return ProbeResult::NotNow;
        }
        if self.snd_nxt + size_needed > self.snd_una + self.snd_wnd as u64 {
            return ProbeResult::Wait;
        }
        let in_flight = self.packets_in_flight();
        if in_flight + 2 > self.cw.snd_cwnd {
            return match in_flight {
                0 => ProbeResult::NotNow,
                _ => ProbeResult::Wait,
            };
        }
        if !self.can_coalesce_send_queue_head(probe_size as u64) {
            return ProbeResult::NotNow;
        }
        let seq = self.snd_nxt;
        let (copy, kept) = self.probe_take_truesize(probe_size as u64);
        let eaten = self.coalesce_send_queue_head(probe_size as usize);
        // One segment of its own size: tcp_init_tso_segs(nskb, nskb->len); PSH if
        // an skb it took whole had it.
        self.mtup.probe_tx = true;
        self.send_new_marked(ctx, probe_size as usize, probe_size, eaten & FLAG_PSH);
        self.mtup.probe_tx = false;
        // The skb the probe took only in part is trimmed by __pskb_trim_head,
        // which leaves its truesize as it was, while the probe's skb counts the
        // bytes it took (tcp_clone_payload: `to->truesize += probe_size`): they
        // stay counted twice in sk_wmem_queued until that skb is freed.
        if copy > 0 {
            if let Some(rest) = self.write_queue.front_mut() {
                rest.slack += (kept + copy) as u32;
                self.wmem_queued += kept + copy;
            }
        }
        // "We are sending effectively two packets."
        self.cw.snd_cwnd -= 1;
        self.mtup.probe_size = self.mss_to_mtu(probe_size);
        self.mtup.probe_seq_start = seq;
        self.mtup.probe_seq_end = seq + probe_size as u64;
        ProbeResult::Sent
    }

    /// `tcp_mtu_probe`'s walk over the skbs a probe of `len` bytes takes: its skb
    /// holds `SKB_OVERHEAD` and those bytes only (`tcp_clone_payload`), every skb
    /// it takes whole is freed with all its truesize (`tcp_eat_one_skb`), and one
    /// taken in part keeps all of its own. The truesize beyond their bytes
    /// (`slack`) of the skbs it reaches is taken off here (pure zerocopy skbs,
    /// whose pages are not charged, keep theirs); returns the bytes taken from an
    /// skb taken in part (0 if none) and the truesize beyond its bytes it had.
    fn probe_take_truesize(&mut self, len: u64) -> (u64, u64) {
        let (mut left, mut freed, mut res) = (len, 0, (0, 0));
        for w in self.write_queue.iter_mut() {
            let n = w.data.len() as u64;
            let slack = match w.pure {
                true => 0,
                false => std::mem::take(&mut w.slack) as u64,
            };
            freed += slack;
            if n > left {
                res = (left, slack);
                break;
            }
            left -= n;
            if left == 0 {
                break;
            }
        }
        self.wmem_free(freed);
        res
    }

    /// The probe's skb: the head skbs it takes whole are merged into the head, with
    /// the one it takes in part, so that the head holds at least `len` bytes.
    /// Returns the flags of the skbs taken whole: `tcp_mtu_probe` gives the probe
    /// all of them (`tcp_eat_one_skb`: `tcp_flags |= src's`, PSH too), and only the
    /// flags less FIN and PSH of the skb taken in part, whose own stay with what
    /// is left of it (the merged head's flags are that skb's).
    fn coalesce_send_queue_head(&mut self, len: usize) -> u8 {
        let mut eaten = match self.write_queue.front() {
            Some(h) if h.data.len() <= len => h.flags,
            _ => 0,
        };
        while self.write_queue.front().is_some_and(|h| h.data.len() < len) {
            let Some(next) = self.write_queue.remove(1) else {
                break;
            };
            let head = self.write_queue.front_mut().expect("checked");
            head.data.extend(&next.data);
            if head.data.len() <= len {
                eaten |= next.flags;
            }
            // A head taken only in part keeps PSH/FIN for what is left.
            head.flags = (head.flags & !(FLAG_PSH | FLAG_FIN)) | next.flags;
            head.nr_frags = head.nr_frags.saturating_add(next.nr_frags);
            // The merged skb keeps one skb's overhead: the other is freed.
            self.wmem_free(super::consts::SKB_OVERHEAD as u64);
        }
        eaten
    }

    /// `tcp_mtup_probe_success`, when the ACK covers the probe: cwnd scaled to the
    /// new segment size, the search's lower bound raised to the probe, and the MSS
    /// with it (`tcp_sync_mss`).
    pub(crate) fn mtup_probe_acked(&mut self, ctx: &mut Ctx) {
        if self.mtup.probe_size == 0 || self.snd_una < self.mtup.probe_seq_end {
            return;
        }
        self.undo.prior_ssthresh = self.current_ssthresh();
        let val = self.cw.snd_cwnd as u64 * self.mss_to_mtu(self.mss_cache) as u64
            / self.mtup.probe_size as u64;
        self.cw.snd_cwnd = (val as u32).max(1);
        self.cw.snd_cwnd_cnt = 0;
        self.snd_cwnd_stamp = ctx.now;
        self.cw.snd_ssthresh = self.current_ssthresh();
        self.mtup.search_low = self.mtup.probe_size;
        self.mtup.probe_size = 0;
        self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
        ctx.mib.inc(Mib::TcpExtTCPMTUPSuccess);
    }

    /// `tcp_fastretrans_alert`'s "MTU probe failure: don't reduce cwnd": the probe
    /// at `snd_una` is what was lost. The search's upper bound falls below it, cwnd
    /// gets back the segment the probe took, and what no longer fits the MSS goes
    /// again (`tcp_simple_retransmit`). Returns whether it was the probe.
    pub(crate) fn mtup_probe_lost(&mut self, ctx: &mut Ctx) -> bool {
        if self.ca_state >= CaState::Cwr
            || self.mtup.probe_size == 0
            || self.snd_una != self.mtup.probe_seq_start
        {
            return false;
        }
        self.mtup.search_high = self.mtup.probe_size - 1;
        self.mtup.probe_size = 0;
        ctx.mib.inc(Mib::TcpExtTCPMTUPFail);
        self.cw.snd_cwnd += 1;
        self.simple_retransmit(ctx);
        true
    }

    /// `tcp_mtu_probing` (black hole detection, from `tcp_write_timeout` once
    /// `tcp_retries1` RTOs passed): with `tcp_mtu_probing` set, probing turns on;
    /// when it already was, `search_low` halves, to no less than
    /// `tcp_mtu_probe_floor` and `tcp_min_snd_mss`, and no more than `tcp_base_mss`.
    pub(crate) fn mtu_probing_blackhole(&mut self, ctx: &mut Ctx) {
        if ctx.cfg.tcp_mtu_probing == 0 {
            return;
        }
        if !self.mtup.enabled {
            self.mtup.enabled = true;
            self.mtup.probe_timestamp = ctx.now;
        } else {
            let min = ctx.cfg.tcp_min_snd_mss;
            let mss = (self.mtu_to_mss(self.mtup.search_low, min) >> 1)
                .min(ctx.cfg.tcp_base_mss)
                .max(ctx.cfg.tcp_mtu_probe_floor)
                .max(min);
            self.mtup.search_low = self.mss_to_mtu(mss);
        }
        self.sync_mss(self.pmtu_cookie, ctx.cfg.tcp_min_snd_mss);
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::tcp::rtx::skb::WriteSkb;
    use crate::tcp::Tcb;

    fn queue(t: &mut Tcb, lens: &[(usize, u32)]) {
        queue_flagged(t, &lens.iter().map(|&(l, s)| (l, s, 0)).collect::<Vec<_>>());
    }

    fn queue_flagged(t: &mut Tcb, skbs: &[(usize, u32, u8)]) {
        let mut seq = 1;
        for &(len, slack, flags) in skbs {
            let data = bytes::BytesMut::from(&vec![7u8; len][..]).into();
            let mut w = WriteSkb::copied(seq, data, flags);
            w.slack = slack;
            t.write_queue.push_back(w);
            seq += len as u64;
        }
    }

    /// `tcp_mtu_probe`'s walk: skbs the probe takes whole are eaten and freed with
    /// all their truesize, one taken in part is trimmed (`__pskb_trim_head`) and
    /// keeps its own, so the bytes taken from it count twice; ending on an skb's
    /// end takes none in part.
    #[test]
    fn probe_walk_eats_whole_skbs_and_trims_one_keeping_its_truesize() {
        let cfg = Config::default();
        for (lens, probe, want, reached) in [
            // Two eaten (their 100 and 50 bytes beyond the data freed), 242 of the
            // third taken: it keeps its 30 (given back after the send).
            (
                &[(500, 100), (500, 50), (1000, 30)][..],
                1242,
                (242, 30, 150 + 30),
                3,
            ),
            // Ends on the second skb's end: both eaten, none trimmed, the third
            // not reached.
            (
                &[(500, 100), (500, 50), (1000, 30)][..],
                1000,
                (0, 0, 150),
                2,
            ),
            // Inside the head: the head alone trimmed.
            (&[(1000, 30)][..], 300, (300, 30, 30), 1),
        ] {
            let mut t = Tcb::for_test(&cfg);
            queue(&mut t, lens);
            t.wmem_queued = 10_000;
            let (copy, kept) = t.probe_take_truesize(probe);
            assert_eq!(
                (copy, kept, 10_000 - t.wmem_queued),
                want,
                "{lens:?} {probe}"
            );
            let slack: Vec<u32> = t.write_queue.iter().map(|w| w.slack).collect();
            assert!(slack[..reached].iter().all(|&s| s == 0), "{slack:?}");
            assert!(slack[reached..].iter().all(|&s| s == 30), "{slack:?}");
        }
    }

    /// `tcp_mtu_probe`'s flags: every skb taken whole gives the probe all of its
    /// own (PSH included, `tcp_eat_one_skb`); the one taken in part gives none of
    /// FIN and PSH, which stay with its rest (the merged head's flags).
    #[test]
    fn probe_takes_the_flags_of_whole_skbs_and_not_psh_of_a_part() {
        use crate::tcp::rtx::skb::{FLAG_EOR, FLAG_PSH};
        let cfg = Config::default();
        for (skbs, probe, eaten, rest) in [
            // The first whole with PSH, 30 bytes of the second: PSH.
            (
                &[(800, 0, FLAG_PSH), (800, 0, FLAG_PSH)][..],
                830,
                FLAG_PSH,
                FLAG_PSH,
            ),
            // Whole skbs without PSH, then one with it taken in part: none.
            (
                &[(400, 0, 0), (400, 0, 0), (800, 0, FLAG_PSH)][..],
                830,
                0,
                FLAG_PSH,
            ),
            // PSH on the first of two taken whole: kept though the last lacks it.
            (
                &[(400, 0, FLAG_PSH), (430, 0, 0), (800, 0, 0)][..],
                830,
                FLAG_PSH,
                0,
            ),
            // Ending on a record's end: its EOR too.
            (
                &[(400, 0, 0), (430, 0, FLAG_EOR | FLAG_PSH)][..],
                830,
                FLAG_EOR | FLAG_PSH,
                FLAG_EOR | FLAG_PSH,
            ),
            // Inside the head: nothing whole.
            (&[(1000, 0, FLAG_PSH)][..], 830, 0, FLAG_PSH),
        ] {
            let mut t = Tcb::for_test(&cfg);
            queue_flagged(&mut t, skbs);
            let got = t.coalesce_send_queue_head(probe);
            let head = t.write_queue.front().expect("merged head");
            assert_eq!((got, head.flags), (eaten, rest), "{skbs:?}");
        }
    }
}
