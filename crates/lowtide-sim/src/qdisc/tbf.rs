//! sch_tbf.c: the Token Bucket Filter. Packets wait in a child bfifo of `limit`
//! bytes; the head leaves when the bucket holds enough tokens for it, tokens being
//! time at the `rate` (a bucket of `burst` bytes is `buffer` ns of it, refilled as
//! time passes and capped there), and, with a `peakrate`, when a second bucket of
//! `mtu` bytes at the peak rate also does. When the head must wait, the qdisc
//! says when it can go (`qdisc_watchdog_schedule_ns`) and counts an overlimit.
//!
//! tc's parameters (`tc qdisc add ... tbf rate R burst B limit L | latency T
//! [peakrate P mtu M]`): `rate`, `burst` and one of `limit` (bytes) or `latency`
//! (iproute2's q_tbf.c turns it into `limit = rate * latency + burst`, and with a
//! peak rate at most `peakrate * latency + mtu`) are required; `peakrate` needs
//! `mtu` and must exceed `rate` (`tbf_change`).

use super::fifo::Fifo;
use super::{NetXmit, Qdisc, QdiscStats, QueueItem, Skb};

/// `tbf` as tc configures it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TbfConfig {
    /// `rate` (bytes per second).
    pub rate: u64,
    /// `burst` (bytes): the bucket's size.
    pub burst: u64,
    /// `limit` (bytes of the child bfifo).
    pub limit: u64,
    /// `peakrate` (bytes per second; 0: none).
    pub peakrate: u64,
    /// `mtu` (bytes): the peak bucket's size.
    pub mtu: u64,
}

impl TbfConfig {
    /// Checks the parameters as iproute2 and `tbf_change` do; `latency` (ns),
    /// if given instead of `limit`, sets it.
    pub fn resolve(mut self, latency_ns: Option<u64>) -> Result<TbfConfig, String> {
        if self.rate == 0 {
            return Err("rate is required".into());
        }
        if self.burst == 0 {
            return Err("burst is required".into());
        }
        if self.peakrate != 0 && self.mtu == 0 {
            return Err("mtu is required with peakrate".into());
        }
        if self.peakrate != 0 && self.peakrate <= self.rate {
            return Err("peakrate must exceed rate".into());
        }
        match (latency_ns, self.limit) {
            (Some(_), l) if l != 0 => return Err("one of limit or latency, not both".into()),
            (Some(lat), _) => {
                let at = |rate: u64, bucket: u64| {
                    (rate as u128 * lat as u128 / 1_000_000_000) as u64 + bucket
                };
                self.limit = at(self.rate, self.burst);
                if self.peakrate != 0 {
                    self.limit = self.limit.min(at(self.peakrate, self.mtu));
                }
            }
            (None, 0) => return Err("limit or latency is required".into()),
            (None, _) => {}
        }
        Ok(self)
    }
}

/// `psched_l2t_ns`: the time `len` bytes take at `rate` bytes per second.
fn l2t_ns(rate: u64, len: u64) -> i64 {
    (len as u128 * 1_000_000_000 / rate.max(1) as u128).min(i64::MAX as u128) as i64
}

/// `psched_ns_t2l`: the bytes `rate` sends in `ns`.
fn t2l(rate: u64, ns: i64) -> u64 {
    (rate as u128 * ns.max(0) as u128 / 1_000_000_000).min(u64::MAX as u128) as u64
}

/// A token bucket filter (`struct tbf_sched_data`).
pub struct Tbf<T> {
    cfg: TbfConfig,
    /// The bucket's depth in ns at the rate (`q->buffer`).
    buffer: i64,
    /// The peak bucket's depth in ns at the peak rate (`q->mtu`).
    mtu_ns: i64,
    /// Largest packet that can ever leave (`q->max_size`).
    max_size: u64,
    /// Tokens (ns) as of `t_c`.
    tokens: i64,
    /// Peak tokens (ns) as of `t_c`.
    ptokens: i64,
    /// Time of the last dequeue (`q->t_c`).
    t_c: u64,
    /// When the head can leave, after a dequeue that had to refuse it.
    wake: Option<u64>,
    child: Fifo<T>,
    drops: u64,
    overlimits: u64,
}

