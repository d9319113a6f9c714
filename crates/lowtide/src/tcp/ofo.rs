//! The out-of-order queue (`tp->out_of_order_queue`) and the SACK blocks the receiver
//! reports (RFC 2018 section 4, in Linux's order: `tcp_sack_new_ofo_skb`).
//!
//! Data is kept as maximal contiguous runs, each one allocation, so a run of
//! in-order arrivals above a hole grows one buffer and one SACK block.

use super::consts::TCP_NUM_SACKS;
use std::collections::BTreeMap;

/// Out-of-order data keyed by stream offset, with the SACK blocks to report.
#[derive(Debug, Default)]
pub struct OfoQueue {
    runs: BTreeMap<u64, Vec<u8>>,
    /// Starts of runs, most recently changed first (`selective_acks`).
    recent: Vec<u64>,
    bytes: u64,
}

impl OfoQueue {
    /// True if no out-of-order data is held.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }
    /// Payload bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// End of the highest data held (`ooo_last_skb`'s `end_seq`), if any.
    pub fn last_end(&self) -> Option<u64> {
        self.runs
            .iter()
            .next_back()
            .map(|(k, v)| k + v.len() as u64)
    }
    /// Number of contiguous runs (holes above `rcv_nxt`).
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    /// Queues `data` at offset `seq` (above `rcv_nxt`). Returns the first part that was
    /// already held, for a D-SACK (RFC 2883 section 4, "duplicate out-of-order").
    pub fn insert(&mut self, seq: u64, data: &[u8]) -> Option<(u64, u64)> {
        let end = seq + data.len() as u64;
        if data.is_empty() {
            return None;
        }
        let touching: Vec<u64> = self
            .runs
            .range(..=end)
            .rev()
            .take_while(|(k, v)| **k + v.len() as u64 >= seq)
            .map(|(k, _)| *k)
            .collect();
        let mut dup = None;
        for &k in touching.iter().rev() {
            let kend = k + self.runs[&k].len() as u64;
            let (ds, de) = (k.max(seq), kend.min(end));
            if ds < de && dup.is_none() {
                dup = Some((ds, de));
            }
        }
        let start = touching.last().map_or(seq, |&k| k.min(seq));
        let merged = self.merge(start, seq, data, &touching);
        self.recent.retain(|k| !touching.contains(k));
        self.recent.insert(0, start);
        self.recent.truncate(TCP_NUM_SACKS);
        self.bytes += merged.len() as u64;
        self.runs.insert(start, merged);
        dup
    }

    /// Where `tcp_sack_new_ofo_skb` finds data `[seq, end)`: the index of the first
    /// reported block (most recent first) that it overlaps or adjoins
    /// (`tcp_sack_extend`), or the number of blocks if it opens a new one.
    pub fn sack_slot(&self, seq: u64, end: u64) -> usize {
        let touches = |k: &u64| {
            let run_end = *k + self.runs.get(k).map_or(0, |v| v.len() as u64);
            *k <= end && seq <= run_end
        };
        self.recent
            .iter()
            .position(touches)
            .unwrap_or(self.recent.len())
    }

    /// Builds the union of `data` at `seq` and the runs in `touching` (which start at
    /// or after `start`), removing those runs.
    fn merge(&mut self, start: u64, seq: u64, data: &[u8], touching: &[u64]) -> Vec<u8> {
        let mut out: Vec<u8> = Vec::new();
        let mut data_done = false;
        for &k in touching.iter().rev() {
            let run = self.runs.remove(&k).expect("run exists");
            self.bytes -= run.len() as u64;
            if !data_done && seq < k {
                Self::append_from(&mut out, start, seq, data);
                data_done = true;
            }
            if out.is_empty() && k == start {
                out = run;
            } else {
                Self::append_from(&mut out, start, k, &run);
            }
        }
        if !data_done {
            Self::append_from(&mut out, start, seq, data);
        }
        out
    }

    /// Appends the part of `data` (at offset `at`) beyond what `out` (at `start`)
    /// already holds.
    fn append_from(out: &mut Vec<u8>, start: u64, at: u64, data: &[u8]) {
        let have_end = start + out.len() as u64;
        let end = at + data.len() as u64;
        if end > have_end {
            let skip = (have_end.max(at) - at) as usize;
            out.extend_from_slice(&data[skip..]);
        }
    }

