//! Virtual or real time as the caller passes it in: the engine reads no clock.

use core::ops::{Add, AddAssign, Sub};
use core::time::Duration;

/// A point in time, in nanoseconds since an epoch the caller chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Instant = Instant(0);

    /// From nanoseconds since the epoch.
    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }
    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1_000
    }
    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// `jiffies` at this time: whole ticks of [`HZ`] since the epoch.
    pub const fn jiffies(self) -> u64 {
        self.0 / JIFFY_NS
    }
    /// The start of jiffy `j`.
    pub const fn from_jiffies(j: u64) -> Instant {
        Instant(j.saturating_mul(JIFFY_NS))
    }
    /// Time elapsed since `earlier`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.as_nanos() as u64))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

/// `CONFIG_HZ`: the ticks a second of Linux's `jiffies` as lowtide counts them
/// (1000, so a jiffy is a millisecond): `tcp_jiffies32`, the timer wheel, the
/// socket timeouts in jiffies (`sk_rcvtimeo`, `sk_lingertime`).
pub const HZ: u64 = 1000;
/// A jiffy in nanoseconds.
const JIFFY_NS: u64 = 1_000_000_000 / HZ;
/// `LVL_CLK_SHIFT`: each level of the timer wheel is 8 times coarser than the one
/// below it.
const LVL_CLK_SHIFT: u32 = 3;
/// `LVL_BITS`: 64 buckets a level.
const LVL_BITS: u32 = 6;
/// `LVL_DEPTH` at `HZ` > 100.
const LVL_DEPTH: u32 = 9;

/// `LVL_SHIFT(n)`: level `n`'s granularity is `1 << LVL_SHIFT(n)` jiffies.
const fn lvl_shift(n: u32) -> u32 {
    n * LVL_CLK_SHIFT
}

/// `LVL_START(n)`: the first delta (in jiffies) that level `n` takes.
const fn lvl_start(n: u32) -> u64 {
    ((1 << LVL_BITS) - 1) << ((n - 1) * LVL_CLK_SHIFT)
}

/// `WHEEL_TIMEOUT_CUTOFF`: a delta from here on is queued at the wheel's capacity.
const WHEEL_TIMEOUT_CUTOFF: u64 = lvl_start(LVL_DEPTH);
/// `WHEEL_TIMEOUT_MAX`: the wheel's capacity.
const WHEEL_TIMEOUT_MAX: u64 = WHEEL_TIMEOUT_CUTOFF - (1 << lvl_shift(LVL_DEPTH - 1));

/// When Linux's timer wheel (kernel/time/timer.c) runs a `timer_list` timer armed
/// at `now` for `expires`: `calc_wheel_index` picks the level by how far the expiry
/// is (levels 8 times coarser each, 64 buckets each) and `calc_index` rounds the
/// expiry up to the level's next bucket, so that a timer never runs early. At
/// level 0 (under 63 jiffies away) it runs on the tick after its expiry jiffy; at
/// level 1 up to 8 jiffies after, at level 2 up to 64, at most 12.5 % of the delay.
/// Jiffies are `HZ` = 1000 ticks of lowtide's clock; an expiry already past runs on
/// the next tick. TCP's retransmit, delayed-ACK, keepalive and timewait timers are
/// `timer_list`s; pacing and SACK compression use exact hrtimers.
pub fn timer_list_runs(now: Instant, expires: Instant) -> Instant {
    let (clk, jiffies) = (now.jiffies(), expires.jiffies());
    let Some(delta) = jiffies.checked_sub(clk) else {
        return Instant::from_jiffies(clk + 1);
    };
    let bucket = |expires: u64, lvl: u32| ((expires >> lvl_shift(lvl)) + 1) << lvl_shift(lvl);
    let runs = match (0..LVL_DEPTH - 1).find(|&lvl| delta < lvl_start(lvl + 1)) {
        Some(lvl) => bucket(jiffies, lvl),
        None if delta >= WHEEL_TIMEOUT_CUTOFF => bucket(clk + WHEEL_TIMEOUT_MAX, LVL_DEPTH - 1),
        None => bucket(jiffies, LVL_DEPTH - 1),
    };
    Instant::from_jiffies(runs)
}

/// One `timer_list` timer as the wheel holds it: the expiry it was last armed for
/// and when that expiry's bucket runs. Arming it again for the same expiry keeps
/// the bucket (`mod_timer`'s `timer->expires == expires` shortcut).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerList {
    expires: Option<Instant>,
    runs: Instant,
}

