//! The real-path runs of each experiment, their execution and their checks.

use super::kernel::{self, Bottleneck, Sampler, Send};
use super::tun::{self, StackRun, TunLink};
use super::{RealResults, RealRun, Side};
use crate::{Experiment, E4_RCVBUF};
use lowtide_tun::device::Offload;
use lowtide_tun::link::PathConfig;
use lowtide_tun::netns::NetNs;
use std::net::SocketAddr;
use std::time::Duration;

const MS: u64 = 1_000_000;
const GBIT: u64 = 1_000_000_000;
/// The kernel's A: tcp_limit_output_bytes at 1 GB. Seed 002's TSQ (Linux 3.6) compared
/// sk_wmem_alloc with this sysctl alone, so raising it turned TSQ off; since 3.12
/// (c9eeec26e32e) tcp_small_queue_check's limit is max(2 * truesize, pacing_rate >>
/// sk_pacing_shift) and the sysctl only caps it, so on today's kernel A is TSQ on with
/// no cap (as B, whose 4 MB cap is never reached): the kernel has no switch that turns
/// TSQ off, and R (the queue one hop away) is its TSQ-off queue.
const HUGE_LIMIT: &str = "1073741824";

/// The path of a run: `rate`, `rtt` split in halves, `loss` forward.
fn path(rate_bps: u64, rtt_ns: u64, loss: f64) -> (PathConfig, PathConfig) {
    let base = PathConfig {
        rate_bps: Some(rate_bps),
        delay_ns: rtt_ns / 2,
        ..PathConfig::default()
    };
    (
        PathConfig {
            loss,
            ..base.clone()
        },
        base,
    )
}

/// A path of `rtt_ns` propagation delay and no rate limit (no queue of its own).
fn path_delay_only(rtt_ns: u64) -> (PathConfig, PathConfig) {
    let base = PathConfig {
        delay_ns: rtt_ns / 2,
        ..PathConfig::default()
    };
    (base.clone(), base)
}

/// E4's path: seed 003's netem on the receiver's ingress, `delay 150ms 200us loss 1`:
/// the data direction's delay uniform in its half of the RTT +- 200 us (may reorder),
/// as the simulator's E4.
fn e4_path(rate_bps: u64) -> (PathConfig, PathConfig) {
    let (mut fwd, rev) = path(rate_bps, 150 * MS, 0.01);
    fwd.delay_ns -= 200_000;
    fwd.jitter_ns = 400_000;
    (fwd, rev)
}

fn rate_name(bps: u64) -> String {
    match bps {
        b if b >= GBIT && b % GBIT == 0 => format!("{} Gbit/s", b / GBIT),
        b => format!("{} Mbit/s", b / 1_000_000),
    }
}

/// Progress lines on stderr (a real run takes seconds, not minutes).
fn say(quiet: bool, what: &str) {
    if !quiet {
        eprintln!("lowtide experiment --real: {what}");
    }
}

/// Repetitions of the real-path plan (wall-clock runs on a shared machine: the
/// report gives each figure's range over them).
pub const REPS: u32 = 3;

/// Runs the real-path parts of `exps`.
///
/// The whole plan runs [`REPS`] times, interleaved (every variant of every
/// experiment once, then again), so that a slow spell of this shared machine falls
/// on each variant alike; repetition k seeds the emulated links with `seed + k`.
pub fn run(exps: &[Experiment], quick: bool, seed: u64, quiet: bool) -> RealResults {
    let mut runs: Vec<RealRun> = Vec::new();
    for rep in 0..REPS {
        let seed = seed + rep as u64;
        for &e in exps {
            let from = runs.len();
            match e {
                Experiment::E3 => e3(quick, seed, quiet, &mut runs),
                Experiment::E4 => e4(quick, seed, quiet, &mut runs),
                Experiment::E5 => e5(seed, quiet, &mut runs),
                Experiment::E1 => e1(quick, seed, quiet, &mut runs),
                Experiment::E2 => e2(quick, seed, quiet, &mut runs),
            }
            for r in &mut runs[from..] {
                r.rep = rep;
            }
        }
    }
    let checks = exps
        .iter()
        .flat_map(|&e| super::checks::checks(e, &runs))
        .collect();
    RealResults {
        format: super::FORMAT,
        quick,
        measured: super::now_utc(),
        machine: super::machine(),
        experiments: exps.to_vec(),
        runs,
        checks,
    }
}