    /// Takes the run that `rcv_nxt` reaches, if any, and returns the bytes at and
    /// after `rcv_nxt` (`tcp_ofo_queue`). Runs wholly below `rcv_nxt` are dropped.
    pub fn pop_in_order(&mut self, rcv_nxt: u64) -> Option<Vec<u8>> {
        loop {
            let (&k, v) = self.runs.iter().next()?;
            if k > rcv_nxt {
                return None;
            }
            let end = k + v.len() as u64;
            let mut run = self.runs.remove(&k).expect("run exists");
            self.bytes -= run.len() as u64;
            self.recent.retain(|&r| r != k);
            if end > rcv_nxt {
                run.drain(..(rcv_nxt - k) as usize);
                return Some(run);
            }
        }
    }

    /// The SACK blocks to report, most recent first, as offsets `[start, end)`.
    pub fn sack_blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.recent
            .iter()
            .filter_map(|k| self.runs.get(k).map(|v| (*k, *k + v.len() as u64)))
    }

    /// Drops everything (`tcp_prune_ofo_queue`, reneging); returns the bytes freed.
    pub fn purge(&mut self) -> u64 {
        let b = self.bytes;
        self.runs.clear();
        self.recent.clear();
        self.bytes = 0;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(range: core::ops::Range<u64>) -> Vec<u8> {
        range.map(|i| i as u8).collect()
    }

    #[test]
    fn runs_merge_and_report_recent_first() {
        let mut q = OfoQueue::default();
        assert_eq!(q.insert(100, &bytes(100..200)), None);
        assert_eq!(q.insert(300, &bytes(300..400)), None);
        assert_eq!(
            q.sack_blocks().collect::<Vec<_>>(),
            vec![(300, 400), (100, 200)]
        );
        assert_eq!(q.insert(200, &bytes(200..300)), None);
        assert_eq!(q.sack_blocks().collect::<Vec<_>>(), vec![(100, 400)]);
        assert_eq!(q.runs(), 1);
        assert_eq!(q.bytes(), 300);
    }

    #[test]
    fn duplicate_reports_dsack() {
        let mut q = OfoQueue::default();
        q.insert(100, &bytes(100..200));
        assert_eq!(q.insert(150, &bytes(150..250)), Some((150, 200)));
        assert_eq!(q.bytes(), 150);
    }

    #[test]
    fn pop_in_order_trims() {
        let mut q = OfoQueue::default();
        q.insert(100, &bytes(100..200));
        assert_eq!(q.pop_in_order(50), None);
        assert_eq!(q.pop_in_order(150).unwrap(), bytes(150..200));
        assert!(q.is_empty());
        assert_eq!(q.sack_blocks().count(), 0);
    }

    #[test]
    fn at_most_four_blocks() {
        let mut q = OfoQueue::default();
        for i in 0..6u64 {
            q.insert(100 + i * 20, &bytes(0..10));
        }
        let b: Vec<_> = q.sack_blocks().collect();
        assert_eq!(b.len(), TCP_NUM_SACKS);
        assert_eq!(b[0], (200, 210));
    }

    proptest! {
        #[test]
        fn reassembles_any_arrival_order(segs in proptest::collection::vec((0u64..1000, 1u64..200), 1..40)) {
            let mut q = OfoQueue::default();
            let mut have = vec![false; 1200];
            for (s, l) in segs {
                let s = s + 1;
                q.insert(s, &bytes(s..s + l));
                for i in s..s + l { have[i as usize] = true; }
            }
            // Runs hold exactly the received bytes, with the right values.
            let mut count = 0u64;
            let mut next = 1u64;
            while let Some(run) = q.pop_in_order(next) {
                for (i, b) in run.iter().enumerate() {
                    prop_assert_eq!(*b, (next + i as u64) as u8);
                }
                next += run.len() as u64;
                count += run.len() as u64;
            }
            let contiguous = have[1..].iter().take_while(|h| **h).count() as u64;
            prop_assert_eq!(count, contiguous);
        }
    }
}
