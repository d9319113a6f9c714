//! The real path in report.md: the "lowtide real path" and "kernel (this machine)"
//! cells of each seed figure, a table of the real runs, and what to keep in mind.

use super::{RealResults, RealRun, Side};
use crate::Experiment;
use std::fmt::Write;

fn num(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:.0}"),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

/// A figure of a run, if it has it.
type Get = fn(&RealRun) -> Option<f64>;

fn delay(r: &RealRun) -> Option<f64> {
    r.queue_mean_ms
}
fn mbit(r: &RealRun) -> Option<f64> {
    (r.error.is_none()).then_some(r.goodput_bps / 1e6)
}
fn out_req(r: &RealRun) -> Option<f64> {
    r.ip_out_requests.map(|x| x as f64)
}
fn in_rec(r: &RealRun) -> Option<f64> {
    r.ip_in_receives.map(|x| x as f64)
}
fn out_segs(r: &RealRun) -> Option<f64> {
    r.tcp_out_segs.map(|x| x as f64)
}
fn pages(r: &RealRun) -> Option<f64> {
    r.mean_pages
}
fn wake(r: &RealRun) -> Option<f64> {
    r.wakeups_per_s
}

/// `get` of the successful runs of (side, group, variant prefix), one per
/// repetition.
fn vals(real: &RealResults, e: Experiment, side: Side, group: &str, v: &str, get: Get) -> Vec<f64> {
    (real.select(e, side, group, v).into_iter())
        .filter(|r| r.error.is_none())
        .filter_map(get)
        .collect()
}