fn record(
    e: Experiment,
    side: Side,
    group: &str,
    variant: &str,
    params: &[(&str, String)],
) -> RealRun {
    RealRun {
        experiment: Some(e),
        side: Some(side),
        group: group.into(),
        variant: variant.into(),
        params: params
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        ..RealRun::default()
    }
}

/// Runs lowtide on the real path and fills `r`; the run's sysctls (lowtide's and
/// the kernel receiver's) go into its parameters, for the provenance.
fn stack(r: &mut RealRun, run: &StackRun, seed: u64, rate_bps: u64) {
    for s in &run.sysctls {
        r.params.push(("sysctl".into(), s.clone()));
    }
    for (k, v) in &run.kernel_sysctls {
        r.params
            .push(("sysctl".into(), format!("{k}={v} (kernel receiver)")));
    }
    match tun::run_stack(run, seed) {
        Ok(o) => fill_stack(r, &o, rate_bps),
        Err(e) => r.error = Some(e),
    }
}

/// Sets sysctl `name` in namespace `ns` for a kernel run and notes it in `r`'s
/// parameters, for the provenance.
fn set_sysctl(r: &mut RealRun, ns: &NetNs, name: &str, value: &str) -> Result<(), String> {
    r.params.push(("sysctl".into(), format!("{name}={value}")));
    kernel::sysctl(ns, name, value)
}

/// Fills a record from a lowtide run.
fn fill_stack(r: &mut RealRun, o: &tun::StackOutcome, rate_bps: u64) {
    let ms = |bytes: f64| bytes * 8.0 / rate_bps as f64 * 1e3;
    r.goodput_bps = if o.seconds > 0.0 {
        o.received as f64 * 8.0 / o.seconds
    } else {
        0.0
    };
    r.queue_mean_ms = Some(ms(o.queue_mean_bytes));
    r.queue_peak_ms = Some(ms(o.queue_peak_bytes as f64));
    r.ip_out_requests = Some(o.ip_out_requests);
    r.tcp_out_segs = Some(o.tcp_out_segs);
    r.ip_in_receives = Some(o.ip_in_receives);
    r.retrans_segs = Some(o.retrans_segs);
    r.cpu_user_s = Some(o.cpu_user_s);
    r.cpu_sys_s = Some(o.cpu_sys_s);
    r.cpu_per_ack_us = (o.ip_in_receives > 0).then(|| o.cpu_user_s * 1e6 / o.ip_in_receives as f64);
    r.mean_pages = Some(o.mean_pages);
    if !o.info_at_end.is_empty() {
        r.params.push((
            "first flow's tcp_info at the end".into(),
            o.info_at_end.clone(),
        ));
    }
    r.wakeups_per_s = (o.write_seconds > 0.0).then(|| o.wakeups as f64 / o.write_seconds);
    r.series = (o.queue_series.iter())
        .map(|&(t, b)| (t, ms(b as f64)))
        .collect();
}

