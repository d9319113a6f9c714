//! Spread over repetitions: mean and a 95 % confidence interval (Student's t) of a
//! figure, and a bootstrap interval for a ratio of two variants' means or sums.
//! The bootstrap draws from a generator seeded by the figure's label, so the same
//! results file renders the same report.

/// A figure over n repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Repetitions.
    pub n: usize,
    /// Their mean.
    pub mean: f64,
    /// Half-width of the 95 % confidence interval of the mean (None for n < 2).
    pub half: Option<f64>,
    /// Smallest and largest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// t quantile for a 95 % interval with `df` degrees of freedom (normal beyond 30).
fn t975(df: usize) -> f64 {
    match df {
        0 => f64::NAN,
        d if d <= 30 => T975[d - 1],
        _ => 1.960,
    }
}

/// Mean, 95 % CI and range of `xs` (None if empty).
pub fn summary(xs: &[f64]) -> Option<Summary> {
    let n = xs.len();
    if n == 0 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let half = (n >= 2).then(|| {
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        t975(n - 1) * (var / n as f64).sqrt()
    });
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(Summary {
        n,
        mean,
        half,
        min,
        max,
    })
}

/// How the repetitions of a variant combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    /// Their mean.
    Mean,
    /// Their sum (seed 003's "sum of 10 runs").
    Sum,
}

fn combine(xs: &[f64], agg: Agg) -> f64 {
    let s = xs.iter().sum::<f64>();
    match agg {
        Agg::Sum => s,
        Agg::Mean => s / xs.len().max(1) as f64,
    }
}

/// Resamples per bootstrap interval.
const RESAMPLES: usize = 4000;

/// splitmix64: the bootstrap's generator.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of `label`: the bootstrap's seed.
fn seed_of(label: &str) -> u64 {
    (label.bytes()).fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// 95 % percentile-bootstrap interval of `agg(b) / agg(a)`, each variant's
/// repetitions resampled with replacement on their own, seeded by `label`; None if
/// either side has fewer than two repetitions or a resample's denominator is 0.
pub fn ratio_ci(a: &[f64], b: &[f64], agg: Agg, label: &str) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mut state = seed_of(label);
    let mut draw = |xs: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        for _ in 0..xs.len() {
            let i = (splitmix(&mut state) % xs.len() as u64) as usize;
            buf.push(xs[i]);
        }
    };
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let mut ratios = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        draw(a, &mut ba);
        draw(b, &mut bb);
        let den = combine(&ba, agg);
        if den == 0.0 {
            return None;
        }
        ratios.push(combine(&bb, agg) / den);
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((RESAMPLES as f64 - 1.0) * q).round() as usize];
    Some((at(0.025), at(0.975)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_interval_of_known_samples() {
        let s = summary(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!((s.n, s.mean, s.min, s.max), (5, 3.0, 1.0, 5.0));
        // sd = sqrt(2.5), t(4) = 2.776: 2.776 * sqrt(2.5 / 5) = 1.963.
        assert!((s.half.unwrap() - 1.963).abs() < 1e-3, "{s:?}");
        assert_eq!(summary(&[7.0]).unwrap().half, None);
        assert_eq!(summary(&[]), None);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_ratio() {
        let a = [10.0, 11.0, 9.0, 10.5, 9.5];
        let b = [20.0, 22.0, 18.0, 21.0, 19.0];
        let x = ratio_ci(&a, &b, Agg::Mean, "e1 test").unwrap();
        assert_eq!(x, ratio_ci(&a, &b, Agg::Mean, "e1 test").unwrap());
        assert!(x.0 < 2.0 && 2.0 < x.1 && x.0 > 1.7 && x.1 < 2.3, "{x:?}");
        // Sums of equal counts give the same ratio as means.
        let y = ratio_ci(&a, &b, Agg::Sum, "e1 test").unwrap();
        assert!((y.0 - x.0).abs() < 1e-9 && (y.1 - x.1).abs() < 1e-9);
        // Identical repetitions: a point interval.
        assert_eq!(
            ratio_ci(&[2.0, 2.0], &[3.0, 3.0], Agg::Mean, "z"),
            Some((1.5, 1.5))
        );
        assert_eq!(ratio_ci(&[2.0], &[3.0, 3.0], Agg::Mean, "z"), None);
        assert_eq!(ratio_ci(&[0.0, 0.0], &[3.0, 3.0], Agg::Mean, "z"), None);
    }
}
