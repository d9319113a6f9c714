//! Time series of a scenario run, on one grid (`run.series_interval`): every queue
//! that carries a flow's data, its backlog (bytes and packets), its drops and CE
//! marks so far, and the mean sojourn time of the packets that left it during the
//! interval; and every flow, the bytes its receiver has read and its sender's
//! `snd_cwnd`. The simulator samples between events (the state is constant there,
//! so a sample is exact); the real-time fabric samples its queues as its clock
//! passes each instant, and a real-time flow's sides record their figures as they
//! change ([`GridRecorder`]), read at the same instants.

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

/// One flow's samples on the run's grid, column by column.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowSeries {
    /// `NAME` or `NAME#i`.
    pub name: String,
    /// Sample times (s from the start).
    pub t_s: Vec<f64>,
    /// Bytes the receiver had read (and verified) by each time.
    pub bytes: Vec<u64>,
    /// Goodput over the interval ending at each time (Mbit/s): the bytes read in it.
    pub goodput_mbps: Vec<f64>,
    /// The sender's `snd_cwnd` (segments, `tcpi_snd_cwnd`) at each time; `null`
    /// before it connected and once its socket is gone.
    pub cwnd: Vec<Option<u32>>,
}

impl FlowSeries {
    /// A flow's series from its values at the grid's points (`interval_ns` apart,
    /// the first at `interval_ns`): the bytes read by each and the cwnd then.
    pub fn from_grid(
        name: &str,
        interval_ns: u64,
        bytes: Vec<u64>,
        cwnd: Vec<Option<u32>>,
    ) -> FlowSeries {
        let secs = interval_ns as f64 / 1e9;
        let goodput_mbps = (bytes.iter().scan(0, |last, &b| {
            let d = b.saturating_sub(*last);
            *last = b;
            Some(d as f64 * 8.0 / secs / 1e6)
        }))
        .collect();
        FlowSeries {
            name: name.to_string(),
            t_s: (1..=bytes.len().max(cwnd.len()))
                .map(|k| (k as u64 * interval_ns) as f64 / 1e9)
                .collect(),
            bytes,
            goodput_mbps,
            cwnd,
        }
    }

    /// The mean of the cwnd samples up to `until_s` (the end of the flow's measured
    /// time), the points without one (not connected, closed) left out; `None` if
    /// none has one.
    pub fn mean_cwnd(&self, until_s: f64) -> Option<f64> {
        let xs: Vec<u32> = (self.t_s.iter().zip(&self.cwnd))
            .filter(|(t, _)| **t <= until_s + 1e-9)
            .filter_map(|(_, c)| *c)
            .collect();
        (!xs.is_empty()).then(|| xs.iter().map(|&c| c as f64).sum::<f64>() / xs.len() as f64)
    }
}

/// A figure of a real-time flow recorded as it changes (a receiver's bytes read,
/// a sender's cwnd at each `tcp_info` sample) and read at the points of the run's
/// grid: a point takes the last value set before or at it.
#[derive(Debug, Clone, Default)]
pub struct GridRecorder {
    interval_ns: u64,
    end_ns: u64,
    next_ns: u64,
    last: Option<u64>,
    values: Vec<Option<u64>>,
}

impl GridRecorder {
    /// A recorder on the grid of `interval_ns` (0: none) up to `end_ns`, its value
    /// `initial` until the first [`GridRecorder::set`].
    pub fn new(interval_ns: u64, end_ns: u64, initial: Option<u64>) -> GridRecorder {
        GridRecorder {
            interval_ns,
            end_ns,
            next_ns: interval_ns,
            last: initial,
            values: Vec::new(),
        }
    }

    /// The value became `v` at `now` (ns; not before the last call's).
    pub fn set(&mut self, now: u64, v: Option<u64>) {
        self.pass(now);
        self.last = v;
    }

    /// Records the points up to `now`, with the value as it stands.
    fn pass(&mut self, now: u64) {
        if self.interval_ns == 0 {
            return;
        }
        while self.next_ns <= now && self.next_ns <= self.end_ns {
            self.values.push(self.last);
            self.next_ns += self.interval_ns;
        }
    }

    /// The values at the grid's points up to `until_ns`.
    pub fn finish(mut self, until_ns: u64) -> Vec<Option<u64>> {
        self.pass(until_ns);
        self.values
    }
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
    /// Per flow sampled: the bytes its receiver had read and its cwnd, per point.
    flows: Vec<(Vec<u64>, Vec<Option<u32>>)>,
}

impl Sampler {
    /// Samples every `t.series_interval_ns` up to the run's end, of the ports some
    /// flow's data crosses (the flows too with [`Sampler::with_flows`]).
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
            flows: Vec::new(),
        }
    }

    /// Also samples each of `t`'s flows (the simulator, which sees both sides).
    pub fn with_flows(mut self, t: &Topology) -> Sampler {
        self.flows = vec![(Vec::new(), Vec::new()); t.flows.len()];
        self
    }

    /// Takes every sample due at or before `at` (ns), reading each port's totals
    /// with `totals` and each flow's bytes read and cwnd with `flow`, which must
    /// give them as they stood since the last call.
    pub fn until(
        &mut self,
        at: u64,
        totals: impl Fn(usize) -> QueueTotals,
        flow: impl Fn(usize) -> (u64, Option<u32>),
    ) {
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
            for (i, (bytes, cwnd)) in self.flows.iter_mut().enumerate() {
                let (b, c) = flow(i);
                bytes.push(b);
                cwnd.push(c);
            }
            self.next_ns += self.interval_ns;
        }
    }

    /// The queues' series taken, and the flows' (named as `t`'s flows).
    pub fn finish(self, t: &Topology) -> (Vec<QueueSeries>, Vec<FlowSeries>) {
        let flows = (self.flows.into_iter().zip(&t.flows))
            .map(|((bytes, cwnd), def)| {
                FlowSeries::from_grid(&def.name, self.interval_ns, bytes, cwnd)
            })
            .collect();
        (self.series, flows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorder_gives_each_point_the_last_value_set_at_or_before_it() {
        // Points at 100, 200, 300 and 400 ns; the run ends at 350.
        let mut r = GridRecorder::new(100, 350, Some(0));
        r.set(50, Some(5));
        r.set(100, Some(7)); // at the point: the point still sees 5
        r.set(250, Some(9));
        r.set(260, None);
        assert_eq!(r.finish(1_000), vec![Some(5), Some(7), None]);
        assert!(GridRecorder::new(0, 350, Some(1)).finish(350).is_empty());
    }

    #[test]
    fn goodput_is_the_bytes_read_in_each_interval() {
        let bytes = vec![0, 125_000, 125_000, 375_000];
        let s = FlowSeries::from_grid(
            "f",
            100_000_000,
            bytes,
            vec![None, Some(10), Some(20), None],
        );
        assert_eq!(s.t_s, vec![0.1, 0.2, 0.3, 0.4]);
        assert_eq!(s.goodput_mbps, vec![0.0, 10.0, 0.0, 20.0]);
        assert_eq!(s.mean_cwnd(0.4), Some(15.0));
        assert_eq!(s.mean_cwnd(0.2), Some(10.0));
        assert_eq!(s.mean_cwnd(0.1), None);
    }
}
