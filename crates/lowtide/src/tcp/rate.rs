//! Delivery-rate sampling, Linux's tcp_rate.c (draft-cheng-iccrg-delivery-rate-estimation).
//!
//! Each transmission snapshots the connection's delivery state into the skb
//! (`tcp_rate_skb_sent`). When an skb is cumulatively ACKed or SACKed, the snapshot of
//! the most recently sent delivered skb becomes the start of the sample
//! (`tcp_rate_skb_delivered`), and once per ACK `tcp_rate_gen` turns it into a
//! [`RateSample`]: packets delivered over the longer of the send and ACK phases.
//! Application-limited periods are marked (`tcp_rate_check_app_limited`) so that
//! congestion control can discount their low samples.

pub use super::cong::RateSample;
use super::consts::SKB_OVERHEAD;
use super::rtx::skb::{DeliveredSkb, TxRate};
use super::sock::Tcb;
use crate::time::Instant;

/// What one ACK contributes to the sample, gathered by `tcp_ack`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AckRate {
    /// The most recently sent skb the ACK delivered (cumulatively or by SACK).
    pub skb: Option<DeliveredSkb>,
    /// Packets newly delivered (`tcp_newly_delivered`).
    pub delivered: u32,
    /// Packets newly marked lost.
    pub lost: u32,
    /// RTT of the most recently (S)ACKed packet (`ca_rtt_us`).
    pub rtt_us: Option<u32>,
    /// Packets in flight before the ACK.
    pub prior_in_flight: u32,
    /// `tp->is_sack_reneg` when the ACK arrived.
    pub is_sack_reneg: bool,
    /// `FLAG_ACK_MAYBE_DELAYED` (`tcp_clean_rtx_queue`).
    pub is_ack_delayed: bool,
}

/// `after(delivered, app_limited)` as Linux compares them, in 32 bits.
fn after32(a: u64, b: u64) -> bool {
    ((b as u32).wrapping_sub(a as u32) as i32) < 0
}

impl Tcb {
    /// `tcp_rate_skb_sent`: the snapshot a (re)transmitted skb carries. Call before
    /// the skb is counted in `packets_out`: with nothing in flight, a new send phase
    /// and delivery interval start now.
    pub(crate) fn rate_skb_sent(&mut self, now: Instant) -> TxRate {
        if self.rtx.packets_out == 0 {
            self.rate.first_tx_mstamp = now;
            self.rate.delivered_mstamp = now;
        }
        TxRate {
            delivered: self.delivered,
            delivered_mstamp: Some(self.rate.delivered_mstamp),
            first_tx_mstamp: self.rate.first_tx_mstamp,
            is_app_limited: self.rate.app_limited != 0,
        }
    }

    /// `tcp_rate_gen`: the rate sample of one ACK.
    pub(crate) fn rate_gen(&mut self, now: Instant, a: &AckRate) -> RateSample {
        // Clear app-limited once the bubble is ACKed and gone.
        if self.rate.app_limited != 0 && after32(self.delivered, self.rate.app_limited) {
            self.rate.app_limited = 0;
        }
        if a.delivered > 0 {
            self.rate.delivered_mstamp = now;
        }
        let mut rs = RateSample {
            acked_sacked: a.delivered,
            losses: a.lost,
            prior_in_flight: a.prior_in_flight,
            rtt_us: a.rtt_us.map_or(-1, i64::from),
            is_ack_delayed: a.is_ack_delayed,
            ..RateSample::default()
        };
        let Some(d) = a.skb else {
            return rs; // no timing information
        };
        // tcp_rate_skb_delivered's update of the connection: the send time of the most
        // recently delivered packet starts the next send phase.
        self.rate.first_tx_mstamp = d.tx_time;
        rs.prior_mstamp = d.tx.delivered_mstamp;
        rs.prior_delivered = d.tx.delivered;
        rs.is_app_limited = d.tx.is_app_limited;
        rs.is_retrans = d.is_retrans;
        // tcp_rate_gen: no sample without timing information, nor while recovering
        // from SACK reneging (packets SACKed before it would overestimate the rate).
        let Some(prior_mstamp) = d.tx.delivered_mstamp.filter(|_| !a.is_sack_reneg) else {
            return rs;
        };
        rs.delivered = (self.delivered - d.tx.delivered) as i64;
        // Sending and ACKing a window are two pipeline phases; usually the ACK phase
        // is longer, but with ACK compression the send phase can be: use the longer.
        let snd_us = d.tx_time.saturating_since(d.tx.first_tx_mstamp).as_micros() as i64;
        let ack_us = now.saturating_since(prior_mstamp).as_micros() as i64;
        rs.snd_interval_us = snd_us;
        rs.rcv_interval_us = ack_us;
        rs.interval_us = snd_us.max(ack_us);
        // An interval below min_rtt is implausible (e.g. a spuriously retransmitted
        // skb ACKed first): no sample.
        if rs.interval_us < self.rtt.min_rtt_us as i64 {
            rs.interval_us = -1;
            return rs;
        }
        // Record the last non-app-limited or the highest app-limited rate (tcp_info).
        if !rs.is_app_limited
            || rs.delivered as u128 * self.rate.rate_interval_us as u128
                >= self.rate.rate_delivered as u128 * rs.interval_us as u128
        {
            self.rate.rate_delivered = rs.delivered as u64;
            self.rate.rate_interval_us = rs.interval_us as u64;
            self.rate.rate_app_limited = rs.is_app_limited;
        }
        rs
    }