/// Mean of `get` over the successful runs of (side, group, variant prefix).
fn agg(
    real: &RealResults,
    e: Experiment,
    side: Side,
    group: &str,
    v: &str,
    get: Get,
) -> Option<f64> {
    let xs = vals(real, e, side, group, v, get);
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// "mean (min-max)" of the repetitions, the value alone for one.
fn spread(xs: &[f64]) -> Option<String> {
    let sm = crate::stats::summary(xs)?;
    Some(match sm.n {
        1 => num(sm.mean),
        _ => format!("{} ({}-{})", num(sm.mean), num(sm.min), num(sm.max)),
    })
}

/// Mean (range) of (side, group, variant prefix) over its repetitions.
fn span(
    real: &RealResults,
    e: Experiment,
    side: Side,
    group: &str,
    v: &str,
    get: Get,
) -> Option<String> {
    spread(&vals(real, e, side, group, v, get))
}

/// "A (range) -> B (range) unit (ratio of the means; n = 3)".
fn a_to_b(a: &[f64], b: &[f64], unit: &str) -> Option<String> {
    let (sa, sb) = (spread(a)?, spread(b)?);
    let (ma, mb) = (
        a.iter().sum::<f64>() / a.len() as f64,
        b.iter().sum::<f64>() / b.len() as f64,
    );
    let n = match a.len() == b.len() {
        true => format!("n = {}", a.len()),
        false => format!("n = {} / {}", a.len(), b.len()),
    };
    let ratio = match ma != 0.0 {
        true => format!(" ({:.2}x; {n})", mb / ma),
        false => format!(" ({n})"),
    };
    Some(format!("{sa} -> {sb} {unit}{ratio}").replace("  ", " "))
}

/// What a row of the seed table compares on the real path: (group, figure, unit);
/// an empty group is the experiment's first real group (E1 and E2 run at a smaller
/// scale than the simulator's, under their own group names).
fn row(e: Experiment, i: usize) -> Option<(&'static str, Get, &'static str)> {
    let d: Get = delay;
    Some(match (e, i) {
        (Experiment::E1, 0) => ("", pages, "pages"),
        (Experiment::E1, 1) => ("", mbit, "Mbit/s"),
        (Experiment::E1, 2) => (super::plan::E1_ONE_FLOW, mbit, "Mbit/s"),
        (Experiment::E1, 3) => (super::plan::E1_ONE_FLOW, wake, "/s"),
        (Experiment::E1, 4) => ("", wake, "/s"),
        (Experiment::E1, 5) => (super::plan::E1_ONE_FLOW, pages, "pages"),
        (Experiment::E2, 0) => ("", pages, "pages"),
        (Experiment::E2, 1) => ("", wake, "/s"),
        (Experiment::E2, 2) => ("", wake, "/s"),
        (Experiment::E2, 3) => ("", mbit, "Mbit/s"),
        (Experiment::E3, 0) => ("1 Gbit/s, 1 flow", d, "ms"),
        (Experiment::E3, 1) => ("1 Gbit/s, 4 flows", d, "ms"),
        (Experiment::E3, 2) => ("100 Mbit/s, 1 flow", d, "ms"),
        (Experiment::E3, 3) => ("100 Mbit/s, 4 flows", d, "ms"),
        (Experiment::E3, 4) => ("1 Gbit/s, 1 flow", mbit, "Mbit/s"),
        (Experiment::E3, 5) => ("100 Mbit/s, 1 flow", mbit, "Mbit/s"),
        (Experiment::E5, 0) => ("2,000,000 bytes", out_req, ""),
        (Experiment::E5, 1) => ("2,000,000 bytes", in_rec, ""),
        (Experiment::E5, 2) => ("2,000,000 bytes", out_segs, ""),
        (Experiment::E5, 3) => ("2,000,000 bytes", mbit, "Mbit/s"),
        _ => return None,
    })
}

/// The (lowtide real path, kernel) cells of row `i` of experiment `e`'s seed table.
pub fn cells(real: Option<&RealResults>, e: Experiment, i: usize) -> (String, String) {
    let not = || ("not measured".to_string(), "not measured".to_string());
    let Some(real) = real.filter(|r| r.experiments.contains(&e)) else {
        return not();
    };
    if e == Experiment::E4 {
        return e4_cells(real);
    }
    let Some((group, get, unit)) = row(e, i) else {
        return not();
    };
    let first = (real.runs.iter())
        .find(|r| r.experiment == Some(e))
        .map_or(String::new(), |r| r.group.clone());
    let group = if group.is_empty() {
        first.as_str()
    } else {
        group
    };
    // E2's third row compares C (no lowat/2 rule) with B.
    let (va, vb) = if (e, i) == (Experiment::E2, 2) {
        ("C", "B")
    } else {
        ("A", "B")
    };
    let lowtide = a_to_b(
        &vals(real, e, Side::Lowtide, group, va, get),
        &vals(real, e, Side::Lowtide, group, vb, get),
        unit,
    )
    .map(|x| match e {
        Experiment::E1 | Experiment::E2 => format!("{group}: {x}"),
        _ => x,
    });
    let kernel = match e {
        Experiment::E2 if i == 2 => Some("no switch: the kernel has the rule".into()),
        Experiment::E1 | Experiment::E2 => a_to_b(
            &vals(real, e, Side::Kernel, group, "A", get),
            &vals(real, e, Side::Kernel, group, "B", get),
            unit,
        )
        .map(|x| format!("{group}: {x}")),
        Experiment::E3 => span(real, e, Side::Kernel, group, "A", get)
            .zip(span(real, e, Side::Kernel, group, "B", get))
            .map(|(a, b)| {
                let routed = span(real, e, Side::Kernel, group, "R", get)
                    .map_or(String::new(), |x| format!("; queue one hop away {x}"));
                format!("limit 1 GB {a}, default {b}{routed} {unit}")
            }),
        _ => span(real, e, Side::Kernel, group, "B", get)
            .map(|k| format!("{k} {unit} (sized at transmit time)").replace("  ", " ")),
    };
    let cell = |x: Option<String>| x.unwrap_or_else(|| "not in this run".into());
    (cell(lowtide), cell(kernel))
}

fn e4_cells(real: &RealResults) -> (String, String) {
    let e = Experiment::E4;
    let Some(group) = (real.runs.iter())
        .find(|r| r.experiment == Some(e))
        .map(|r| r.group.clone())
    else {
        return ("not in this run".into(), "not measured".into());
    };
    let cpu: Get = |r| r.cpu_per_ack_us;
    let g = a_to_b(
        &vals(real, e, Side::Lowtide, &group, "A", mbit),
        &vals(real, e, Side::Lowtide, &group, "B", mbit),
        "Mbit/s",
    );
    let c = a_to_b(
        &vals(real, e, Side::Lowtide, &group, "A", cpu),
        &vals(real, e, Side::Lowtide, &group, "B", cpu),
        "us CPU per ACK",
    );
    let lowtide = match (g, c) {
        (Some(g), Some(c)) => format!("{group}, mean (range): {g}; {c}"),
        _ => "not in this run".into(),
    };
    let kernel = match span(real, e, Side::Kernel, &group, "B", mbit) {
        Some(k) => format!("tree only (since 4.15): its BBR flow on the same path {k} Mbit/s"),
        None => "not measured (the kernel has only the tree, since 4.15)".into(),
    };
    (lowtide, kernel)
}

/// How many times the plan ran (the largest repetition number + 1).
fn reps(real: &RealResults) -> u32 {
    real.runs.iter().map(|r| r.rep + 1).max().unwrap_or(0)
}

/// The paragraph under the report's title.
pub fn intro(real: Option<&RealResults>) -> String {
    let Some(real) = real else {
        return "Real path (lowtide on TUN against the kernel) and this machine's kernel doing \
                the same job: not measured (run `lowtide experiment all --real` as root)."
            .into();
    };
    let exps: Vec<&str> = real.experiments.iter().map(|e| e.name()).collect();
    let which = match exps.len() {
        5 => "all".to_string(),
        _ => exps.join(" + "),
    };
    format!(
        "Real path: `lowtide experiment {which} --real{}` on {}, finished {} ({}), at the scale this \
         machine holds: lowtide's stack on a TUN device with its own emulated link (the \
         simulator's link code in real time) sending to kernel receivers in a network \
         namespace, and the kernel's own TCP in namespaces (for E1, E2 and E3 htb + pfifo on \
         the sender's TUN device with `lowtide link` beyond it for the round trip, E3's R \
         on a router's veth one hop away; `lowtide link` for E4 and E5). Wall-clock runs: not deterministic; the whole \
         plan ran {} time(s), interleaved (every variant once, then again), and each \
         figure is the mean of those runs with their range (min-max) in parentheses.",
        if real.quick { " --quick" } else { "" },
        real.machine,
        real.measured,
        if real.quick {
            "reduced scale"
        } else {
            "full real-path plan"
        },
        reps(real),
    )
}

/// The real runs of `e` and what to keep in mind, if any.
pub fn section(s: &mut String, real: Option<&RealResults>, e: Experiment) {
    let Some(real) = real else { return };
    let runs: Vec<&RealRun> = (real.runs.iter())
        .filter(|r| r.experiment == Some(e))
        .collect();
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Real-path runs ({}, measured {}):\n",
        real.machine, real.measured
    );
    let _ = writeln!(s, "| side | group | variant | rep | parameters | goodput Mbit/s | dev. queue delay ms (mean/peak) | IpOutRequests | TcpOutSegs | IpInReceives | retrans | CPU user s | CPU per ACK us | TCP memory pages (mean) | wakeups/s | error |");
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let o = |x: Option<f64>| x.map_or("-".to_string(), num);
    let u = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
    for r in runs {
        let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            match r.side {
                Some(Side::Kernel) => "kernel",
                _ => "lowtide",
            },
            r.group,
            r.variant,
            r.rep,
            params.join(", "),
            num(r.goodput_bps / 1e6),
            o(r.queue_mean_ms),
            o(r.queue_peak_ms),
            u(r.ip_out_requests),
            u(r.tcp_out_segs),
            u(r.ip_in_receives),
            u(r.retrans_segs),
            o(r.cpu_user_s),
            o(r.cpu_per_ack_us),
            o(r.mean_pages),
            o(r.wakeups_per_s),
            r.error.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(s);
    let diffs = differences(real, e);
    if !diffs.is_empty() {
        let _ = writeln!(s, "Side by side, from the runs above:\n");
        for d in diffs {
            let _ = writeln!(s, "- {d}");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "{}\n", notes(e));
}

/// Sentences comparing lowtide and the kernel (and the simulator's picture where the
/// real path differs from it), computed from the runs.
fn differences(real: &RealResults, e: Experiment) -> Vec<String> {
    let mut groups: Vec<&str> = Vec::new();
    for r in real.runs.iter().filter(|r| r.experiment == Some(e)) {
        if !groups.contains(&r.group.as_str()) {
            groups.push(&r.group);
        }
    }
    let mut out = Vec::new();
    let f = |x: Option<f64>| x.map_or("-".to_string(), num);
    for g in groups {
        let lt = |v, get: Get| agg(real, e, Side::Lowtide, g, v, get);
        let k = |v, get: Get| agg(real, e, Side::Kernel, g, v, get);
        match e {
            Experiment::E3 => out.push(format!(
                "{g}: with TSQ lowtide queues {} ms on average and the kernel {} ms (its \
                 default); without TSQ lowtide queues {} ms, the kernel {} ms when the same \
                 pfifo is one hop away (where TSQ cannot limit it). Goodput: lowtide {} \
                 (TSQ off) and {} Mbit/s (on), the kernel {} Mbit/s (default).",
                f(lt("B", delay)),
                f(k("B", delay)),
                f(lt("A", delay)),
                f(k("R", delay)),
                f(lt("A", mbit)),
                f(lt("B", mbit)),
                f(k("B", mbit))
            )),
            Experiment::E5 => out.push(format!(
                "{g}: sized at transmit time lowtide sends {} IP packets and receives {} \
                 ACKs, the kernel {} and {}; sized at write time lowtide sends {} and \
                 receives {}. With the kernel as the receiver the ACK count falls with the \
                 packet count, as in the seed, as it does in the simulator's 10 Gbit/s \
                 row above, where lowtide also receives.",
                f(lt("B", out_req)),
                f(lt("B", in_rec)),
                f(k("B", out_req)),
                f(k("B", in_rec)),
                f(lt("A", out_req)),
                f(lt("A", in_rec))
            )),
            Experiment::E1 | Experiment::E2 => {
                let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) if a > 0.0 => format!("{:.2}x", b / a),
                    _ => "-".into(),
                };
                out.push(format!(
                    "{g}: lowat takes lowtide's TCP memory from {} to {} pages ({}) and the \
                     kernel's from {} to {} ({}); goodput lowtide {} -> {} Mbit/s, kernel \
                     {} -> {} Mbit/s; lowtide's writable events {} -> {} per second, the \
                     kernel senders' context switches {} -> {} per second.",
                    f(lt("A", pages)),
                    f(lt("B", pages)),
                    ratio(lt("A", pages), lt("B", pages)),
                    f(k("A", pages)),
                    f(k("B", pages)),
                    ratio(k("A", pages), k("B", pages)),
                    f(lt("A", mbit)),
                    f(lt("B", mbit)),
                    f(k("A", mbit)),
                    f(k("B", mbit)),
                    f(lt("A", wake)),
                    f(lt("B", wake)),
                    f(k("A", wake)),
                    f(k("B", wake))
                ));
            }
            Experiment::E4 => {
                let rate = (real.runs.iter())
                    .find(|r| r.experiment == Some(e) && r.group == g)
                    .and_then(|r| r.params.iter().find(|(k, _)| k == "rate"))
                    .map_or(String::new(), |(_, v)| v.clone());
                out.push(format!(
                    "{g}: lowtide's BBR flow delivered {} (list) and {} (tree) Mbit/s on a \
                     {rate} link, the kernel's BBR flow {} Mbit/s on the same emulated path \
                     (a kernel receiver in both); the pacing and delivery \
                     rates at the end are in each lowtide run's parameters. The kernel has \
                     no list to compare.",
                    f(lt("A", mbit)),
                    f(lt("B", mbit)),
                    f(k("B", mbit))
                ));
            }
        }
    }
    out
}

