//! The human-readable report of a run, in the manner of iperf3's summary.

use crate::iperf_text;
use lowtide_sim::{RunResults, Scenario, Workload};
use std::fmt::Write;

/// Per-flow lines shown before eliding the rest (all are in `--json`).
const MAX_FLOW_LINES: usize = 32;

/// Bytes as iperf3 prints them (1024-based units).
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["Bytes", "KBytes", "MBytes", "GBytes"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    match i {
        0 => format!("{b} Bytes"),
        _ => format!("{v:.2} {}", UNITS[i]),
    }
}

/// A rate in bit/s with a 1000-based unit.
pub fn fmt_rate(bps: f64) -> String {
    const UNITS: [&str; 4] = ["bit/s", "Kbit/s", "Mbit/s", "Gbit/s"];
    let mut v = bps;
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{v:.2} {}", UNITS[i])
}

fn header(sc: &Scenario) -> String {
    let ab = &sc.link_ab;
    let what = match sc.workload {
        Workload::Bulk { duration_ns } => format!("bulk for {:.3} s", duration_ns as f64 / 1e9),
        Workload::Bytes { bytes, .. } => format!("{bytes} bytes each"),
    };
    format!(
        "lowtide sim stream: {}, {what}; {} {}, RTT {:.3} ms, loss {}% (ACKs {}%), {}queue {} pkts, GRO {}, seed {}\n",
        lowtide_sim::verdict::flows(sc.flows as u64),
        fmt_rate(ab.rate_bps as f64),
        sc.config.tcp_congestion_control,
        (ab.delay_ns + sc.link_ba.delay_ns) as f64 / 1e6,
        ab.loss * 100.0,
        sc.link_ba.loss * 100.0,
        qdisc_name(sc),
        sc.queue_limit,
        if sc.gro { "on" } else { "off" },
        sc.seed,
    )
}

/// "NAME " of host A's qdisc when it is not the default pfifo_fast, else nothing.
fn qdisc_name(sc: &Scenario) -> String {
    let name = match &sc.qdisc {
        Some(q) => q.name(),
        None => sc.config.default_qdisc.as_str(),
    };
    match name {
        "pfifo_fast" => String::new(),
        n => format!("{n} "),
    }
}

/// The flows shown in text (all of them up to [`MAX_FLOW_LINES`], else the first
/// half of that); the rest are in `--json`.
fn shown(r: &RunResults) -> usize {
    match r.per_flow.len() > MAX_FLOW_LINES {
        true => MAX_FLOW_LINES / 2,
        false => r.per_flow.len(),
    }
}

/// A line saying how many flows the text leaves out, if any.
fn elided(out: &mut String, r: &RunResults) {
    let n = r.per_flow.len() - shown(r);
    if n > 0 {
        let _ = writeln!(out, "  ... {n} more flows (see --json)");
    }
}

/// The whole report: the scenario, then iperf3's layout (connections, interval lines
/// with `-i`, the sender and receiver summary), then lowtide's own figures.
pub fn render(sc: &Scenario, r: &RunResults) -> String {
    let mut out = header(sc);
    iperf3_part(&mut out, r);
    lowtide_part(&mut out, r);
    out
}

/// Connections, intervals and the summary, as `iperf3 -c` prints them.
fn iperf3_part(out: &mut String, r: &RunResults) {
    let (a, b) = ("10.0.0.1", "10.0.0.2");
    let port = lowtide_sim::LISTEN_PORT;
    iperf_text::push(out, &iperf_text::connecting(b, port));
    for f in &r.per_flow[..shown(r)] {
        // A flow whose handshake never completed has a port but no connection.
        let never = r.verdict.failed.iter().any(|x| {
            x.flow == f.flow
                && matches!(
                    x.failure,
                    lowtide_sim::verdict::FlowFailure::NeverConnected { .. }
                )
        });
        let line = match f.local_port {
            0 => format!("[{:>3}] local {a}: connect failed", f.flow),
            p if never => format!("[{:>3}] local {a} port {p}: connect failed", f.flow),
            p => iperf_text::connected(f.flow, a, p, b, port),
        };
        iperf_text::push(out, &line);
    }
    elided(out, r);
    let several = r.per_flow.len() > 1;
    if !r.intervals.is_empty() {
        iperf_text::push(out, iperf_text::HEADER_INTERVALS);
    }
    for iv in &r.intervals {
        for st in &iv.streams[..shown(r).min(iv.streams.len())] {
            let span = iperf_text::Span {
                id: Some(st.socket),
                start: st.start,
                end: st.end,
                bytes: st.bytes,
                bits_per_second: st.bits_per_second,
            };
            let line = iperf_text::interval(&span, st.retransmits, Some(st.snd_cwnd));
            iperf_text::push(out, &line);
        }
        if several {
            let s = &iv.sum;
            let span = iperf_text::Span {
                id: None,
                start: s.start,
                end: s.end,
                bytes: s.bytes,
                bits_per_second: s.bits_per_second,
            };
            iperf_text::push(out, &iperf_text::interval(&span, s.retransmits, None));
            iperf_text::push(out, iperf_text::SEPARATOR);
        }
    }
    if !several || r.intervals.is_empty() {
        iperf_text::push(out, iperf_text::SEPARATOR);
    }
    iperf_text::push(out, iperf_text::HEADER_SUMMARY);
    let span = |id, f: &lowtide_sim::intervals::EndFigures| iperf_text::Span {
        id,
        start: f.start,
        end: f.end,
        bytes: f.bytes,
        bits_per_second: f.bits_per_second,
    };
    for st in &r.end.streams[..shown(r).min(r.end.streams.len())] {
        let (tx, rx) = (&st.sender, &st.receiver);
        let retr = tx.retransmits.unwrap_or(0);
        iperf_text::push(out, &iperf_text::sender(&span(tx.socket, tx), retr));
        iperf_text::push(out, &iperf_text::receiver(&span(rx.socket, rx)));
    }
    elided(out, r);
    if several {
        if let (Some(tx), Some(rx)) = (&r.end.sum_sent, &r.end.sum_received) {
            let retr = tx.retransmits.unwrap_or(0);
            iperf_text::push(out, &iperf_text::sender(&span(None, tx), retr));
            iperf_text::push(out, &iperf_text::receiver(&span(None, rx)));
        }
    }
}

