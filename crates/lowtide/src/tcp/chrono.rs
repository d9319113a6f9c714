//! The sender's chronographs (tcp_output.c `tcp_chrono_start`/`tcp_chrono_stop`):
//! how long the connection had data to send (`tcpi_busy_time`) and how much of that
//! the receive window held it back (`tcpi_rwnd_limited`).
//!
//! Linux also times `TCP_CHRONO_SNDBUF_LIMITED`; lowtide does not yet, so that time
//! counts as busy (the total, `tcpi_busy_time`, is the same) and
//! `tcpi_sndbuf_limited` reads 0.

use crate::time::Instant;
use std::time::Duration;

/// `enum tcp_chrono`: a later variant takes precedence over an earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) enum ChronoType {
    /// `TCP_CHRONO_UNSPEC`: nothing to send.
    #[default]
    Unspec,
    /// `TCP_CHRONO_BUSY`: data in flight or queued.
    Busy,
    /// `TCP_CHRONO_RWND_LIMITED`: stalled by the peer's receive window.
    RwndLimited,
}

/// `tp->chrono_start`, `tp->chrono_stat[]`, `tp->chrono_type`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Chrono {
    kind: ChronoType,
    start: Option<Instant>,
    /// Time spent busy and receive-window limited, indexed by `kind - 1`.
    stat: [Duration; 2],
    /// Set by `tcp_write_xmit`'s window test during the current call
    /// (its local `is_rwnd_limited`).
    pub(crate) rwnd_hit: bool,
}

impl Chrono {
    /// `tcp_chrono_set`: closes the running interval and starts `new`.
    fn set(&mut self, now: Instant, new: ChronoType) {
        if let (Some(start), Some(i)) = (self.start, Self::slot(self.kind)) {
            self.stat[i] += now.saturating_since(start);
        }
        self.start = Some(now);
        self.kind = new;
    }

    fn slot(kind: ChronoType) -> Option<usize> {
        match kind {
            ChronoType::Unspec => None,
            ChronoType::Busy => Some(0),
            ChronoType::RwndLimited => Some(1),
        }
    }

    /// `tcp_chrono_start`: a more interesting condition replaces the running one.
    pub(crate) fn start(&mut self, now: Instant, kind: ChronoType) {
        if kind > self.kind {
            self.set(now, kind);
        }
    }

    /// `tcp_chrono_stop`: nothing left to send stops the clock; the end of the
    /// running condition falls back to busy.
    pub(crate) fn stop(&mut self, now: Instant, kind: ChronoType, queues_empty: bool) {
        if queues_empty {
            self.set(now, ChronoType::Unspec);
        } else if kind == self.kind {
            self.set(now, ChronoType::Busy);
        }
    }

    /// `tcp_get_info_chrono_stats`: (`tcpi_busy_time`, `tcpi_rwnd_limited`) in
    /// microseconds, the running interval included; busy time is the total of all.
    pub(crate) fn stats_us(&self, now: Instant) -> (u64, u64) {
        let mut stat = self.stat;
        if let (Some(start), Some(i)) = (self.start, Self::slot(self.kind)) {
            stat[i] += now.saturating_since(start);
        }
        let us = |d: Duration| d.as_micros() as u64;
        (us(stat[0]) + us(stat[1]), us(stat[1]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn rwnd_limited_time_is_part_of_busy_time() {
        // The timeline of packetdrill tcp_info/tcp-info-rwnd-limited.pkt, as Linux's
        // tcp_chrono_* calls see it: data queued into a zero window at 10 ms, window
        // opens at 210 ms, all ACKed at 240 ms.
        let mut c = Chrono::default();
        c.start(at(10), ChronoType::Busy); // tcp_add_write_queue_tail
        c.start(at(10), ChronoType::RwndLimited); // tcp_write_xmit: snd_wnd test
        assert_eq!(c.stats_us(at(110)), (100_000, 100_000));
        c.stop(at(210), ChronoType::RwndLimited, false); // sent: back to busy
        c.start(at(210), ChronoType::Busy); // lower priority: no change
        c.stop(at(240), ChronoType::Busy, true); // tcp_clean_rtx_queue: all ACKed
        assert_eq!(c.stats_us(at(500)), (230_000, 200_000));
    }

    #[test]
    fn stop_of_another_condition_keeps_the_running_one() {
        let mut c = Chrono::default();
        c.start(at(0), ChronoType::RwndLimited);
        c.stop(at(5), ChronoType::Busy, false);
        assert_eq!(c.stats_us(at(10)), (10_000, 10_000));
    }
}