/// The kernel's side of E1 and E2: `flows` bulk senders with `sysctls` in the
/// sender's namespace, the bottleneck on the sender's own device as lowtide's is
/// (htb at `rate` + pfifo on its TUN, so TSQ sees the queue), then `lowtide link`
/// for the round trip `rtt_ns` without a rate limit; TCP memory sampled with
/// `ss -tm` every 100 ms, context switches of the sender threads.
fn kernel_bulk_link(
    r: &mut RealRun,
    (flows, secs, rate, rtt_ns): (usize, u64, u64, u64),
    sysctls: &[(&str, &str)],
    seed: u64,
) -> Result<(), String> {
    let link = TunLink::start(path_delay_only(rtt_ns), Offload::Full, seed)?;
    kernel::htb_pfifo(&link.sender, &link.sender_dev, rate)?;
    let kernel_path = "htb + pfifo on the sender's TUN (offload on), then lowtide link for the RTT";
    r.params.push(("kernel path".into(), kernel_path.into()));
    for (k, v) in sysctls {
        set_sysctl(r, &link.sender, k, v)?;
    }
    let sink = kernel::sink(&link.receiver, 5201, flows)?;
    let mem = Sampler::start(&link.sender, Duration::from_millis(100), kernel::ss_memory)?;
    let to = SocketAddr::from((tun::LINK_RECEIVER, 5201));
    // The congestion control the sysctls name (E2: bbr), else the seeds' cubic.
    let bbr = sysctls.contains(&("net.ipv4.tcp_congestion_control", "bbr"));
    let cc = if bbr { "bbr" } else { "cubic" };
    let what = (Send::For(Duration::from_secs(secs)), cc);
    let senders = kernel::senders(&link.sender, to, flows, what, None)?;
    let (mut longest, mut ctx, mut first) = (0.0f64, 0u64, None);
    for s in senders {
        let sent = s
            .join()
            .map_err(|_| "kernel sender panicked".to_string())??;
        longest = longest.max(sent.seconds);
        ctx += sent.ctx_switches;
        first.get_or_insert(sent.info);
    }
    let samples = mem.finish();
    let received = sink
        .join()
        .map_err(|_| "kernel receiver panicked".to_string())??;
    link.stop()?;
    let busy: Vec<f64> = (samples.iter())
        .filter(|(t, _)| *t <= secs as f64)
        .map(|(_, b)| *b as f64)
        .collect();
    if busy.is_empty() {
        return Err("no memory samples (ss -tm failed)".into());
    }
    r.goodput_bps = if longest > 0.0 {
        received as f64 * 8.0 / longest
    } else {
        0.0
    };
    r.mean_pages = Some(busy.iter().sum::<f64>() / busy.len() as f64 / 4096.0);
    r.wakeups_per_s = Some(ctx as f64 / secs as f64);
    if let Some(info) = first {
        tcp_info_param(r, "first flow's tcp_info at the end", &info);
    }
    Ok(())
}

/// E1's one-flow group on the real path: the seed's single netperf flow ran on a
/// LAN; here one flow at 1 Gbit/s with a 1 ms round trip, where the send buffer
/// (tcp_sndbuf_expand of the flow's cwnd) leaves room for unsent data, so lowat binds.
pub const E1_ONE_FLOW: &str = "1 flow, 1 ms";

/// E1 (seed 000): bulk flows at 1 Gbit/s and 10 ms RTT, TCP_NOTSENT_LOWAT off vs
/// 128 KB (net.ipv4.tcp_notsent_lowat); then one flow at 1 ms ([`E1_ONE_FLOW`]), the
/// seed's context-switch comparison; lowtide on TUN and the kernel through
/// `lowtide link`.
fn e1(quick: bool, seed: u64, quiet: bool, runs: &mut Vec<RealRun>) {
    let (flows, secs) = if quick { (4, 3) } else { (20, 10) };
    let groups = [
        (format!("{flows} flows"), flows, 10 * MS),
        (E1_ONE_FLOW.to_string(), 1, MS),
    ];
    for (group, flows, rtt_ns) in groups {
        let params = [
            ("rate", rate_name(GBIT)),
            ("rtt", format!("{} ms", rtt_ns / MS)),
            ("duration", format!("{secs} s")),
        ];
        for (v, lowat) in [("A: lowat off", None), ("B: lowat 128 KB", Some("131072"))] {
            say(quiet, &format!("e1 lowtide {group} / {v}"));
            let mut r = record(Experiment::E1, Side::Lowtide, &group, v, &params);
            let run = StackRun {
                flows,
                path: path(GBIT, rtt_ns, 0.0),
                offload: Offload::Full,
                sysctls: lowat
                    .map(|l| format!("net.ipv4.tcp_notsent_lowat={l}"))
                    .into_iter()
                    .collect(),
                kernel_sysctls: Vec::new(),
                what: Send::For(Duration::from_secs(secs)),
                sndbuf: None,
                sample_every: Duration::from_millis(100),
            };
            stack(&mut r, &run, seed, GBIT);
            r.series.clear();
            runs.push(r);
            say(quiet, &format!("e1 kernel {group} / {v}"));
            let mut k = record(Experiment::E1, Side::Kernel, &group, v, &params);
            let sysctls: Vec<(&str, &str)> = lowat
                .map(|l| ("net.ipv4.tcp_notsent_lowat", l))
                .into_iter()
                .collect();
            let setting = (flows, secs, GBIT, rtt_ns);
            if let Err(e) = kernel_bulk_link(&mut k, setting, &sysctls, seed) {
                k.error = Some(e);
            }
            runs.push(k);
        }
    }
}