/// lowtide's figures beyond iperf3's: per flow, then the run.
fn lowtide_part(out: &mut String, r: &RunResults) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "[ ID] {:>13}  {:>15}  {:>7}  {:>10}  {:>8}  OK",
        "Transfer", "Goodput", "Retr", "RTT", "Wakeups"
    );
    for f in &r.per_flow[..shown(r)] {
        let _ = writeln!(
            out,
            "[{:>3}] {:>13}  {:>15}  {:>7}  {:>7.3} ms  {:>8}  {}",
            f.flow,
            fmt_bytes(f.bytes_delivered),
            fmt_rate(f.goodput_bps),
            f.retrans_segs,
            f.rtt_us as f64 / 1e3,
            f.wakeups,
            match &f.failure {
                None => "yes",
                Some(_) => r.verdict.failure_of(f.flow).map_or("NO", |x| x.kind()),
            },
        );
    }
    elided(out, r);
    let bytes: u64 = r.per_flow.iter().map(|f| f.bytes_delivered).sum();
    let retr: u64 = r.per_flow.iter().map(|f| f.retrans_segs).sum();
    let wakeups: u64 = r.per_flow.iter().map(|f| f.wakeups).sum();
    let _ = writeln!(
        out,
        "[SUM] {:>13}  {:>15}  {:>7}  {:>10}  {:>8}  in {:.3} s",
        fmt_bytes(bytes),
        fmt_rate(r.goodput_bps),
        retr,
        "",
        wakeups,
        r.duration_s
    );
    let _ = writeln!(
        out,
        "verdict: {} ({})",
        if r.verdict.ok { "OK" } else { "FAILED" },
        r.verdict.summary()
    );
    resources(out, r);
    let _ = writeln!(
        out,
        "drops: {} on the link, {} in NIC queues; sim: {} packets, {} events in {:.3} s wall ({:.0} packets/s)",
        r.drops.link_loss,
        r.drops.queue,
        r.sim_packets,
        r.sim_events,
        r.sim_wall_s,
        r.sim_packets as f64 / r.sim_wall_s.max(1e-9),
    );
    if r.drops.ce_marked > 0 {
        let _ = writeln!(
            out,
            "ECN: {} packets marked CE in NIC queues",
            r.drops.ce_marked
        );
    }
}

/// A delay in µs, in ms when long.
fn fmt_us(us: f64) -> String {
    match us >= 1000.0 {
        true => format!("{:.3} ms", us / 1e3),
        false => format!("{us:.1} us"),
    }
}

/// Memory, wakeups and device queue of the sending host.
fn resources(out: &mut String, r: &RunResults) {
    let m = &r.memory;
    let _ = writeln!(
        out,
        "memory (host A): peak {} pages, mean {:.0} pages; send queue per flow: peak {}, mean {}",
        m.peak_pages,
        m.mean_pages,
        fmt_bytes(m.peak_wmem_queued_per_flow),
        fmt_bytes(m.mean_wmem_queued_per_flow.round() as u64),
    );
    let _ = writeln!(
        out,
        "wakeups: {} ({:.1} per MB, {:.0} per s)",
        r.wakeups.total, r.wakeups.per_mb, r.wakeups.per_s
    );
    let d = &r.device_queue;
    let _ = writeln!(
        out,
        "device queue (host A) per flow: peak {}, mean {}; delay peak {}, mean {}",
        fmt_bytes(d.peak_bytes_per_flow),
        fmt_bytes(d.mean_bytes_per_flow.round() as u64),
        fmt_us(d.peak_delay_us),
        fmt_us(d.mean_delay_us),
    );
    if r.flows > 1 {
        let _ = writeln!(out, "fairness: Jain's index {:.3}", r.jain_index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_bytes(512), "512 Bytes");
        assert_eq!(fmt_bytes(2 * 1024 * 1024), "2.00 MBytes");
        assert_eq!(fmt_rate(941_000_000.0), "941.00 Mbit/s");
        assert_eq!(fmt_rate(10e9), "10.00 Gbit/s");
        assert_eq!(fmt_us(12.34), "12.3 us");
        assert_eq!(fmt_us(4321.0), "4.321 ms");
    }
}