impl TimerList {
    /// `mod_timer(timer, expires)` at `now` (`del_timer` for `None`), when the
    /// expiry changed since the last call.
    pub fn sync(&mut self, now: Instant, expires: Option<Instant>) {
        if self.expires != expires {
            self.expires = expires;
            if let Some(e) = expires {
                self.runs = timer_list_runs(now, e);
            }
        }
    }

    /// When the timer armed for `expires` runs: its bucket once [`TimerList::sync`]
    /// saw that expiry, else the expiry itself (armed since, within the same
    /// instant).
    pub fn runs(&self, expires: Option<Instant>) -> Option<Instant> {
        let e = expires?;
        Some(if self.expires == Some(e) {
            self.runs
        } else {
            e
        })
    }
}

impl core::fmt::Display for Instant {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}.{:06}s",
            self.0 / 1_000_000_000,
            (self.0 / 1_000) % 1_000_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Instant {
        Instant(v * JIFFY_NS)
    }

    #[test]
    fn level_zero_runs_on_the_tick_after_the_expiry() {
        assert_eq!(timer_list_runs(ms(1000), ms(1040)), ms(1041));
        assert_eq!(timer_list_runs(ms(1000), ms(1000)), ms(1001));
        // Armed mid-jiffy: the expiry is jiffies + timeout, as `jiffies + when`.
        let now = Instant(1000 * JIFFY_NS + 400_000);
        assert_eq!(
            timer_list_runs(now, now + Duration::from_millis(62)),
            ms(1063)
        );
        // Past: the next tick.
        assert_eq!(timer_list_runs(ms(1000), ms(990)), ms(1001));
    }

    #[test]
    fn outer_levels_round_up_to_their_granularity() {
        // 63 jiffies away is level 1 (8 jiffies): 1063 -> the bucket at 1064.
        assert_eq!(timer_list_runs(ms(1000), ms(1063)), ms(1064));
        assert_eq!(timer_list_runs(ms(1000), ms(1064)), ms(1072));
        assert_eq!(timer_list_runs(ms(1000), ms(1200)), ms(1208));
        // 504 jiffies away is level 2 (64 jiffies).
        assert_eq!(timer_list_runs(ms(0), ms(504)), ms(512));
        assert_eq!(timer_list_runs(ms(0), ms(1000)), ms(1024));
        assert_eq!(timer_list_runs(ms(100), ms(3100)), ms(3136));
        // Level 3 from 4032 jiffies (512-jiffy buckets).
        assert_eq!(timer_list_runs(ms(0), ms(7200)), ms(7680));
        // Never early, and late by at most a level's granularity, under 1/7 of
        // the delay (granularity / LVL_START = 8/63).
        for delay in [
            1u64, 40, 62, 63, 200, 503, 504, 1000, 3000, 4031, 4032, 75_000,
        ] {
            for start in [0u64, 3, 517, 99_999] {
                let runs = timer_list_runs(ms(start), ms(start + delay)).0 / JIFFY_NS;
                assert!(runs > start + delay, "{start} {delay}");
                assert!(
                    runs - (start + delay) <= delay.div_ceil(7),
                    "{start} {delay}"
                );
            }
        }
    }

    #[test]
    fn obscene_timeouts_run_at_the_wheel_capacity() {
        let far = ms(u64::MAX / JIFFY_NS / 2);
        let runs = timer_list_runs(ms(0), far).0 / JIFFY_NS;
        assert_eq!(runs, ((WHEEL_TIMEOUT_MAX >> 24) + 1) << 24);
    }

    #[test]
    fn rearming_for_the_same_expiry_keeps_the_bucket() {
        let mut t = TimerList::default();
        t.sync(ms(0), Some(ms(200)));
        assert_eq!(t.runs(Some(ms(200))), Some(ms(208)));
        // Later, the same expiry: the bucket stays (delta now on level 0).
        t.sync(ms(150), Some(ms(200)));
        assert_eq!(t.runs(Some(ms(200))), Some(ms(208)));
        // A new expiry is bucketed from the time it is armed.
        t.sync(ms(150), Some(ms(201)));
        assert_eq!(t.runs(Some(ms(201))), Some(ms(202)));
        // Not synced yet: the expiry itself.
        assert_eq!(t.runs(Some(ms(300))), Some(ms(300)));
        assert_eq!(t.runs(None), None);
        t.sync(ms(150), None);
        assert_eq!(t.runs(Some(ms(201))), Some(ms(201)));
    }
}