/// E2 (seed 001): BBR flows at 100 ms RTT, tcp_wmem max 64 MB, lowat 2 MB with and
/// without the lowat/2 wakeup rule (lowtide's switch; the kernel has the rule).
fn e2(quick: bool, seed: u64, quiet: bool, runs: &mut Vec<RealRun>) {
    let (flows, secs) = if quick { (2, 4) } else { (4, 10) };
    let group = format!("{flows} BBR flows");
    let params = [
        ("rate", rate_name(GBIT)),
        ("rtt", "100 ms".to_string()),
        ("duration", format!("{secs} s")),
        ("tcp_wmem", "4096 262144 64000000".into()),
    ];
    let base = [
        ("net.ipv4.tcp_congestion_control", "bbr"),
        ("net.ipv4.tcp_wmem", "4096 262144 64000000"),
    ];
    let variants: [(&str, Option<&str>, bool); 3] = [
        ("A: lowat off", None, true),
        ("B: lowat 2 MB, wake at lowat/2", Some("2097152"), true),
        (
            "C: lowat 2 MB, wake below lowat (ablation)",
            Some("2097152"),
            false,
        ),
    ];
    for (v, lowat, rule) in variants {
        say(quiet, &format!("e2 lowtide {group} / {v}"));
        let mut r = record(Experiment::E2, Side::Lowtide, &group, v, &params);
        let mut sysctls: Vec<String> = base.iter().map(|(k, v)| format!("{k}={v}")).collect();
        sysctls.extend(lowat.map(|l| format!("net.ipv4.tcp_notsent_lowat={l}")));
        sysctls.push(format!("experimental.notsent_wake_hysteresis={rule}"));
        let run = StackRun {
            flows,
            path: path(GBIT, 100 * MS, 0.0),
            offload: Offload::Full,
            sysctls,
            kernel_sysctls: Vec::new(),
            what: Send::For(Duration::from_secs(secs)),
            sndbuf: None,
            sample_every: Duration::from_millis(100),
        };
        stack(&mut r, &run, seed, GBIT);
        r.series.clear();
        runs.push(r);
        if !rule {
            continue;
        }
        say(quiet, &format!("e2 kernel {group} / {v}"));
        let mut k = record(Experiment::E2, Side::Kernel, &group, v, &params);
        let mut sysctls: Vec<(&str, &str)> = base.to_vec();
        sysctls.extend(lowat.map(|l| ("net.ipv4.tcp_notsent_lowat", l)));
        if let Err(e) = kernel_bulk_link(&mut k, (flows, secs, GBIT, 100 * MS), &sysctls, seed) {
            k.error = Some(e);
        }
        runs.push(k);
    }
}