    /// `tcp_rate_check_app_limited`: if the application, not the network, keeps the
    /// pipe from filling (less than a segment to send, nothing in the device, room in
    /// cwnd, no lost packet waiting), mark the packets up to the current flight as
    /// app-limited.
    pub(crate) fn rate_check_app_limited(&mut self) {
        let in_flight = self.packets_in_flight();
        if self.notsent_bytes() < self.mss_cache as u64
            && self.wmem_alloc < (1 + SKB_OVERHEAD) as u64
            && in_flight < self.cw.snd_cwnd
            && self.rtx.lost_out <= self.rtx.retrans_out
        {
            self.rate.app_limited = (self.delivered + in_flight as u64).max(1);
        }
    }

    /// `tcp_info.tcpi_delivery_rate`: bytes per second of the last recorded sample.
    pub(crate) fn delivery_rate(&self) -> u64 {
        (self.rate.rate_delivered as u128 * self.mss_cache as u128 * 1_000_000)
            .checked_div(self.rate.rate_interval_us as u128)
            .map_or(0, |r| r.min(u64::MAX as u128) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::tcp::rtx::skb::Skb;

    use bytes::Bytes;

    const MSS: u32 = 1000;

    fn tcb() -> Tcb {
        let mut t = Tcb::for_test(&Config::default());
        t.mss_cache = MSS;
        t.cw.snd_cwnd = 100;
        t
    }

    fn us(n: u64) -> Instant {
        Instant(n * 1000)
    }

    /// Sends segment `i` (one MSS) at `now`, as output.rs does.
    fn send(t: &mut Tcb, i: u64, now: Instant) {
        let tx = t.rate_skb_sent(now);
        t.rtx.push(Skb {
            seq: 1 + i * MSS as u64,
            end_seq: 1 + (i + 1) * MSS as u64,
            data: Bytes::from(vec![0; MSS as usize]).into(),
            flags: 0,
            sacked: 0,
            pcount: 1,
            gso_size: 0,
            tx_time: now,
            truesize: MSS + SKB_OVERHEAD,
            tx,
            fclone: 0,
            zc: None,
            uncharged: 0,
        });
        t.snd_nxt = 1 + (i + 1) * MSS as u64;
    }

    /// A cumulative ACK of segments `..n` at `now`, as tcp/ack.rs does.
    fn ack(t: &mut Tcb, n: u64, now: Instant) -> RateSample {
        let prior_in_flight = t.packets_in_flight();
        let c = t.rtx.clean(1 + n * MSS as u64);
        t.delivered += c.acked_segs as u64;
        let a = AckRate {
            skb: c.rate,
            delivered: c.acked_segs,
            lost: 0,
            rtt_us: None,
            prior_in_flight,
            is_sack_reneg: false,
            is_ack_delayed: false,
        };
        t.rate_gen(now, &a)
    }

    #[test]
    fn paced_flight_gives_the_sending_rate() {
        // 10 segments 1 ms apart, each ACKed 50 ms after it was sent: the sample of
        // the last ACK covers 9 deliveries over 9 ms (the first ACK opens the interval).
        let mut t = tcb();
        t.rtt.min_rtt_us = 50_000;
        for i in 0..10 {
            send(&mut t, i, us(i * 1000));
        }
        let first = ack(&mut t, 1, us(50_000));
        // The first skb was stamped at the start of the flight: 1 delivery, ACK phase
        // 50 ms, above min_rtt: a valid sample of 20 packets/s.
        assert_eq!(first.delivered, 1);
        assert_eq!(first.interval_us, 50_000);
        let mut rs = first;
        for i in 2..=10 {
            rs = ack(&mut t, i, us(50_000 + (i - 1) * 1000));
        }
        // Segment 9 was sent at 9 ms with delivered = 0 and delivered_mstamp = 0 (the
        // flight started empty): 10 delivered over max(send 9 ms, ACK 59 ms).
        assert_eq!(rs.delivered, 10);
        assert_eq!(rs.interval_us, 59_000);
        assert_eq!(rs.prior_delivered, 0);
        assert!(rs.is_app_limited, "sent in tcp_init_sock's bubble");
        // Second flight, 1 ms apart from 59 ms on: the flight starts empty, so the
        // send phase and the delivery interval restart at 59 ms.
        for i in 10..20 {
            send(&mut t, i, us(59_000 + (i - 10) * 1000));
        }
        for i in 11..=20 {
            rs = ack(&mut t, i, us(59_000 + 50_000 + (i - 11) * 1000));
        }
        // Segment 19 left at 68 ms with tx.delivered = 10, tx.delivered_mstamp = 59 ms
        // and first_tx = 59 ms; its ACK at 118 ms: 10 packets over max(9 ms, 59 ms).
        assert_eq!(rs.delivered, 10);
        assert_eq!(rs.snd_interval_us, 68_000 - 59_000);
        assert_eq!(rs.rcv_interval_us, 118_000 - 59_000);
        assert_eq!(rs.rate_pps(), Some(10 * 1_000_000 / 59_000));
        assert!(!rs.is_app_limited && !t.rate.rate_app_limited);
        // tcp_info's delivery rate: 10 * 1000 B / 59 ms.
        assert_eq!(t.delivery_rate(), 10 * 1000 * 1_000_000 / 59_000);
    }

    #[test]
    fn interval_below_min_rtt_is_invalid() {
        let mut t = tcb();
        t.rtt.min_rtt_us = 40_000;
        send(&mut t, 0, us(0));
        send(&mut t, 1, us(0));
        let rs = ack(&mut t, 1, us(40_000));
        assert_eq!(rs.interval_us, 40_000);
        // An ACK 1 ms later for a packet whose interval began at 0 is fine (41 ms) ...
        let rs = ack(&mut t, 2, us(41_000));
        assert_eq!(rs.interval_us, 41_000);
        // ... but a packet sent at 41 ms and ACKed 1 ms later is not (< min_rtt: an
        // ACK for a spurious retransmission looks like this).
        send(&mut t, 2, us(41_000));
        let rs = ack(&mut t, 3, us(42_000));
        assert_eq!(rs.interval_us, -1);
        assert_eq!(rs.delivered, 1);
    }

    #[test]
    fn a_new_socket_is_app_limited_until_its_first_ack() {
        // tcp_init_sock: app_limited ~0U and rate_app_limited set, so what goes out
        // before any ACK is marked and tcp_info says app-limited.
        let mut t = tcb();
        assert_eq!(
            t.rate.app_limited,
            crate::tcp::consts::APP_LIMITED_UNTIL_ACKED
        );
        assert!(t.rate.rate_app_limited);
        send(&mut t, 0, us(0));
        assert!(t.rtx.first().unwrap().tx.is_app_limited);
        // The first tcp_rate_gen ends the bubble whatever was delivered (any count
        // is after ~0U), here one without timing information, as on a SYN-ACK:
        // no sample, so tcp_info's flag stays.
        let rs = t.rate_gen(us(1000), &AckRate::default());
        assert_eq!((rs.delivered, t.rate.app_limited), (-1, 0));
        assert!(t.rate.rate_app_limited);
        assert_eq!(t.rate.delivered_mstamp, us(0), "nothing delivered");
    }

    #[test]
    fn app_limited_marks_and_clears() {
        let mut t = tcb();
        // Nothing queued, nothing in flight, room in cwnd: app-limited from the start.
        t.rate_check_app_limited();
        assert_eq!(t.rate.app_limited, 1);
        for i in 0..4 {
            send(&mut t, i, us(0));
        }
        assert!(t.rtx.first().unwrap().tx.is_app_limited);
        let rs = ack(&mut t, 1, us(10_000));
        assert!(rs.is_app_limited);
        assert_eq!(t.rate.app_limited, 1, "delivered = 1 is not past the mark");
        let rs = ack(&mut t, 2, us(11_000));
        assert!(rs.is_app_limited);
        assert_eq!(t.rate.app_limited, 0, "delivered = 2 passed the bubble");
        send(&mut t, 4, us(11_000));
        assert!(!t.rtx.last().unwrap().tx.is_app_limited);
        // With cwnd full it is the network that limits: no mark.
        t.cw.snd_cwnd = t.packets_in_flight();
        t.rate_check_app_limited();
        assert_eq!(t.rate.app_limited, 0);
        // With cwnd room and an empty write queue the mark is delivered + in flight.
        t.cw.snd_cwnd = 100;
        t.rate_check_app_limited();
        assert_eq!(t.rate.app_limited, 2 + 3);
        // Data waiting to be sent: not app-limited.
        t.rate.app_limited = 0;
        t.write_seq = t.snd_nxt + MSS as u64;
        t.rate_check_app_limited();
        assert_eq!(t.rate.app_limited, 0);
    }
}