/// The real-path checks, after the simulator's.
pub fn checks(s: &mut String, real: Option<&RealResults>) {
    if let Some(real) = real {
        crate::report::directions_table(s, "Directions checked on the real path", &real.checks);
    }
}

fn notes(e: Experiment) -> &'static str {
    match e {
        Experiment::E1 | Experiment::E2 => {
            "Real path, how to read it: memory is the senders' sockets only, time-weighted \
            while they write: lowtide's own accounting (sk_wmem_queued + sk_rmem_alloc in \
            pages), and for the kernel the sum of `ss -tm`'s skmem r + w + f over the \
            sender namespace's sockets every 100 ms (/proc/net/sockstat's `mem` is \
            tcp_memory_allocated, one counter for the whole machine, so it cannot separate \
            the sender from the receiver or from other work on the machine). Wakeups are \
            lowtide's writable events (tcp_info wakeups) and, for the kernel, the sender \
            threads' context switches (/proc/thread-self/status), which is what the seeds \
            counted; the two are not the same event."
        }
        Experiment::E3 => {
            "Real path, how to read it: lowtide's delay is its emulated link's queue \
            backlog (bytes waiting before serialization) divided by the rate, weighted by \
            time; the kernel's is the backlog of the pfifo under htb sampled every 10 ms with \
            `tc -s -j qdisc show`, over the seconds the senders write. The kernel cannot turn \
            TSQ off: tcp_small_queue_check() (tcp_output.c) limits a socket to \
            max(2 x truesize, sk_pacing_rate >> sk_pacing_shift) bytes below the qdisc \
            (about 1 ms at the pacing rate), and tcp_limit_output_bytes (per namespace, \
            4 MB by default on 6.18) only caps that value for unpaced sockets; raising it to \
            1 GB lifts a cap that does not bind at these rates, so the kernel's A and B \
            variants both run with TSQ, and neither is the seed's pre-TSQ kernel. With 64 KB \
            TSO skbs the floor 2 x truesize is about 130 KB, 10 ms at 100 Mbit/s and 1 ms at \
            1 Gbit/s. The kernel's R variant puts the same htb + pfifo on a router namespace \
            one hop away: a forwarded packet no longer belongs to the sender's socket, so \
            only the congestion and receive windows limit that queue, as in a kernel before \
            TSQ. Where lowtide with TSQ delivers less than the link's rate, a likely cause \
            (not established): its TSQ budget is about a millisecond of data, refilled when \
            the runtime's loop turns and hands over the TX completions; on this shared, \
            loaded machine a late turn leaves the emulated link idle, where the kernel \
            completes transmissions in its own softirq."
        }
        Experiment::E4 => {
            "Real path, how to read it: lowtide's CPU per ACK is the user CPU time of the \
            one thread that runs the stack, the emulated link and the device, divided by \
            the packets it received; its system time (the kernel's work on the TUN writes, \
            the kernel receiver's TCP included) is left out. The link rate (500 Mbit/s at full scale) was chosen for \
            this shared machine without offload (one write(2) per segment), far below the \
            seed's. The path has the seed's 200 us jitter on the data direction and the \
            kernel receiver's SACK compression off (tcp_comp_sack_nr 0, as the seed's \
            4.14). The runs swing widely (BBR under 1 % random loss at 150 ms: see the \
            range of the repetitions). On a loaded machine lowtide falls behind: \
            its one thread is the stack, the link and the device, and a late turn of its \
            loop idles the link (docs/experiments/README.md, \"E4's real-path lag\"). \
            lowtide's list is a contiguous VecDeque of skbs (crates/lowtide/src/tcp/rtx/store.rs), \
            not separately allocated nodes as Linux's list was, so a walk here costs \
            about what the tree's does and the real path cannot show the seed's cache \
            misses; the simulator's list/tree goodput ratio exists only in its CPU model (a stated \
            limit). Packets in flight are a few thousand, far fewer than the seed's ~100,000, so a \
            list walk is short and the list/tree difference is within the run-to-run \
            spread; see the simulator's sweep for the cost against packets in flight. \
            The kernel's retransmissions (TcpRetransSegs) are far above the path's 1 % \
            and are not E4's mechanism: its sender writes into a TUN device whose reader \
            (`lowtide link`, a userspace process) drops when it falls behind, its \
            bottleneck is the link's 1000-packet queue one hop away (lowtide's is its own \
            device queue, where a full queue is local backpressure), and, with both \
            queues raised so that nothing drops but the 1 % loss, it still retransmits \
            22-41 % of its segments, most reported back as spurious by DSACKs, with RACK \
            on or off: measured by hand, cause not established (docs/experiments/README.md, \
            \"E4's kernel retransmissions on the real path\")."
        }
        Experiment::E5 => {
            "Real path, how to read it: lowtide's counters are its own stack's (nstat \
            names) for the whole connection; the kernel's are /proc/net/snmp deltas of the \
            sender's namespace (what nstat reads) around the connection, through `lowtide \
            link` at 40 ms. This kernel sizes its skbs at transmit time (seed 004 is in since \
            Linux 4.x): it is the seed's B side; there is no A side to run."
        }
    }
}