/// E3 (seed 002): bulk senders into a 1000-packet pfifo at 1 Gbit/s and 100 Mbit/s,
/// 1 ms RTT, 1 and 4 flows. lowtide: its emulated link on TUN, experimental.tsq off
/// vs on. Kernel: veth + htb + pfifo, tcp_limit_output_bytes 1 GB vs the default.
fn e3(quick: bool, seed: u64, quiet: bool, runs: &mut Vec<RealRun>) {
    let secs = if quick { 2 } else { 10 };
    let settings: &[(u64, usize)] = match quick {
        true => &[(100_000_000, 1)],
        false => &[(GBIT, 1), (GBIT, 4), (100_000_000, 1), (100_000_000, 4)],
    };
    for &(rate, flows) in settings {
        let group = format!(
            "{}, {flows} flow{}",
            rate_name(rate),
            if flows == 1 { "" } else { "s" }
        );
        let params = [
            ("rate", rate_name(rate)),
            ("flows", flows.to_string()),
            ("duration", format!("{secs} s")),
            ("queue", "pfifo 1000 packets".into()),
        ];
        for (v, tsq) in [("A: TSQ off", false), ("B: TSQ on", true)] {
            say(quiet, &format!("e3 lowtide {group} / {v}"));
            let mut r = record(Experiment::E3, Side::Lowtide, &group, v, &params);
            let run = StackRun {
                flows,
                path: path(rate, MS, 0.0),
                offload: Offload::Full,
                sysctls: vec![format!("experimental.tsq={tsq}")],
                kernel_sysctls: Vec::new(),
                what: Send::For(Duration::from_secs(secs)),
                sndbuf: None,
                sample_every: Duration::from_millis(10),
            };
            stack(&mut r, &run, seed, rate);
            runs.push(r);
        }
        for (v, limit, routed) in [
            ("A: tcp_limit_output_bytes 1 GB", Some(HUGE_LIMIT), false),
            ("B: default", None, false),
            (
                "R: queue one hop away (a router's pfifo: TSQ does not see it)",
                None,
                true,
            ),
        ] {
            say(quiet, &format!("e3 kernel {group} / {v}"));
            let mut r = record(Experiment::E3, Side::Kernel, &group, v, &params);
            if let Err(e) = kernel_e3(&mut r, (rate, flows, secs), limit, routed, seed) {
                r.error = Some(e);
            }
            runs.push(r);
        }
    }
}

