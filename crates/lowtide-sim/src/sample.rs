//! Sampling of the sender's TCP memory on a fixed virtual-time grid.
//!
//! The stack's memory ([`lowtide::Stack::tcp_memory`]) changes only when an event is
//! processed, so the value at a grid point is the one left by the last event before
//! it. The event loop asks [`MemorySampler::due`] before each event and, when grid
//! points were passed, reads the memory once and records it for all of them. A grid
//! point costs one comparison unless it is due, and a read of the memory (one pass
//! over the host's sockets) when it is.

use serde::Serialize;

/// Shortest automatic sampling interval (ns).
pub const MIN_INTERVAL_NS: u64 = 100_000;
/// Longest automatic sampling interval (ns).
pub const MAX_INTERVAL_NS: u64 = 1_000_000;

/// The automatic sampling interval for a path of round-trip time `rtt_ns`: a tenth
/// of the RTT, within 100 µs..=1 ms.
pub fn auto_interval(rtt_ns: u64) -> u64 {
    (rtt_ns / 10).clamp(MIN_INTERVAL_NS, MAX_INTERVAL_NS)
}

/// Memory figures of the sending host (the `memory` object of the results).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct MemoryResult {
    /// Largest sampled stack-wide TCP memory of host A (4 KB pages, `sockstat` "mem").
    pub peak_pages: u64,
    /// Time average of the same (mean over the grid samples).
    pub mean_pages: f64,
    /// Largest sampled `sum over flows of sk_wmem_queued / flows` (bytes).
    pub peak_wmem_queued_per_flow: u64,
    /// Time average of the same (bytes).
    pub mean_wmem_queued_per_flow: f64,
    /// Grid samples taken.
    pub samples: u64,
    /// The grid's interval (µs).
    pub sample_interval_us: f64,
}

/// Running figures over the grid samples `0, Δ, 2Δ, ...` before the end of the run.
#[derive(Debug, Clone)]
pub struct MemorySampler {
    interval_ns: u64,
    next_ns: u64,
    samples: u64,
    pages_sum: u128,
    peak_pages: u64,
    wmem_sum: u128,
    peak_wmem: u64,
}

impl MemorySampler {
    /// A sampler with grid interval `interval_ns` (at least 1 ns), first point at 0.
    pub fn new(interval_ns: u64) -> MemorySampler {
        MemorySampler {
            interval_ns: interval_ns.max(1),
            next_ns: 0,
            samples: 0,
            pages_sum: 0,
            peak_pages: 0,
            wmem_sum: 0,
            peak_wmem: 0,
        }
    }

    /// Grid points before `now_ns` have not been recorded yet.
    #[inline]
    pub fn due(&self, now_ns: u64) -> bool {
        self.next_ns < now_ns
    }

    /// Records `pages` and `wmem_queued` (the state since the last event) for every
    /// grid point before `until_ns`.
    pub fn record(&mut self, until_ns: u64, pages: u64, wmem_queued: u64) {
        if !self.due(until_ns) {
            return;
        }
        let points = (until_ns - 1 - self.next_ns) / self.interval_ns + 1;
        self.next_ns += points * self.interval_ns;
        self.samples += points;
        self.pages_sum += pages as u128 * points as u128;
        self.wmem_sum += wmem_queued as u128 * points as u128;
        self.peak_pages = self.peak_pages.max(pages);
        self.peak_wmem = self.peak_wmem.max(wmem_queued);
    }

    /// The figures, with the send-queue bytes divided among `flows` flows.
    pub fn result(&self, flows: u32) -> MemoryResult {
        let n = self.samples.max(1) as f64;
        let flows = flows.max(1);
        MemoryResult {
            peak_pages: self.peak_pages,
            mean_pages: self.pages_sum as f64 / n,
            peak_wmem_queued_per_flow: self.peak_wmem / flows as u64,
            mean_wmem_queued_per_flow: self.wmem_sum as f64 / n / flows as f64,
            samples: self.samples,
            sample_interval_us: self.interval_ns as f64 / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_is_a_tenth_of_the_rtt_within_bounds() {
        assert_eq!(auto_interval(0), 100_000);
        assert_eq!(auto_interval(1_000_000), 100_000);
        assert_eq!(auto_interval(5_000_000), 500_000);
        assert_eq!(auto_interval(100_000_000), 1_000_000);
    }

    #[test]
    fn grid_points_get_the_state_left_by_the_last_event() {
        let mut s = MemorySampler::new(10);
        // Events at 0 (nothing due yet: the point at 0 is not before 0).
        assert!(!s.due(0));
        // The next event is at 25: points 0, 10, 20 saw the state of t = 0 (empty).
        assert!(s.due(25));
        s.record(25, 0, 0);
        // Next event at 30: point 30 is not before 30, nothing due.
        assert!(!s.due(30));
        // The event at 30 left 4 pages, 8000 bytes; the next one is at 61: points
        // 30, 40, 50, 60.
        s.record(61, 4, 8000);
        // The end of the run at 80: point 70 saw 2 pages, 1000 bytes.
        s.record(80, 2, 1000);
        s.record(80, 9, 9999); // nothing left before 80
        let r = s.result(2);
        assert_eq!(r.samples, 8);
        assert_eq!(r.peak_pages, 4);
        assert!((r.mean_pages - 18.0 / 8.0).abs() < 1e-12);
        assert_eq!(r.peak_wmem_queued_per_flow, 4000);
        assert!((r.mean_wmem_queued_per_flow - 33_000.0 / 8.0 / 2.0).abs() < 1e-9);
    }
}
