//! The directions a real-path run checks: those that hold at any scale this machine
//! can give, on lowtide's side (the kernel's runs are the comparison, not under test).

use super::{RealRun, Side};
use crate::{DirectionCheck, Experiment};

/// The directions that hold on a real path run at any scale this machine can give,
/// and a failed check for every run that did not complete.
pub fn checks(e: Experiment, runs: &[RealRun]) -> Vec<DirectionCheck> {
    let mut out: Vec<DirectionCheck> = (runs.iter())
        .filter(|r| r.experiment == Some(e))
        .filter_map(|r| {
            r.error.as_ref().map(|err| DirectionCheck {
                experiment: e,
                claim: format!(
                    "{:?} {} / {}: the run completes",
                    r.side.unwrap_or(Side::Lowtide),
                    r.group,
                    r.variant
                ),
                detail: err.clone(),
                pass: false,
            })
        })
        .collect();
    let lowtide: Vec<&RealRun> = (runs.iter())
        .filter(|r| r.experiment == Some(e) && r.side == Some(Side::Lowtide))
        .collect();
    for g in super::groups(lowtide.iter().copied()) {
        let of = |v: &str, get: fn(&RealRun) -> Option<f64>| {
            mean(
                (lowtide.iter().copied()).filter(|r| r.group == g && r.variant.starts_with(v)),
                get,
            )
        };
        let mut check = |claim: String, (a, b): (&str, &str), what: &str, get, less: bool| {
            let (Some((xa, na)), Some((xb, nb))) = (of(a, get), of(b, get)) else {
                return;
            };
            out.push(DirectionCheck {
                experiment: e,
                claim: format!("lowtide on TUN, {g}: {claim} (means over the repetitions)"),
                detail: format!("{what}: {a} {xa:.1} (n = {na}), {b} {xb:.1} (n = {nb})"),
                pass: if less { xb < xa } else { xb > xa },
            });
        };
        let pages: fn(&RealRun) -> Option<f64> = |r| r.mean_pages;
        let wakeups: fn(&RealRun) -> Option<f64> = |r| r.wakeups_per_s;
        match e {
            Experiment::E1 => {
                let claim = "TCP memory with lowat 128 KB < without".to_string();
                check(claim, ("A", "B"), "mean pages", pages, true);
                let claim = "writer wakeups with lowat 128 KB > without".to_string();
                check(claim, ("A", "B"), "wakeups/s", wakeups, false);
            }
            Experiment::E2 => {
                let claim = "TCP memory with lowat 2 MB < without".to_string();
                check(claim, ("A", "B"), "mean pages", pages, true);
                let claim = "wakeups with the lowat/2 rule (B) < without it (C)".to_string();
                check(claim, ("C", "B"), "wakeups/s", wakeups, true);
            }
            Experiment::E3 => {
                let claim = "mean device-queue delay with TSQ < 1/2 of without".to_string();
                let half: fn(&RealRun) -> Option<f64> = |r| r.queue_mean_ms;
                let (Some((qa, na)), Some((qb, nb))) = (of("A", half), of("B", half)) else {
                    continue;
                };
                out.push(DirectionCheck {
                    experiment: e,
                    claim: format!("lowtide on TUN, {g}: {claim} (means over the repetitions)"),
                    detail: format!("mean delay ms: A {qa:.3} (n = {na}), B {qb:.3} (n = {nb})"),
                    pass: qb < qa / 2.0,
                });
            }
            Experiment::E5 => {
                let claim = "IpOutRequests sized at transmit < sized at write".to_string();
                let get: fn(&RealRun) -> Option<f64> = |r| r.ip_out_requests.map(|x| x as f64);
                check(claim, ("A", "B"), "IpOutRequests", get, true);
            }
            Experiment::E4 => {}
        }
    }
    out
}

/// The mean of `get` over the runs without error, and how many there were.
fn mean<'a>(
    runs: impl Iterator<Item = &'a RealRun>,
    get: impl Fn(&RealRun) -> Option<f64>,
) -> Option<(f64, usize)> {
    let xs: Vec<f64> = runs.filter(|r| r.error.is_none()).filter_map(get).collect();
    (!xs.is_empty()).then(|| (xs.iter().sum::<f64>() / xs.len() as f64, xs.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, variant: &str, pages: f64, wakeups: f64) -> RealRun {
        RealRun {
            experiment: Some(Experiment::E1),
            side: Some(side),
            group: "1 flow, 1 ms".into(),
            variant: variant.into(),
            mean_pages: Some(pages),
            wakeups_per_s: Some(wakeups),
            ..RealRun::default()
        }
    }

    #[test]
    fn e1_checks_lowtides_directions_and_leaves_the_kernel_out() {
        let runs = vec![
            run(Side::Lowtide, "A: lowat off", 600.0, 100.0),
            run(Side::Lowtide, "B: lowat 128 KB", 150.0, 800.0),
            // The kernel's figures would fail both directions: they are not checked.
            run(Side::Kernel, "A: lowat off", 100.0, 900.0),
            run(Side::Kernel, "B: lowat 128 KB", 700.0, 90.0),
        ];
        let cs = checks(Experiment::E1, &runs);
        assert_eq!(cs.len(), 2, "{cs:?}");
        assert!(cs.iter().all(|c| c.pass), "{cs:?}");
        let mut worse = runs.clone();
        worse[1].mean_pages = Some(700.0);
        let cs = checks(Experiment::E1, &worse);
        assert_eq!(cs.iter().filter(|c| !c.pass).count(), 1, "{cs:?}");
    }

    #[test]
    fn a_run_that_failed_is_a_failed_check_and_counts_in_no_mean() {
        let mut failed = run(Side::Kernel, "A: lowat off", 1.0, 1.0);
        failed.error = Some("no memory samples".into());
        let runs = vec![
            failed,
            run(Side::Lowtide, "A: lowat off", 600.0, 100.0),
            run(Side::Lowtide, "B: lowat 128 KB", 150.0, 800.0),
        ];
        let cs = checks(Experiment::E1, &runs);
        assert_eq!(cs.iter().filter(|c| !c.pass).count(), 1, "{cs:?}");
        assert!(cs[0].claim.contains("the run completes"));
    }
}
