//! iperf3's reports of a run: the per-interval figures (`iperf3 -i`, JSON
//! `intervals`) and the end summary (JSON `end`), in iperf3's JSON shape.
//!
//! The sender's figures are what its `tcp_info` says (`tcpi_bytes_acked`,
//! `tcpi_total_retrans`, `tcpi_snd_cwnd` × `tcpi_snd_mss`, `tcpi_rtt`): the bytes a
//! sender reports are the bytes the receiver acknowledged, so they never exceed the
//! bytes the receiver reports (read by the application) and differ from them only by
//! what was in flight when the measured time ended. As for the time series
//! ([`crate::timeseries`]), the state at a grid point is the one the last event
//! before it left.

use crate::timeseries::Grid;
use serde::Serialize;

/// A sender's cumulative counters at one point in time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderPoint {
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_total_retrans` (segments).
    pub retrans: u64,
    /// `tcpi_snd_cwnd` × `tcpi_snd_mss` (bytes, as iperf3's `snd_cwnd`).
    pub snd_cwnd: u64,
    /// `tcpi_rtt` (µs).
    pub rtt_us: u64,
    /// `tcpi_rttvar` (µs).
    pub rttvar_us: u64,
    /// `tcpi_pmtu`.
    pub pmtu: u64,
}

/// Snapshots of every flow's sender on an interval grid, taken during the run.
#[derive(Debug, Clone)]
pub(crate) struct IntervalSampler {
    pub grid: Grid,
    /// (grid point, one point per flow), grid point 0 excluded.
    pub points: Vec<(u64, Vec<SenderPoint>)>,
}

impl IntervalSampler {
    pub fn new(interval_ns: u64) -> IntervalSampler {
        IntervalSampler {
            grid: Grid::new(interval_ns.max(1)),
            points: Vec::new(),
        }
    }
}

/// One flow in one interval (iperf3's `intervals[].streams[]`: an
/// `iperf_interval_results` as `print_interval_results` writes it into JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonIntervalStream {
    /// The flow id (iperf3's `socket`; the `[ID]` column of the text).
    pub socket: u32,
    /// Start of the interval (s of measured time).
    pub start: f64,
    /// End of the interval (s).
    pub end: f64,
    /// `end - start`.
    pub seconds: f64,
    /// Bytes the receiver acknowledged in the interval.
    pub bytes: u64,
    /// `bytes` × 8 / `seconds`.
    pub bits_per_second: f64,
    /// Segments retransmitted in the interval.
    pub retransmits: u64,
    /// Congestion window at the end of the interval (bytes).
    pub snd_cwnd: u64,
    /// Smoothed RTT at the end of the interval (µs).
    pub rtt: u64,
    /// RTT variance at the end of the interval (µs).
    pub rttvar: u64,
    /// Path MTU.
    pub pmtu: u64,
    /// Always false (no `-O` in the simulator).
    pub omitted: bool,
    /// Always true: the figures are the sender's.
    pub sender: bool,
}

/// The flows together in one interval (iperf3's `intervals[].sum`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonIntervalSum {
    /// Start (s).
    pub start: f64,
    /// End (s).
    pub end: f64,
    /// `end - start`.
    pub seconds: f64,
    /// Bytes acknowledged, all flows.
    pub bytes: u64,
    /// `bytes` × 8 / `seconds`.
    pub bits_per_second: f64,
    /// Segments retransmitted, all flows.
    pub retransmits: u64,
    /// Always false.
    pub omitted: bool,
    /// Always true.
    pub sender: bool,
}

/// One interval (iperf3's `intervals[]`, `iperf_print_intermediate`'s `json_interval`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JsonInterval {
    /// One entry per flow, in flow order.
    pub streams: Vec<JsonIntervalStream>,
    /// Their sum.
    pub sum: JsonIntervalSum,
}

/// One side's total for one flow or the sum (iperf3's `end.streams[].sender`,
/// `.receiver`, `end.sum_sent`, `end.sum_received`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndFigures {
    /// The flow id (absent in the sums).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<u32>,
    /// Start (s): 0.
    pub start: f64,
    /// End of the measured time (s): the duration, or for a fixed-size transfer the
    /// arrival of the flow's last byte (of the last flow's, in the sums).
    pub end: f64,
    /// `end - start`.
    pub seconds: f64,
    /// Sender: bytes acknowledged by the end; receiver: bytes read by the end.
    pub bytes: u64,
    /// Bits per second over the flow's measured time (from its connect call).
    pub bits_per_second: f64,
    /// Segments retransmitted (sender only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// True for the sender's figures.
    pub sender: bool,
}

/// Both sides of one flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EndStream {
    /// What the sending host's socket reports.
    pub sender: EndFigures,
    /// What the receiving application read.
    pub receiver: EndFigures,
}

/// iperf3's `end`: per-flow totals of both sides and their sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EndSummary {
    /// One entry per flow.
    pub streams: Vec<EndStream>,
    /// The senders' totals.
    pub sum_sent: Option<EndFigures>,
    /// The receivers' totals.
    pub sum_received: Option<EndFigures>,
}

/// Bits per second for `bytes` in `ns` (0 for an empty span).
pub(crate) fn bps(bytes: u64, ns: u64) -> f64 {
    match ns {
        0 => 0.0,
        _ => bytes as f64 * 8.0 * 1e9 / ns as f64,
    }
}

/// The intervals of a run whose measured time ended at `end_ns`: the sampler's grid
/// points before `end_ns`, then `end_ns` itself with the senders' `last` state.
pub(crate) fn build(s: &IntervalSampler, end_ns: u64, last: &[SenderPoint]) -> Vec<JsonInterval> {
    let mut marks: Vec<(u64, &[SenderPoint])> = (s.points.iter())
        .filter(|(t, _)| *t > 0 && *t < end_ns)
        .map(|(t, p)| (*t, p.as_slice()))
        .collect();
    if end_ns > 0 {
        marks.push((end_ns, last));
    }
    let zero = vec![SenderPoint::default(); last.len()];
    let mut prev: (u64, &[SenderPoint]) = (0, &zero);
    let mut out = Vec::with_capacity(marks.len());
    for (t, pts) in marks {
        let span = t - prev.0;
        let (start, end) = (prev.0 as f64 / 1e9, t as f64 / 1e9);
        let streams: Vec<JsonIntervalStream> = (pts.iter().zip(prev.1))
            .enumerate()
            .map(|(i, (p, q))| {
                let bytes = p.bytes_acked.saturating_sub(q.bytes_acked);
                JsonIntervalStream {
                    socket: i as u32,
                    start,
                    end,
                    seconds: end - start,
                    bytes,
                    bits_per_second: bps(bytes, span),
                    retransmits: p.retrans.saturating_sub(q.retrans),
                    snd_cwnd: p.snd_cwnd,
                    rtt: p.rtt_us,
                    rttvar: p.rttvar_us,
                    pmtu: p.pmtu,
                    omitted: false,
                    sender: true,
                }
            })
            .collect();
        let bytes = streams.iter().map(|x| x.bytes).sum();
        let sum = JsonIntervalSum {
            start,
            end,
            seconds: end - start,
            bytes,
            bits_per_second: bps(bytes, span),
            retransmits: streams.iter().map(|x| x.retransmits).sum(),
            omitted: false,
            sender: true,
        };
        out.push(JsonInterval { streams, sum });
        prev = (t, pts);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(bytes_acked: u64, retrans: u64) -> SenderPoint {
        SenderPoint {
            bytes_acked,
            retrans,
            ..SenderPoint::default()
        }
    }

    #[test]
    fn intervals_are_deltas_and_end_at_the_measured_end() {
        let mut s = IntervalSampler::new(1_000_000_000);
        s.points.push((0, vec![pt(0, 0), pt(0, 0)]));
        s.points.push((1_000_000_000, vec![pt(100, 1), pt(50, 0)]));
        s.points.push((2_000_000_000, vec![pt(300, 1), pt(50, 2)]));
        // A point at or after the end is not an interval boundary.
        s.points.push((2_500_000_000, vec![pt(900, 9), pt(900, 9)]));
        let iv = build(&s, 2_500_000_000, &[pt(400, 3), pt(60, 2)]);
        assert_eq!(iv.len(), 3);
        let bytes: Vec<Vec<u64>> = (iv.iter())
            .map(|i| i.streams.iter().map(|x| x.bytes).collect())
            .collect();
        assert_eq!(bytes, vec![vec![100, 50], vec![200, 0], vec![100, 10]]);
        assert_eq!(iv[1].sum.retransmits, 2);
        assert_eq!(iv[2].sum.start, 2.0);
        assert_eq!(iv[2].sum.end, 2.5);
        assert_eq!(iv[2].sum.bits_per_second, 110.0 * 8.0 / 0.5);
        assert_eq!(iv.iter().map(|i| i.sum.bytes).sum::<u64>(), 460);
    }
}
