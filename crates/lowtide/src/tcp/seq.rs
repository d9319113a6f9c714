//! Sequence numbers
//! ([RFC 9293 section 3.4](https://www.rfc-editor.org/rfc/rfc9293#section-3.4)): 32-bit,
//! compared modulo 2^32.
//!
//! The engine keeps sequence positions internally as 64-bit stream offsets that never
//! wrap ([`unwrap`]); [`Seq`] exists only at the wire boundary. `Seq` has no `Ord`:
//! comparisons are [`Seq::before`]/[`Seq::after`], which are only meaningful for
//! numbers less than 2^31 apart.

use core::ops::{Add, Sub};

/// A 32-bit TCP sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Seq(pub u32);

impl Seq {
    /// `self` comes strictly before `other` (Linux `before()`).
    #[inline]
    pub fn before(self, other: Seq) -> bool {
        (self.0.wrapping_sub(other.0) as i32) < 0
    }
    /// `self` comes strictly after `other` (Linux `after()`).
    #[inline]
    pub fn after(self, other: Seq) -> bool {
        other.before(self)
    }
    /// Signed distance `self - other`.
    #[inline]
    pub fn diff(self, other: Seq) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
}

impl Add<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn add(self, n: u32) -> Seq {
        Seq(self.0.wrapping_add(n))
    }
}

impl Sub<u32> for Seq {
    type Output = Seq;
    #[inline]
    fn sub(self, n: u32) -> Seq {
        Seq(self.0.wrapping_sub(n))
    }
}

/// The 64-bit stream offset of wire number `seq`, given a reference pair
/// (`ref_seq` is the wire number of offset `ref_off`) less than 2^31 away.
#[inline]
pub fn unwrap(seq: Seq, ref_seq: Seq, ref_off: u64) -> u64 {
    ref_off.wrapping_add(seq.diff(ref_seq) as i64 as u64)
}

/// The wire number of stream offset `off`, where offset 0 is `base`.
#[inline]
pub fn wrap(off: u64, base: Seq) -> Seq {
    base + off as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn before_after_antisymmetric(a: u32, d in 1u32..0x7fff_ffff) {
            let x = Seq(a);
            let y = x + d;
            prop_assert!(x.before(y));
            prop_assert!(y.after(x));
            prop_assert!(!y.before(x));
            prop_assert!(!x.before(x) && !x.after(x));
        }

        #[test]
        fn add_sub_inverse(a: u32, n: u32) {
            prop_assert_eq!((Seq(a) + n) - n, Seq(a));
            prop_assert_eq!((Seq(a) + n).diff(Seq(a)), n as i32);
        }

        #[test]
        fn wrap_unwrap_round_trip(base: u32, off in 0u64..(1 << 40), delta in -0x7fff_0000i64..0x7fff_0000) {
            let base = Seq(base);
            let target = (off as i64 + delta).max(0) as u64;
            let w = wrap(target, base);
            prop_assert_eq!(unwrap(w, wrap(off, base), off), target);
        }
    }

    #[test]
    fn wraps_at_2_32() {
        assert!(Seq(0xffff_fff0).before(Seq(0x10)));
        assert_eq!(Seq(0x10).diff(Seq(0xffff_fff0)), 0x20);
    }
}