/// The text printed after a `--real` run.
pub fn summary_text(real: &RealResults, out: &std::path::Path) -> String {
    let mut s = String::new();
    for r in &real.runs {
        let e = r.experiment.map_or("?", |e| e.name());
        let side = match r.side {
            Some(Side::Kernel) => "kernel",
            _ => "lowtide",
        };
        let mut parts = vec![format!("{} Mbit/s", num(r.goodput_bps / 1e6))];
        if let (Some(m), Some(p)) = (r.queue_mean_ms, r.queue_peak_ms) {
            parts.push(format!("queue {} / {} ms", num(m), num(p)));
        }
        if let (Some(o), Some(t)) = (r.ip_out_requests, r.tcp_out_segs) {
            parts.push(format!("IpOutRequests {o} TcpOutSegs {t}"));
        }
        if let Some(c) = r.cpu_per_ack_us {
            parts.push(format!("{} us CPU/ACK", num(c)));
        }
        if let Some(err) = &r.error {
            parts = vec![format!("FAILED: {err}")];
        }
        let _ = writeln!(
            s,
            "{e} {side:<7} {} / {} (rep {}): {}",
            r.group,
            r.variant,
            r.rep,
            parts.join(", ")
        );
    }
    crate::report::checks_summary(&mut s, "real-path directions", &real.checks);
    let _ = writeln!(s, "wrote {}", out.join("report.md").display());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(e: Experiment, side: Side, group: &str, variant: &str, delay: f64) -> RealRun {
        RealRun {
            experiment: Some(e),
            side: Some(side),
            group: group.into(),
            variant: variant.into(),
            goodput_bps: 94e6,
            queue_mean_ms: Some(delay),
            ..RealRun::default()
        }
    }

    fn results(runs: Vec<RealRun>) -> RealResults {
        RealResults {
            format: crate::FORMAT,
            quick: true,
            measured: "now".into(),
            machine: "test".into(),
            experiments: vec![Experiment::E3],
            runs,
            checks: Vec::new(),
        }
    }

    #[test]
    fn e3_cells_compare_each_side() {
        let g = "100 Mbit/s, 1 flow";
        let real = results(vec![
            run(Experiment::E3, Side::Lowtide, g, "A: TSQ off", 50.0),
            run(Experiment::E3, Side::Lowtide, g, "B: TSQ on", 4.0),
            run(Experiment::E3, Side::Kernel, g, "A: limit", 10.0),
            run(Experiment::E3, Side::Kernel, g, "B: default", 9.0),
            run(Experiment::E3, Side::Kernel, g, "R: routed", 60.0),
        ]);
        let (lt, k) = cells(Some(&real), Experiment::E3, 2);
        assert_eq!(lt, "50.0 -> 4.00 ms (0.08x; n = 1)");
        assert_eq!(
            k,
            "limit 1 GB 10.0, default 9.00; queue one hop away 60.0 ms"
        );
        // A setting this run did not have, an experiment it did not run, no run.
        assert_eq!(cells(Some(&real), Experiment::E3, 0).0, "not in this run");
        assert_eq!(cells(Some(&real), Experiment::E5, 0).0, "not measured");
        assert_eq!(cells(None, Experiment::E3, 2).1, "not measured");
    }

    #[test]
    fn a_failed_run_gives_no_figure() {
        let g = "100 Mbit/s, 1 flow";
        let mut b = run(Experiment::E3, Side::Lowtide, g, "B: TSQ on", 4.0);
        b.error = Some("boom".into());
        let real = results(vec![
            run(Experiment::E3, Side::Lowtide, g, "A: TSQ off", 50.0),
            b,
        ]);
        assert_eq!(cells(Some(&real), Experiment::E3, 2).0, "not in this run");
    }

    #[test]
    fn update_replaces_only_the_experiments_run_again() {
        let g = "100 Mbit/s, 1 flow";
        let mut old = results(vec![run(
            Experiment::E3,
            Side::Lowtide,
            g,
            "A: TSQ off",
            50.0,
        )]);
        old.experiments.push(Experiment::E5);
        old.runs.push(run(
            Experiment::E5,
            Side::Kernel,
            "2,000,000 bytes",
            "B: k",
            0.0,
        ));
        let newer = results(vec![run(
            Experiment::E3,
            Side::Lowtide,
            g,
            "A: TSQ off",
            70.0,
        )]);
        old.update(newer);
        assert_eq!(old.experiments, vec![Experiment::E3, Experiment::E5]);
        assert_eq!(old.runs.len(), 2);
        assert_eq!(old.runs[0].queue_mean_ms, Some(70.0));
        assert_eq!(old.runs[1].experiment, Some(Experiment::E5));
        assert_eq!(old.measured, "now; e3 again now");
    }
}
