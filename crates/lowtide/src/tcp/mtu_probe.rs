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
        self.coalesce_send_queue_head(probe_size as usize);
        // One segment of its own size: tcp_init_tso_segs(nskb, nskb->len).
        self.mtup.probe_tx = true;
        self.send_new(ctx, probe_size as usize, probe_size);
        self.mtup.probe_tx = false;
        // "We are sending effectively two packets."
        self.cw.snd_cwnd -= 1;
        self.mtup.probe_size = self.mss_to_mtu(probe_size);
        self.mtup.probe_seq_start = seq;
        self.mtup.probe_seq_end = seq + probe_size as u64;
        ProbeResult::Sent
    }

    /// The probe's skb: the head skbs it takes whole are merged into the head, so
    /// that the head holds at least `len` bytes; their flags go with them, as
    /// `tcp_mtu_probe` gives the probe the flags of every skb it eats.
    fn coalesce_send_queue_head(&mut self, len: usize) {
        while self.write_queue.front().is_some_and(|h| h.data.len() < len) {
            let Some(next) = self.write_queue.remove(1) else {
                return;
            };
            let head = self.write_queue.front_mut().expect("checked");
            head.data.extend(&next.data);
            // The merged skb keeps one skb's overhead: the other is freed.
            self.wmem_queued = self
                .wmem_queued
                .saturating_sub(super::consts::SKB_OVERHEAD as u64);
            // A head taken only in part keeps PSH/FIN for what is left.
            head.flags = (head.flags & !(FLAG_PSH | FLAG_FIN)) | next.flags;
            head.nr_frags = head.nr_frags.saturating_add(next.nr_frags);
        }
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