impl<T: QueueItem> Tbf<T> {
    /// A full bucket at time 0 (`tbf_change` sets `tokens = buffer`, `ptokens = mtu`).
    pub fn new(cfg: TbfConfig) -> Tbf<T> {
        let buffer = l2t_ns(cfg.rate, cfg.burst);
        let peak = cfg.peakrate != 0;
        let mtu_ns = if peak {
            l2t_ns(cfg.peakrate, cfg.mtu)
        } else {
            0
        };
        let mut max_size = t2l(cfg.rate, buffer).min(u32::MAX as u64);
        if peak {
            max_size = max_size.min(t2l(cfg.peakrate, mtu_ns));
        }
        Tbf {
            cfg,
            buffer,
            mtu_ns,
            max_size,
            tokens: buffer,
            ptokens: mtu_ns,
            t_c: 0,
            wake: None,
            child: Fifo::bfifo(cfg.limit),
            drops: 0,
            overlimits: 0,
        }
    }

    /// The largest packet it lets through (`q->max_size`).
    pub fn max_size(&self) -> u64 {
        self.max_size
    }
}

impl<T: QueueItem> Qdisc<T> for Tbf<T> {
    fn kind(&self) -> &'static str {
        "tbf"
    }

    /// `tbf_enqueue`: a packet larger than the bucket is dropped (Linux segments a
    /// GSO packet instead, `tbf_segment`: the simulator's hosts hand whole GSO
    /// packets to their qdisc, so a host's tbf needs a burst above its GSO size);
    /// the rest go to the child bfifo, which drops past its limit.
    fn enqueue(&mut self, now: u64, skb: Skb<T>, dropped: &mut Vec<Skb<T>>) -> NetXmit {
        if skb.len as u64 > self.max_size {
            self.drops += 1;
            dropped.push(skb);
            return NetXmit::Drop;
        }
        let v = self.child.enqueue(now, skb, dropped);
        if v == NetXmit::Drop {
            self.drops += 1;
        }
        v
    }

    /// `tbf_dequeue`: tokens earned since the last dequeue, capped at the bucket;
    /// the head leaves if both buckets cover it, else the watchdog is set for the
    /// time the larger shortfall takes.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<Skb<T>>) -> Option<Skb<T>> {
        let len = self.child.peek_len()? as u64;
        let elapsed = now.saturating_sub(self.t_c).min(i64::MAX as u64) as i64;
        let mut toks = elapsed.min(self.buffer);
        let mut ptoks = 0;
        if self.cfg.peakrate != 0 {
            ptoks = (toks + self.ptokens).min(self.mtu_ns);
            ptoks -= l2t_ns(self.cfg.peakrate, len);
        }
        toks = (toks + self.tokens).min(self.buffer);
        toks -= l2t_ns(self.cfg.rate, len);
        if (toks | ptoks) >= 0 {
            self.t_c = now;
            self.tokens = toks;
            self.ptokens = ptoks;
            self.wake = None;
            return self.child.dequeue(now, dropped);
        }
        self.wake = Some(now + (-toks).max(-ptoks) as u64);
        self.overlimits += 1;
        None
    }

    fn next_ready(&self) -> Option<u64> {
        self.wake.filter(|_| self.child.peek_len().is_some())
    }

    fn stats(&self) -> QdiscStats {
        QdiscStats {
            drops: self.drops,
            overlimits: self.overlimits,
            ..self.child.stats()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::test_pkt::pkt;

    const MS: u64 = 1_000_000;

    /// 1 Mbit/s (125,000 bytes/s), a 3,000-byte bucket, 10,000 bytes of queue.
    fn tbf() -> Tbf<Vec<u8>> {
        Tbf::new(TbfConfig {
            rate: 125_000,
            burst: 3000,
            limit: 10_000,
            peakrate: 0,
            mtu: 0,
        })
    }

    /// Dequeues at `now` until the qdisc refuses: the lengths it let go.
    fn drain(q: &mut Tbf<Vec<u8>>, now: u64) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(s) = q.dequeue(now, &mut Vec::new()) {
            out.push(s.len);
        }
        out
    }

    #[test]
    fn a_full_bucket_sends_a_burst_then_the_rate() {
        let mut q = tbf();
        for _ in 0..6 {
            assert_eq!(
                q.enqueue(0, pkt(1000, 0, 0, None), &mut Vec::new()),
                NetXmit::Success
            );
        }
        // 3,000 bytes of tokens: three packets at once.
        assert_eq!(drain(&mut q, 0), [1000, 1000, 1000]);
        // The fourth needs 1,000 bytes at 125,000 bytes/s: 8 ms.
        assert_eq!(q.next_ready(), Some(8 * MS));
        assert_eq!(q.stats().overlimits, 1);
        assert!(drain(&mut q, 8 * MS - 1).is_empty());
        assert_eq!(drain(&mut q, 8 * MS), [1000]);
        assert_eq!(q.next_ready(), Some(16 * MS));
        // Idle time refills the bucket, but never past its 3,000 bytes (24 ms).
        assert_eq!(drain(&mut q, 1000 * MS), [1000, 1000]);
        assert_eq!(q.stats().backlog, 0);
    }

    #[test]
    fn over_a_long_run_the_rate_holds() {
        let mut q = tbf();
        let (mut sent, mut now) = (0u64, 0u64);
        while now <= 1000 * MS {
            while q.stats().backlog + 1500 <= 10_000 {
                q.enqueue(now, pkt(1500, 0, 0, None), &mut Vec::new());
            }
            sent += drain(&mut q, now).iter().map(|&l| l as u64).sum::<u64>();
            now = q.next_ready().unwrap();
        }
        // One second at 125,000 bytes/s plus the first bucket (3,000 bytes),
        // within a packet.
        assert!((128_000 - 1500..=128_000).contains(&sent), "{sent}");
    }

    #[test]
    fn limit_drops_and_packets_larger_than_the_bucket_never_fit() {
        let mut q = tbf();
        let mut dropped = Vec::new();
        for _ in 0..10 {
            q.enqueue(0, pkt(1000, 0, 0, None), &mut dropped);
        }
        assert_eq!(
            q.enqueue(0, pkt(1000, 0, 0, None), &mut dropped),
            NetXmit::Drop
        );
        assert_eq!(
            q.enqueue(0, pkt(3001, 0, 0, None), &mut dropped),
            NetXmit::Drop
        );
        assert_eq!(
            (q.max_size(), q.stats().drops, q.stats().qlen),
            (3000, 2, 10)
        );
        assert_eq!(dropped.len(), 2);
    }

    #[test]
    fn peakrate_spaces_a_burst_and_latency_sets_the_limit() {
        // Peak 2 Mbit/s with a 1,000-byte peak bucket: a full bucket still goes at
        // most at the peak rate, one packet per 4 ms.
        let cfg = TbfConfig {
            rate: 125_000,
            burst: 3000,
            limit: 0,
            peakrate: 250_000,
            mtu: 1000,
        };
        let cfg = cfg.resolve(Some(100 * MS)).unwrap();
        // min(125,000 x 0.1 + 3,000, 250,000 x 0.1 + 1,000) bytes.
        assert_eq!(cfg.limit, 15_500);
        let mut q: Tbf<Vec<u8>> = Tbf::new(cfg);
        for _ in 0..3 {
            q.enqueue(0, pkt(1000, 0, 0, None), &mut Vec::new());
        }
        assert_eq!(drain(&mut q, 0), [1000]);
        assert_eq!(q.next_ready(), Some(4 * MS));
        assert_eq!(drain(&mut q, 4 * MS), [1000]);
        assert_eq!(drain(&mut q, 8 * MS), [1000]);
        let bad = |c: TbfConfig, lat| c.resolve(lat).unwrap_err();
        assert!(bad(TbfConfig { mtu: 0, ..cfg }, None).contains("mtu"));
        assert!(bad(
            TbfConfig {
                peakrate: 125_000,
                ..cfg
            },
            None
        )
        .contains("exceed"));
        assert!(bad(cfg, Some(MS)).contains("not both"));
        assert!(bad(TbfConfig { limit: 0, ..cfg }, None).contains("required"));
    }
}