/// The kernel's E3 run: `flows` CUBIC senders for `secs` into a 1000-packet pfifo
/// under an htb at `rate`. Without `routed`, that queue is on the sender's own TUN
/// device and the path beyond it is `lowtide link` with lowtide's E3 propagation
/// delay (1 ms RTT, no rate limit): the same min_rtt as lowtide's runs, so
/// tcp_tso_autosize sizes the same TSO packets (veth alone has no delay, and this
/// kernel has no netem). With `routed`, the queue is on a router's device one hop
/// away, behind veth pairs.
fn kernel_e3(
    r: &mut RealRun,
    (rate, flows, secs): (u64, usize, u64),
    limit: Option<&str>,
    routed: bool,
    seed: u64,
) -> Result<(), String> {
    let (pair, link);
    let (sender, receiver, queue_ns, dev, to) = if routed {
        pair = Bottleneck::routed(rate)?;
        let to = SocketAddr::from((pair.receiver_addr, 5201));
        (&pair.sender, &pair.receiver, &pair.router, &pair.dev, to)
    } else {
        link = TunLink::start(path_delay_only(MS), Offload::Full, seed)?;
        kernel::htb_pfifo(&link.sender, &link.sender_dev, rate)?;
        let to = SocketAddr::from((tun::LINK_RECEIVER, 5201));
        (
            &link.sender,
            &link.receiver,
            &link.sender,
            &link.sender_dev,
            to,
        )
    };
    let path = match routed {
        true => "veth, a router's htb + pfifo, no propagation delay",
        false => "htb + pfifo on the sender's TUN (offload on), then lowtide link: 1 ms RTT",
    };
    r.params.push(("kernel path".into(), path.into()));
    if let Some(l) = limit {
        set_sysctl(r, sender, "net.ipv4.tcp_limit_output_bytes", l)?;
    }
    let used = kernel::read_sysctl(sender, "net.ipv4.tcp_limit_output_bytes")?;
    r.params.push(("tcp_limit_output_bytes".into(), used));
    let sink = kernel::sink(receiver, 5201, flows)?;
    let sampler = Sampler::backlog(queue_ns, dev, "10:", Duration::from_millis(10))?;
    // CUBIC, as the seed's bulk senders and lowtide's runs.
    let what = (Send::For(Duration::from_secs(secs)), "cubic");
    let snmp = || {
        sender
            .spawn(kernel::snmp)
            .map_err(|e| format!("snmp thread: {e}"))
    };
    let before = snmp()?.join().map_err(|_| "snmp panicked".to_string())??;
    let senders = kernel::senders(sender, to, flows, what, None)?;
    let (mut longest, mut first) = (0.0f64, None);
    for s in senders {
        let sent = s
            .join()
            .map_err(|_| "kernel sender panicked".to_string())??;
        longest = longest.max(sent.seconds);
        first.get_or_insert(sent.info);
    }
    let after = snmp()?.join().map_err(|_| "snmp panicked".to_string())??;
    let samples = sampler.finish();
    let received = sink
        .join()
        .map_err(|_| "kernel receiver panicked".to_string())??;
    // GSO packets and segments: segments per packet is the size goal the queue holds.
    counter_deltas(r, &before, &after);
    if let Some(info) = first {
        tcp_info_param(r, "first flow's tcp_info at the end", &info);
    }
    let ms = |b: f64| b * 8.0 / rate as f64 * 1e3;
    r.goodput_bps = if longest > 0.0 {
        received as f64 * 8.0 / longest
    } else {
        0.0
    };
    // Samples while the senders were writing (the last ones are the drain).
    let busy: Vec<&(f64, u64)> = samples.iter().filter(|(t, _)| *t <= secs as f64).collect();
    if busy.is_empty() {
        return Err("no qdisc samples (tc -s -j qdisc show failed)".into());
    }
    let mean = busy.iter().map(|(_, b)| *b as f64).sum::<f64>() / busy.len() as f64;
    let peak = busy.iter().map(|(_, b)| *b).max().unwrap_or(0);
    r.queue_mean_ms = Some(ms(mean));
    r.queue_peak_ms = Some(ms(peak as f64));
    r.series = samples.iter().map(|&(t, b)| (t, ms(b as f64))).collect();
    Ok(())
}

/// E4 (seed 003): lowtide sender on TUN without offload (the kernel receiver gets
/// single segments: nothing for GRO to merge), 150 ms RTT, 1 % loss on the data path,
/// BBR, a send buffer of up to 256 MB and the simulator's receive buffer
/// ([`E4_RCVBUF`], from the start: a receiver that never limits); list vs tree.
/// Goodput and the sender thread's CPU per ACK.
fn e4(quick: bool, seed: u64, quiet: bool, runs: &mut Vec<RealRun>) {
    // One list, tree and kernel run per repetition of the plan (`REPS`).
    let (secs, rate, reps) = match quick {
        true => (4, 100_000_000, 1),
        false => (20, 500_000_000, 1),
    };
    let group = format!("{}, 150 ms, 1 % loss", rate_name(rate));
    let params = [
        ("rate", rate_name(rate)),
        ("duration", format!("{secs} s")),
        ("cc", "bbr".into()),
        ("offload", "off (receiver gets MSS packets)".into()),
        (
            "jitter",
            "+-200 us on the data direction (netem 200us)".into(),
        ),
    ];
    // Alternating list, tree and the kernel, so that a slow spell of the machine
    // hits each.
    let order = (0..reps).flat_map(|_| {
        [
            ("A: list", "list"),
            ("B: tree", "tree"),
            ("K: kernel", "kernel"),
        ]
    });
    for (v, kind) in order {
        if kind == "kernel" {
            say(quiet, &format!("e4 kernel {group} through lowtide link"));
            let v = "B: kernel BBR (its retransmit queue is a tree)";
            let mut r = record(Experiment::E4, Side::Kernel, &group, v, &params);
            if let Err(e) = kernel_e4(&mut r, rate, secs, seed) {
                r.error = Some(e);
            }
            runs.push(r);
            continue;
        }
        say(quiet, &format!("e4 lowtide {group} / {v}"));
        let mut r = record(Experiment::E4, Side::Lowtide, &group, v, &params);
        let run = StackRun {
            flows: 1,
            path: e4_path(rate),
            offload: Offload::None,
            sysctls: vec![
                "net.ipv4.tcp_congestion_control=bbr".into(),
                format!("net.ipv4.tcp_rmem={}", e4_rmem()),
                "net.ipv4.tcp_wmem=4096 16384 268435456".into(),
                format!("experimental.rtx_queue={kind}"),
            ],
            // The seed's 4.14 receiver had no SACK compression (4.18).
            kernel_sysctls: vec![
                ("net.ipv4.tcp_rmem".into(), e4_rmem()),
                ("net.ipv4.tcp_comp_sack_nr".into(), "0".into()),
            ],
            what: Send::For(Duration::from_secs(secs)),
            sndbuf: None,
            sample_every: Duration::from_millis(100),
        };
        stack(&mut r, &run, seed, rate);
        r.series.clear();
        runs.push(r);
    }
}

