//! Kathleen Nichols' windowed min/max tracker, Linux's lib/win_minmax.c.
//!
//! Keeps the best, second-best and third-best values seen in the window, each with
//! the time it was measured, so the windowed extreme is found in O(1) time and space.
//! "Time" is whatever unit the caller uses (BBR uses round-trip counts).

/// One measurement (`struct minmax_sample`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// When it was taken.
    pub t: u32,
    /// The value.
    pub v: u32,
}

/// `struct minmax`: the three best samples of the window, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinMax {
    s: [Sample; 3],
}

impl MinMax {
    /// `minmax_get`: the windowed extreme.
    pub fn get(&self) -> u32 {
        self.s[0].v
    }

    /// `minmax_reset`: forgets everything but `meas` taken at `t`.
    pub fn reset(&mut self, t: u32, meas: u32) -> u32 {
        self.s = [Sample { t, v: meas }; 3];
        self.s[0].v
    }

    /// `minmax_running_max`: adds `meas` taken at `t` to a max filter of window `win`.
    pub fn running_max(&mut self, win: u32, t: u32, meas: u32) -> u32 {
        let val = Sample { t, v: meas };
        if val.v >= self.s[0].v || val.t.wrapping_sub(self.s[2].t) > win {
            return self.reset(t, meas); // a new max, or nothing left in the window
        }
        if val.v >= self.s[1].v {
            self.s[2] = val;
            self.s[1] = val;
        } else if val.v >= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    /// `minmax_running_min`: adds `meas` taken at `t` to a min filter of window `win`.
    pub fn running_min(&mut self, win: u32, t: u32, meas: u32) -> u32 {
        let val = Sample { t, v: meas };
        if val.v <= self.s[0].v || val.t.wrapping_sub(self.s[2].t) > win {
            return self.reset(t, meas);
        }
        if val.v <= self.s[1].v {
            self.s[2] = val;
            self.s[1] = val;
        } else if val.v <= self.s[2].v {
            self.s[2] = val;
        }
        self.subwin_update(win, val)
    }

    /// `minmax_subwin_update`: ages the best samples out of the window and takes
    /// fresh second and third choices from later quarters of it.
    fn subwin_update(&mut self, win: u32, val: Sample) -> u32 {
        let dt = val.t.wrapping_sub(self.s[0].t);
        if dt > win {
            // The best is out of the window: promote the others (maybe twice).
            self.s = [self.s[1], self.s[2], val];
            if val.t.wrapping_sub(self.s[0].t) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].t == self.s[0].t && dt > win / 4 {
            // A quarter of the window without a new best: a second choice from the
            // second quarter.
            self.s[2] = val;
            self.s[1] = val;
        } else if self.s[2].t == self.s[1].t && dt > win / 2 {
            // Half the window: a third choice from the second half.
            self.s[2] = val;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_filter_forgets_after_the_window() {
        let mut m = MinMax::default();
        m.reset(0, 0);
        // Window of 10 rounds: 100 at round 0, then smaller values each round.
        assert_eq!(m.running_max(10, 0, 100), 100);
        for t in 1..=10 {
            assert_eq!(
                m.running_max(10, t, 50 + t),
                100,
                "round {t}: 100 still in window"
            );
        }
        // Round 11: 100 (round 0) is more than 10 rounds old; the best remaining
        // choice is the newest of the rising values kept as second/third choice
        // (60, round 10).
        assert_eq!(m.running_max(10, 11, 40), 60);
        // A larger value replaces everything at once.
        assert_eq!(m.running_max(10, 12, 500), 500);
        // A gap longer than the window drops all old samples.
        assert_eq!(m.running_max(10, 30, 7), 7);
    }

    #[test]
    fn max_filter_keeps_later_choices() {
        let mut m = MinMax::default();
        m.reset(0, 0);
        m.running_max(10, 0, 100);
        m.running_max(10, 3, 80); // after win/4: second choice
        m.running_max(10, 6, 60); // after win/2: third choice
        assert_eq!(
            m.running_max(10, 11, 10),
            80,
            "100 expired, 80 (round 3) next"
        );
        assert_eq!(
            m.running_max(10, 14, 10),
            60,
            "80 expired, 60 (round 6) next"
        );
    }

    #[test]
    fn min_filter() {
        let mut m = MinMax::default();
        m.reset(0, 1000);
        assert_eq!(m.running_min(10, 1, 900), 900);
        assert_eq!(m.running_min(10, 2, 950), 900);
        assert_eq!(m.running_min(10, 20, 950), 950, "900 expired");
    }
}
