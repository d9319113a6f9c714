//! The sender's chronographs (tcp_output.c `tcp_chrono_start`/`tcp_chrono_stop`):
//! how long the connection was busy sending, limited by the peer's window, or
//! limited by the send buffer, as `tcpi_busy_time`, `tcpi_rwnd_limited` and
//! `tcpi_sndbuf_limited` report them. Kept in jiffies (ms), as Linux does.

use super::sock::Tcb;
pub(crate) use super::sock::{Chrono, Chronos};
use crate::time::Instant;

impl Chronos {
    /// `tcp_chrono_set`.
    fn set(&mut self, now: Instant, new: Chrono) {
        let now_ms = now.as_millis();
        if self.kind > Chrono::Unspec {
            self.stat_ms[self.kind as usize - 1] += now_ms.saturating_sub(self.start_ms);
        }
        self.start_ms = now_ms;
        self.kind = new;
    }

    /// `tcp_chrono_stop` with both queues empty: no chrono runs.
    pub(crate) fn stop_all(&mut self, now: Instant) {
        self.set(now, Chrono::Unspec);
    }

    /// `tcp_get_info_chrono_stats`: (busy, rwnd limited, sndbuf limited) in
    /// microseconds; busy is the total of all three.
    pub(crate) fn stats_us(&self, now: Instant) -> (u64, u64, u64) {
        let mut s = self.stat_ms;
        if self.kind > Chrono::Unspec {
            s[self.kind as usize - 1] += now.as_millis().saturating_sub(self.start_ms);
        }
        ((s[0] + s[1] + s[2]) * 1000, s[1] * 1000, s[2] * 1000)
    }
}

impl Tcb {
    /// `tcp_chrono_start`: a more interesting condition replaces the current one.
    pub(crate) fn chrono_start(&mut self, now: Instant, kind: Chrono) {
        if kind > self.chrono.kind {
            self.chrono.set(now, kind);
        }
    }

    /// `tcp_chrono_stop`: with nothing left to send, no chrono runs; else, if `kind`
    /// was the one running, the connection is back to busy.
    pub(crate) fn chrono_stop(&mut self, now: Instant, kind: Chrono) {
        if self.write_queue.is_empty() && self.rtx.is_empty() {
            self.chrono.set(now, Chrono::Unspec);
        } else if kind == self.chrono.kind {
            self.chrono.set(now, Chrono::Busy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn rwnd_limited_then_busy_then_idle() {
        // tcp_chrono_start/stop and tcp_get_info_chrono_stats: busy_time is the total
        // of every chrono, rwnd_limited only its own.
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.write_queue
            .push_back(crate::tcp::rtx::skb::WriteSkb::copied(
                1,
                bytes::BytesMut::from(&[0u8; 10][..]).into(),
                0,
            ));
        t.chrono_start(ms(10), Chrono::Busy);
        t.chrono_start(ms(10), Chrono::RwndLimited);
        assert_eq!(t.chrono.stats_us(ms(110)), (100_000, 100_000, 0));
        t.chrono_start(ms(110), Chrono::Busy); // lower: ignored
        t.chrono_stop(ms(210), Chrono::RwndLimited);
        assert_eq!(t.chrono.stats_us(ms(240)), (230_000, 200_000, 0));
        t.write_queue.clear();
        t.chrono_stop(ms(240), Chrono::Busy);
        assert_eq!(
            t.chrono.stats_us(ms(500)),
            (230_000, 200_000, 0),
            "idle is not busy"
        );
    }
}