/// E4's receivers' `tcp_rmem`: [`E4_RCVBUF`] from the start.
fn e4_rmem() -> String {
    format!("4096 {E4_RCVBUF} {E4_RCVBUF}")
}

/// The kernel's side of E4: one BBR flow through `lowtide link` at `rate`, 150 ms,
/// 1 % loss on the data path, device offload off, E4's buffers; goodput and the
/// sender namespace's counters.
fn kernel_e4(r: &mut RealRun, rate: u64, secs: u64, seed: u64) -> Result<(), String> {
    let link = TunLink::start(e4_path(rate), Offload::None, seed)?;
    set_sysctl(r, &link.sender, "net.ipv4.tcp_congestion_control", "bbr")?;
    set_sysctl(r, &link.sender, "net.ipv4.tcp_wmem", "4096 16384 268435456")?;
    set_sysctl(r, &link.receiver, "net.ipv4.tcp_rmem", &e4_rmem())?;
    set_sysctl(r, &link.receiver, "net.ipv4.tcp_comp_sack_nr", "0")?;
    let what = (Send::For(Duration::from_secs(secs)), "bbr");
    let (sent, received, before, after) = kernel_to_sink(&link, what, None)?;
    link.stop()?;
    kernel_figures(r, &sent, received, &before, &after);
    tcp_info_param(r, "tcp_info at the end", &sent.info);
    Ok(())
}

/// E5 (seed 004): one 2,000,000-byte transfer at 40 ms RTT on 1 Gbit/s with
/// SO_SNDBUF 1,000,000. lowtide: sized at write vs at transmit time. Kernel: through
/// `lowtide link`, nstat's counters in the sender's namespace.
fn e5(seed: u64, quiet: bool, runs: &mut Vec<RealRun>) {
    let group = "2,000,000 bytes";
    let params = [
        ("rate", rate_name(GBIT)),
        ("rtt", "40 ms".to_string()),
        ("SO_SNDBUF", "1000000".into()),
    ];
    for (v, at) in [
        ("A: size at write", "write"),
        ("B: size at transmit", "transmit"),
    ] {
        say(quiet, &format!("e5 lowtide / {v}"));
        let mut r = record(Experiment::E5, Side::Lowtide, group, v, &params);
        let run = StackRun {
            flows: 1,
            path: path(GBIT, 40 * MS, 0.0),
            offload: Offload::Full,
            sysctls: vec![format!("experimental.size_goal_at={at}")],
            kernel_sysctls: Vec::new(),
            what: Send::Bytes(2_000_000),
            sndbuf: Some(1_000_000),
            sample_every: Duration::from_millis(10),
        };
        stack(&mut r, &run, seed, GBIT);
        r.series.clear();
        runs.push(r);
    }
    say(quiet, "e5 kernel through lowtide link");
    let mut r = record(
        Experiment::E5,
        Side::Kernel,
        group,
        "B: kernel (sizes at transmit time)",
        &params,
    );
    if let Err(e) = kernel_e5(&mut r, seed) {
        r.error = Some(e);
    }
    runs.push(r);
}

