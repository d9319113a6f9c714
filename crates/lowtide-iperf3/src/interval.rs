//! Interval statistics (`-i`) and the omitted start of a test (`-O`): iperf3's stats
//! timer (`iperf_stats_callback` every interval), its omit timer (`iperf_reset_stats`
//! when omitting ends) and the intervals they record, on either side of a test.

use std::time::Duration;

use crate::sockets::{ConnStats, Sockets};
use crate::stream::Transfer;

/// One stream's share of an interval (`iperf_interval_results`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalResults {
    /// iperf3's stream id.
    pub id: u32,
    /// Bytes sent or received in the interval.
    pub bytes: u64,
    /// The sender's retransmits in the interval (`None` on the receiving side).
    pub retransmits: Option<u64>,
    /// The connection's statistics at the end of the interval (`snd_cwnd`, `rtt`).
    pub stats: ConnStats,
}

/// One interval of a test, all streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// Seconds from the start of the counted period (the test's start, or the end of
    /// the omitted period) to the interval's start.
    pub start: f64,
    /// Seconds from the same origin to the interval's end.
    pub end: f64,
    /// The interval lies in the omitted period (`-O`).
    pub omitted: bool,
    /// This side sent.
    pub sender: bool,
    /// Per-stream figures, in stream order.
    pub streams: Vec<IntervalResults>,
}

impl Interval {
    /// The interval's length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end - self.start
    }

    /// Bytes over all streams.
    pub fn bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }

    /// Retransmits over all streams (the sending side only).
    pub fn retransmits(&self) -> Option<u64> {
        self.streams.iter().map(|s| s.retransmits).sum()
    }

    /// The first interval of its period (iperf3 prints the column header there).
    pub fn first(&self) -> bool {
        self.start <= 0.0
    }
}

/// The stats and omit timers of one test.
#[derive(Debug, Default)]
pub(crate) struct Reporter {
    /// `-i` (none: no intervals).
    every: Option<Duration>,
    /// `-O`.
    omit: Duration,
    /// The test's start.
    start: Option<Duration>,
    /// Origin of the counted period: the start, then the end of omitting.
    origin: Duration,
    /// End of the last interval.
    last: Duration,
    /// The next interval ends here.
    next: Option<Duration>,
    omitting: bool,
    /// Every interval so far.
    pub intervals: Vec<Interval>,
    /// Intervals before this index have been taken by the driver.
    taken: usize,
}

impl Reporter {
    pub(crate) fn new(every: Option<Duration>, omit: Duration) -> Reporter {
        Reporter {
            every: every.filter(|d| !d.is_zero()),
            omit,
            ..Reporter::default()
        }
    }

    /// The test starts (`TEST_START`).
    pub(crate) fn begin(&mut self, now: Duration) {
        self.start = Some(now);
        self.origin = now;
        self.last = now;
        self.next = self.every.map(|i| now + i);
        self.omitting = !self.omit.is_zero();
    }

    /// Where counted time starts: the test's start, or the end of omitting.
    pub(crate) fn origin(&self) -> Option<Duration> {
        self.start.map(|_| self.origin)
    }

    /// When the next timer fires.
    pub(crate) fn wake_at(&self) -> Option<Duration> {
        let omit_end = self.start.filter(|_| self.omitting).map(|s| s + self.omit);
        match (self.next, omit_end) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires the timers that are due: intervals, then the end of omitting.
    pub(crate) fn tick<C, N>(&mut self, xfer: &mut Transfer<C>, net: &N, now: Duration)
    where
        C: Copy + core::fmt::Debug,
        N: Sockets<Conn = C>,
    {
        let Some(start) = self.start else { return };
        if let (Some(next), Some(every)) = (self.next, self.every) {
            if next <= now {
                self.record(xfer, net, now);
                // The timer is periodic from the start; a late poll skips no bytes.
                let behind = (now - next).as_nanos() / every.as_nanos() + 1;
                self.next = Some(next + every * behind as u32);
            }
        }
        if self.omitting && now >= start + self.omit {
            // Bytes since the last interval belong to the omitted period.
            self.omitting = false;
            xfer.sample(net);
            xfer.reset_stats(net);
            self.origin = start + self.omit;
            self.last = self.origin;
        }
    }

    /// The test ends: the last, partial interval, if it is not a sliver (iperf3
    /// drops a final interval under a tenth of `-i`).
    pub(crate) fn finish<C, N>(&mut self, xfer: &mut Transfer<C>, net: &N, now: Duration)
    where
        C: Copy + core::fmt::Debug,
        N: Sockets<Conn = C>,
    {
        let Some(every) = self.every else { return };
        if self.start.is_some() && now.saturating_sub(self.last) >= every / 10 {
            self.record(xfer, net, now);
        }
        self.next = None;
    }

    fn record<C, N>(&mut self, xfer: &mut Transfer<C>, net: &N, at: Duration)
    where
        C: Copy + core::fmt::Debug,
        N: Sockets<Conn = C>,
    {
        let secs = |t: Duration| t.saturating_sub(self.origin).as_secs_f64();
        self.intervals.push(Interval {
            start: secs(self.last),
            end: secs(at),
            omitted: self.omitting,
            sender: xfer.sending,
            streams: xfer.sample(net),
        });
        self.last = at;
    }

    /// The intervals recorded since the last call.
    pub(crate) fn take_new(&mut self) -> Vec<Interval> {
        let new = self.intervals[self.taken..].to_vec();
        self.taken = self.intervals.len();
        new
    }
}
