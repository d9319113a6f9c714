//! Queue time series: every queue that carries a flow's data, sampled at a fixed
//! interval: its backlog (bytes and packets), its drops and CE marks so far, and
//! the mean sojourn time of the packets that left it during the interval. The
//! simulator samples between events (the state is constant there, so a sample is
//! exact); the real-time fabric samples as its clock passes each instant.

use super::topology::Topology;
use crate::nic::QueueTotals;
use serde::Serialize;

/// One queue's samples, column by column.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueueSeries {
    /// `SRC->DST`.
    pub name: String,
    /// Sample times (s from the start).
    pub t_s: Vec<f64>,
    /// Bytes queued at each time.
    pub backlog_bytes: Vec<u64>,
    /// Packets queued at each time.
    pub backlog_packets: Vec<u64>,
    /// Packets dropped up to each time.
    pub drops: Vec<u64>,
    /// Packets marked CE up to each time.
    pub ce_marks: Vec<u64>,
    /// Mean sojourn time of the packets that left in the interval ending at each
    /// time (ms; `null` if none left).
    pub sojourn_ms: Vec<Option<f64>>,
}

/// Takes the samples of a run.
#[derive(Debug, Clone)]
pub(crate) struct Sampler {
    interval_ns: u64,
    end_ns: u64,
    next_ns: u64,
    /// The ports sampled, with the totals at their last sample.
    ports: Vec<(usize, QueueTotals)>,
    series: Vec<QueueSeries>,
}

impl Sampler {
    /// Samples every `t.series_interval_ns` up to the run's end, of the ports some
    /// flow's data crosses.
    pub fn new(t: &Topology) -> Sampler {
        let ports: Vec<usize> = (0..t.ports.len())
            .filter(|p| t.flows.iter().any(|f| f.path.contains(p)))
            .collect();
        Sampler {
            interval_ns: t.series_interval_ns,
            end_ns: t.duration_ns,
            next_ns: t.series_interval_ns,
            series: (ports.iter())
                .map(|&p| QueueSeries {
                    name: t.ports[p].name.clone(),
                    ..QueueSeries::default()
                })
                .collect(),
            ports: ports
                .into_iter()
                .map(|p| (p, QueueTotals::default()))
                .collect(),
        }
    }

    /// Takes every sample due at or before `at` (ns), reading each port's totals
    /// with `totals`, which must give them as they stood since the last call.
    pub fn until(&mut self, at: u64, totals: impl Fn(usize) -> QueueTotals) {
        if self.interval_ns == 0 {
            return;
        }
        while self.next_ns <= at && self.next_ns <= self.end_ns {
            let t_s = self.next_ns as f64 / 1e9;
            for ((p, last), s) in self.ports.iter_mut().zip(&mut self.series) {
                let now = totals(*p);
                let left = now.dequeued - last.dequeued;
                let waited = now.delay_sum_ns - last.delay_sum_ns;
                s.t_s.push(t_s);
                s.backlog_bytes.push(now.bytes);
                s.backlog_packets.push(now.packets);
                s.drops.push(now.drops);
                s.ce_marks.push(now.ce_marks);
                s.sojourn_ms
                    .push((left > 0).then(|| waited as f64 / left as f64 / 1e6));
                *last = now;
            }
            self.next_ns += self.interval_ns;
        }
    }

    /// The series taken.
    pub fn finish(self) -> Vec<QueueSeries> {
        self.series
    }
}