/// Snmp counters of a namespace, as `kernel::snmp` reads them.
type Snmp = Vec<(String, u64)>;

/// One kernel sender in `link`'s sender namespace (`what`, `SO_SNDBUF` if given) to a
/// sink on the receiver's port 5201: what it sent, the bytes the sink read, and the
/// sender's snmp counters before and after.
fn kernel_to_sink(
    link: &TunLink,
    what: (Send, &'static str),
    sndbuf: Option<u32>,
) -> Result<(kernel::Sent, u64, Snmp, Snmp), String> {
    let sink = kernel::sink(&link.receiver, 5201, 1)?;
    let to = SocketAddr::from((tun::LINK_RECEIVER, 5201));
    let h = link
        .sender
        .spawn(move || -> Result<_, String> {
            let before = kernel::snmp()?;
            let sent = kernel::send_one(to, what, sndbuf)?;
            let after = kernel::snmp()?;
            Ok((sent, before, after))
        })
        .map_err(|e| format!("sender thread: {e}"))?;
    let (sent, before, after) = h
        .join()
        .map_err(|_| "kernel sender panicked".to_string())??;
    let received = sink
        .join()
        .map_err(|_| "kernel receiver panicked".to_string())??;
    Ok((sent, received, before, after))
}

/// A kernel sender's figures: the sender namespace's counters between `before` and
/// `after`, and the goodput of the `received` bytes over the sender's time.
fn kernel_figures(
    r: &mut RealRun,
    sent: &kernel::Sent,
    received: u64,
    before: &Snmp,
    after: &Snmp,
) {
    counter_deltas(r, before, after);
    r.goodput_bps = if sent.seconds > 0.0 {
        received as f64 * 8.0 / sent.seconds
    } else {
        0.0
    };
}

/// The sender namespace's counters (nstat names) between `before` and `after`.
fn counter_deltas(r: &mut RealRun, before: &Snmp, after: &Snmp) {
    let d = |n: &str| kernel::counter(after, n).saturating_sub(kernel::counter(before, n));
    r.ip_out_requests = Some(d("IpOutRequests"));
    r.tcp_out_segs = Some(d("TcpOutSegs"));
    r.ip_in_receives = Some(d("IpInReceives"));
    r.retrans_segs = Some(d("TcpRetransSegs"));
}

/// A kernel sender's `tcp_info` at the end, as the run's parameter `what`.
fn tcp_info_param(r: &mut RealRun, what: &str, info: &kernel::EndInfo) {
    r.params.push((what.into(), info.to_string()));
}

fn kernel_e5(r: &mut RealRun, seed: u64) -> Result<(), String> {
    let link = TunLink::start(path(GBIT, 40 * MS, 0.0), Offload::Full, seed)?;
    let what = (Send::Bytes(2_000_000), "cubic");
    let (sent, received, before, after) = kernel_to_sink(&link, what, Some(1_000_000))?;
    link.stop()?;
    tcp_info_param(r, "tcp_info at the end", &sent.info);
    if sent.bytes != 2_000_000 || received != sent.bytes {
        return Err(format!(
            "kernel wrote {} bytes, the receiver read {received}",
            sent.bytes
        ));
    }
    kernel_figures(r, &sent, received, &before, &after);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real path's E4 has the simulator's jitter: seed 003's netem `delay 150ms
    /// 200us` on the data direction only, the mean RTT still 150 ms.
    #[test]
    fn e4_path_has_the_seed_jitter_on_the_data_direction() {
        let (fwd, rev) = e4_path(500_000_000);
        assert_eq!((fwd.jitter_ns, rev.jitter_ns), (400_000, 0));
        assert_eq!(fwd.delay_ns + fwd.jitter_ns / 2 + rev.delay_ns, 150 * MS);
        assert_eq!((fwd.loss, rev.loss), (0.01, 0.0));
    }
}
