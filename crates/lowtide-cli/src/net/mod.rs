//! `lowtide net run FILE`: a scenario file run with the kernel's own TCP through
//! the scenario's network emulated in real time. Each host is a network namespace
//! with a TUN device (its address from the scenario, 10.0.0.N/8 routed through the
//! device); this process runs the routers, links and queues between the devices
//! with the simulator's own code ([`lowtide_sim::network::fabric`]), and every flow
//! is a kernel TCP connection between two namespaces ([`flows`]; a
//! request/response flow's client and server in [`rr`]). The report has
//! the simulator's figures and checks; `--compare` also runs the simulator and puts
//! both side by side. Needs root; nothing is routed in the root namespace, and the
//! namespaces and devices go with the process.
//!
//! A host with `stack = "lowtide"` has no namespace: it is a lowtide stack in this
//! process on its port of the emulated network, its flows' sides run there
//! ([`lowtide_host`]) against the kernel's threads or other lowtide hosts, and
//! the report calls the run "real". A file with lowtide hosts only needs no root.
//!
//! What differs from the simulator, by construction: a kernel host's TUN device
//! hands its packets over at once (the host's queue is emulated here, so TCP Small
//! Queues does not see it, as behind a router); the kernel segments before the
//! device (no TSO); RTT is the mean of `tcpi_rtt` sampled every 10 ms (the
//! simulator's is the mean of its RTT samples).

pub mod flows;
pub mod lowtide_host;
pub mod rr;

use clap::{Args, Subcommand};
use flows::{KernelFlow, Shared};
use lowtide_host::LowtideHosts;
use lowtide_lab::real::kernel;
use lowtide_sim::network::fabric::Fabric;
use lowtide_sim::network::report::{delay_figures, set_mean_cwnd};
use lowtide_sim::network::schema::{sysctl_pairs, HostStack};
use lowtide_sim::network::{FlowReport, FlowSeries, NetResults, ScenarioFile, Topology};
use lowtide_sim::verdict::{FlowOutcome, Goal, Liveness, Verdict};
use lowtide_tun::clock::{Clock, Sleeper};
use lowtide_tun::device::{Offload, TunDevice, RECV_BUF_LEN};
use lowtide_tun::netns::{self, NetNs};
use lowtide_tun::vnet::{finish_rx_checksum, VnetHdr};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Most flows a kernel run takes (two threads each).
pub const MAX_FLOWS: usize = 256;

/// `lowtide net ...`.
#[derive(Subcommand, Debug)]
pub enum NetCommand {
    /// A scenario file with the kernel's TCP, each host a network namespace with a
    /// TUN device, the routers, links and queues emulated in real time by the
    /// simulator's code; `--compare` also runs the simulator (needs root).
    Run(NetRunArgs),
}

/// `net run`'s arguments.
#[derive(Args, Debug)]
pub struct NetRunArgs {
    #[command(flatten)]
    file: crate::scenario::FileArgs,
    /// Also run the scenario in the simulator and report both side by side.
    #[arg(long)]
    compare: bool,
    /// Print the results as JSON (`{"kernel": ...}`, with `"sim"` under --compare).
    #[arg(long)]
    json: bool,
    /// Writes the report into this directory, as `sim run --out`: `report.txt`,
    /// `results.json` and the plots (goodput and cwnd per flow, queue delay per
    /// queue), under --compare the simulator's lines solid and this run's dashed.
    #[arg(long, value_name = "DIR")]
    out: Option<std::path::PathBuf>,
}

/// Runs `lowtide net ...`.
pub fn run(cmd: &NetCommand) -> ExitCode {
    let NetCommand::Run(args) = cmd;
    let shown = args.file.shown();
    let (file, topo) = match args.file.load() {
        Ok(x) => x,
        Err(e) => return crate::usage_error(&e),
    };
    if topo.flows.len() > MAX_FLOWS {
        return crate::usage_error(&format!(
            "{shown}: {} flows: a kernel run takes {MAX_FLOWS} at most",
            topo.flows.len()
        ));
    }
    let lowtide = lowtide_hosts(&file, &topo);
    // The real-time run's name in the report: the kernel's, or with lowtide hosts
    // beside them, "real".
    let label = match lowtide.contains(&true) {
        true => "real",
        false => "kernel",
    };
    if let Some(Err(e)) = (args.out.as_ref()).map(|d| crate::outputs::check_dir("--out", d)) {
        return crate::usage_error(&e);
    }
    let any_kernel = (file.hosts.values()).any(|h| h.stack == HostStack::Kernel);
    if let Some(why) = cannot_run().filter(|_| any_kernel) {
        return crate::usage_error(&format!("net run needs root: {why}"));
    }
    let sim = match args.compare {
        true => match lowtide_sim::network::run(&topo) {
            Ok(r) => Some(r),
            Err(e) => return crate::usage_error(&format!("{shown}: {e}")),
        },
        false => None,
    };
    let kernel = match emulate(&file, &topo, &lowtide) {
        Ok(r) => r,
        Err(e) => return crate::run_failure(&format!("{shown}: {e}")),
    };
    let mut json = serde_json::json!({ "kernel": kernel });
    if let Some(s) = &sim {
        json["sim"] = serde_json::json!(s);
    }
    let text = match &sim {
        Some(s) => render_compare(s, &kernel, label),
        None => crate::scenario::render_tables(&kernel) + &footer(&kernel, label),
    } + &stacks_line(&topo, &lowtide);
    match args.json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(&json).unwrap_or_default()
        ),
        false => print!("{text}"),
    }
    if let Some(dir) = &args.out {
        let caption = crate::scenario_out::caption(&args.file);
        let mut runs = Vec::new();
        if let Some(s) = &sim {
            runs.push(("sim", s));
        }
        runs.push((label, &kernel));
        match crate::scenario_out::write(dir, &text, &json, &runs, &caption) {
            Ok(files) if !args.json => print!("{}", crate::scenario_out::wrote(dir, &files)),
            Ok(_) => {}
            Err(e) => return crate::run_failure(&format!("--out: {e}")),
        }
    }
    let mut ok = true;
    for (name, r) in [(label, Some(&kernel)), ("sim", sim.as_ref())] {
        let Some(r) = r else { continue };
        ok &= crate::scenario::report_failures(&format!("{shown} ({name})"), r);
    }
    match ok {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

/// Which hosts run lowtide (`stack = "lowtide"`), by node index.
fn lowtide_hosts(file: &ScenarioFile, t: &Topology) -> Vec<bool> {
    (t.nodes.iter())
        .map(|n| (file.hosts.get(&n.name)).is_some_and(|h| h.stack == HostStack::Lowtide))
        .collect()
}

/// The line that names the lowtide hosts of a real-time run (nothing without any).
fn stacks_line(t: &Topology, lowtide: &[bool]) -> String {
    let names: Vec<&str> = (t.nodes.iter().zip(lowtide))
        .filter(|(_, &lt)| lt)
        .map(|(n, _)| n.name.as_str())
        .collect();
    match names.is_empty() {
        true => String::new(),
        false => format!(
            "real: lowtide on {} (in this process), the kernel's TCP on the other hosts\n",
            names.join(", ")
        ),
    }
}

/// Why this process cannot make namespaces and TUN devices, if it cannot.
fn cannot_run() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        return Some(format!(
            "network namespaces and TUN devices (effective uid {euid}, not 0)"
        ));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some("/dev/net/tun does not exist".into());
    }
    None
}

/// A kernel host: its namespace and its device.
struct KernelHost {
    // The device before the namespace: it is closed first.
    dev: TunDevice,
    ns: NetNs,
}

/// Sets the flows' abort flag when dropped, so that every thread ends whatever
/// way the run leaves.
struct AbortOnDrop(Arc<Shared>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort.store(true, Ordering::Relaxed);
    }
}

/// The kernel hosts' namespaces and devices, configured: address, link up, a
/// long device queue (the host's queue is emulated behind it), the file's `net.*`
/// sysctls; `None` for a lowtide host.
fn hosts(file: &ScenarioFile, t: &Topology) -> Result<Vec<Option<KernelHost>>, String> {
    let mut out = Vec::new();
    for (h, node) in t.nodes.iter().enumerate() {
        let Some(spec) = file.hosts.get(&node.name) else {
            continue;
        };
        if spec.stack == HostStack::Lowtide {
            out.push(None);
            continue;
        }
        let IpAddr::V4(addr) = flows::addr_of(t, h) else {
            return Err("hosts: IPv4 only".into());
        };
        let ns = kernel::namespace("ltn")?;
        let name = netns::unique_name("ltn");
        let dev = TunDevice::open_in(ns.name(), &name, Offload::None)
            .map_err(|e| format!("hosts.{}: TUN device: {e}", node.name))?;
        crate::real::configure(&dev, (addr, 8))?;
        kernel::exec(&ns, &["ip", "link", "set", &name, "txqueuelen", "10000"])?;
        let _ = kernel::sysctl(&ns, "net.ipv6.conf.all.disable_ipv6", "1");
        for (k, v) in sysctl_pairs(&spec.sysctls)? {
            if k.starts_with("net.") {
                kernel::sysctl(&ns, &k, &v).map_err(|e| format!("hosts.{}: {e}", node.name))?;
            }
        }
        dev.set_nonblocking(true)
            .map_err(|e| format!("{name}: non-blocking: {e}"))?;
        out.push(Some(KernelHost { dev, ns }));
    }
    Ok(out)
}

/// Where the fabric's packets for a host go: a kernel host's device, a lowtide
/// host's stack.
struct Sinks<'a> {
    kernel: &'a [Option<KernelHost>],
    lt: LowtideHosts,
    /// Packets a device refused.
    errors: u64,
}

impl Sinks<'_> {
    fn deliver(&mut self, now: u64, h: usize, pkt: Vec<u8>) {
        match &self.kernel[h] {
            Some(k) => {
                if !matches!(k.dev.send_or_drop(&VnetHdr::plain(), &pkt), Ok(true)) {
                    self.errors += 1;
                }
            }
            None => self.lt.deliver(now, h, &pkt),
        }
    }
}

/// Runs the scenario with the kernel's TCP (and lowtide's on `lowtide` hosts,
/// by node index) through the emulated network.
fn emulate(file: &ScenarioFile, t: &Topology, lowtide: &[bool]) -> Result<NetResults, String> {
    let wall = std::time::Instant::now();
    lowtide_tun::stop::install_handlers();
    let hosts = hosts(file, t)?;
    let clock = Clock::start();
    let fds: Vec<i32> = hosts.iter().flatten().map(|h| h.dev.as_raw_fd()).collect();
    let mut sleeper = Sleeper::new(clock, &fds).map_err(|e| format!("epoll: {e}"))?;
    let shared = Arc::new(Shared {
        clock,
        stop: AtomicBool::new(false),
        abort: AtomicBool::new(false),
        read: (0..t.flows.len()).map(|_| AtomicU64::new(0)).collect(),
        ended: AtomicU64::new(0),
        grid: (t.series_interval_ns, t.duration_ns),
    });
    let guard = AbortOnDrop(shared.clone());
    let mut sinks = Sinks {
        kernel: &hosts,
        lt: LowtideHosts::new(t, lowtide)?,
        errors: 0,
    };
    let namespaces: Vec<Option<&NetNs>> =
        (hosts.iter()).map(|h| h.as_ref().map(|h| &h.ns)).collect();
    let started = flows::start(t, &namespaces, &shared)?;
    let mut fabric = Fabric::new(t);
    let at_end = drive(t, &mut fabric, &mut sinks, &mut sleeper, &shared)?;
    drop(guard);
    let (end, errors) = (t.duration_ns, sinks.errors);
    let end_ns = at_end.as_ref().map_or(end, |a| a.0);
    let outs: Vec<_> = (started.into_iter().enumerate())
        .map(|(i, f)| join(f, sinks.lt.take(t, i, end_ns)))
        .collect::<Result<_, _>>()?;
    let (end_ns, read_at_end) = at_end.unwrap_or((end, vec![0; t.flows.len()]));
    let mut flows: Vec<FlowReport> = (t.flows.iter().enumerate())
        .map(|(i, def)| flow_report(t, def, &outs[i], (end_ns, read_at_end[i])))
        .collect();
    let flow_series: Vec<FlowSeries> = (outs.iter().zip(&t.flows))
        .map(|((s, r), def)| {
            let bytes = r.read.clone().finish(end_ns);
            let cwnd = s.cwnd.clone().finish(end_ns);
            FlowSeries::from_grid(
                &def.name,
                t.series_interval_ns,
                bytes.into_iter().map(|b| b.unwrap_or(0)).collect(),
                cwnd.into_iter().map(|c| c.map(|c| c as u32)).collect(),
            )
        })
        .collect();
    set_mean_cwnd(t, &mut flows, &flow_series, end_ns);
    let verdict = verdict(t, &outs, end_ns);
    let queues = fabric.queue_reports(end_ns, &flows);
    let mut r = NetResults::assemble(t, end_ns, verdict, flows, queues);
    r.series = fabric.series();
    r.flow_series = flow_series;
    r.router_drops = fabric.router_drops + errors;
    r.sim_packets = fabric.packets();
    r.sim_wall_s = wall.elapsed().as_secs_f64();
    drop(hosts);
    Ok(r)
}

/// The run's loop until its end and the flows' grace: the network, the lowtide
/// hosts and the kernel hosts' devices in real time. Gives when the run's time
/// ended (ns) and the bytes each flow had read by then.
fn drive(
    t: &Topology,
    fabric: &mut Fabric,
    sinks: &mut Sinks,
    sleeper: &mut Sleeper,
    sh: &Shared,
) -> Result<Option<(u64, Vec<u64>)>, String> {
    let clock = sh.clock;
    let (end, sides) = (t.duration_ns, 2 * t.flows.len() as u64);
    let all_fixed = t.flows.iter().all(|f| f.bytes.is_some());
    let grace = flows::GRACE.as_nanos() as u64;
    let mut buf = vec![0u8; RECV_BUF_LEN];
    let mut at_end: Option<(u64, Vec<u64>)> = None;
    loop {
        if lowtide_tun::stop::requested() {
            // Dropping the guard stops the flows; the namespaces go with `hosts`.
            return Err("interrupted".into());
        }
        read_devices(fabric, sinks, clock, &mut buf)?;
        let now = clock.now().as_nanos();
        fabric.advance(now, |h, p| sinks.deliver(now, h, p));
        sinks.lt.run(t, now, fabric, sh);
        let ended = sh.ended.load(Ordering::Relaxed);
        if at_end.is_none() && (now >= end || (all_fixed && ended == sides)) {
            let read = (sh.read.iter())
                .map(|r| r.load(Ordering::Relaxed))
                .collect();
            at_end = Some((now.min(end), read));
            sh.stop.store(true, Ordering::Relaxed);
        }
        if let Some((e, _)) = &at_end {
            if ended == sides || now > e + grace {
                return Ok(at_end);
            }
        }
        let next = (fabric.next_event().into_iter())
            .chain(sinks.lt.next_deadline(t, now))
            .min()
            .unwrap_or(u64::MAX);
        let deadline = next.min(now + 5_000_000).min(end.max(now));
        sleeper
            .sleep_until(lowtide::Instant(deadline))
            .map_err(|e| format!("epoll: {e}"))?;
    }
}

/// What the kernel hosts' devices have, into the network, a budget per device.
fn read_devices(
    fabric: &mut Fabric,
    sinks: &mut Sinks,
    clock: Clock,
    buf: &mut [u8],
) -> Result<(), String> {
    let kernel = sinks.kernel;
    for (h, host) in kernel.iter().enumerate() {
        let Some(host) = host else { continue };
        for _ in 0..lowtide_tun::device::READ_BUDGET {
            let n = match host.dev.try_recv(buf) {
                Ok(Some(n)) => n,
                Ok(None) => break,
                Err(e) => return Err(format!("reading {}: {e}", host.dev.name())),
            };
            // The packet left its host about now, not when this iteration began:
            // stamped with the loop's `now`, a packet read after the thread was
            // descheduled would cross the path early (a kernel flow once saw
            // 10.8 ms of a 20 ms RTT under load). The network runs to it first.
            let t = clock.now().as_nanos();
            fabric.advance(t, |h, p| sinks.deliver(t, h, p));
            inject(fabric, t, h, &mut buf[..n]);
        }
    }
    Ok(())
}

/// A packet read from host `h`'s device (virtio-net header, then the IP packet)
/// into the fabric: checksums completed, a GSO packet cut into wire segments.
fn inject(fabric: &mut Fabric, now: u64, h: usize, raw: &mut [u8]) {
    let Ok((hdr, _)) = VnetHdr::parse(raw) else {
        return;
    };
    let packet = &mut raw[VnetHdr::LEN..];
    if finish_rx_checksum(&hdr, packet).is_err() {
        return;
    }
    if hdr.is_gso() {
        let _ = lowtide_wire::gso::segment(packet, hdr.gso_size, |s| fabric.send(now, h, s));
    } else {
        fabric.send(now, h, packet.to_vec());
    }
}

type FlowOut = (flows::SenderOut, flows::ReceiverOut);

/// A flow's two sides: its kernel threads' outcomes, else its lowtide sides'.
fn join(
    f: KernelFlow,
    lt: (Option<flows::SenderOut>, Option<flows::ReceiverOut>),
) -> Result<FlowOut, String> {
    let s = match (f.sender, lt.0) {
        (Some(h), _) => h.join().map_err(|_| "a sender thread panicked")?,
        (None, Some(s)) => s,
        (None, None) => return Err("a flow without a sender".into()),
    };
    let r = match (f.receiver, lt.1) {
        (Some(h), _) => h.join().map_err(|_| "a receiver thread panicked")?,
        (None, Some(r)) => r,
        (None, None) => return Err("a flow without a receiver".into()),
    };
    Ok((s, r))
}

/// A kernel flow's figures, as the simulator reports its flows: goodput over its
/// time (a timed flow's bytes read by the run's end, else all of them up to the
/// last).
fn flow_report(
    t: &Topology,
    def: &lowtide_sim::network::topology::FlowDef,
    (s, r): &FlowOut,
    (end_ns, read_at_end): (u64, u64),
) -> FlowReport {
    let (bytes, stop) = match (def.bytes, def.stop_ns) {
        (None, None) => (read_at_end, end_ns),
        _ => (r.verifier.received(), r.last_byte_ns),
    };
    let secs = stop.saturating_sub(def.start_ns) as f64 / 1e9;
    let delays: Vec<u64> = (s.probe_writes.iter().zip(&r.probe_reads))
        .map(|(w, r)| r.saturating_sub(*w))
        .collect();
    let (delay_ms, delay_p99_ms, delay_max_ms) = delay_figures(delays);
    let (sum, n, min) = s.rtt;
    let mut report = FlowReport {
        name: def.name.clone(),
        from: t.nodes[def.from].name.clone(),
        to: t.nodes[def.to].name.clone(),
        cc: flows::cc_of(t, def),
        goodput_mbps: match secs > 0.0 {
            true => bytes as f64 * 8.0 / secs / 1e6,
            false => 0.0,
        },
        bytes,
        rtt_ms: if n > 0 {
            sum as f64 / n as f64 / 1e3
        } else {
            0.0
        },
        min_rtt_ms: min as f64 / 1e3,
        retrans: s.retrans as u64,
        delay_ms,
        delay_p99_ms,
        delay_max_ms,
        ..FlowReport::default()
    };
    if def.rr.is_some() {
        report.set_transactions(&s.latencies, secs);
    }
    report
}

/// Every kernel flow connected and delivered intact, judged as the simulator
/// judges its flows.
fn verdict(t: &Topology, outs: &[FlowOut], end_ns: u64) -> Verdict {
    let outcomes: Vec<FlowOutcome> = (outs.iter().zip(&t.flows).enumerate())
        .map(|(i, ((s, r), def))| {
            let v = &r.verifier;
            let connected = s.connected_ns.unwrap_or(def.start_ns);
            // An on/off flow is not idle while it is off.
            let off = flows::off_period(def, end_ns).map_or(0, |(from, _)| from);
            let last = connected.max(r.last_byte_ns).max(off).min(end_ns);
            let responses = s.responses.as_ref().and_then(|v| v.first_error());
            let (goal, complete) = match (def.bytes, def.stop_ns) {
                (Some(n), _) => (Goal::Bytes(n), v.complete_and_intact()),
                (None, Some(_)) => (
                    Goal::UntilClose,
                    v.eof() && v.first_error().is_none() && v.received() == s.written,
                ),
                (None, None) => (Goal::Timed, false),
            };
            FlowOutcome {
                flow: i as u32,
                connected: s.connected_ns.is_some(),
                error: s.error.or(r.error),
                delivered: v.received(),
                goal,
                complete,
                first_error_offset: v.first_error().or(responses),
                idle: Duration::from_nanos(end_ns.saturating_sub(last)),
                sender_lag: Duration::ZERO,
            }
        })
        .collect();
    Verdict::judge(
        &outcomes,
        &Liveness::bulk(Duration::from_nanos(t.duration_ns)),
    )
}

/// The last lines of a report: what ran, the verdict, the checks.
fn footer(r: &NetResults, engine: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n{engine}: {:.1} s in real time: {} ({} packets through the emulated network, {:.2} s wall)",
        r.duration_s,
        r.verdict.summary(),
        r.sim_packets,
        r.sim_wall_s
    );
    s.push_str(&crate::scenario::render_checks(r));
    s
}

/// `sim | kernel` of two figures.
fn pair(a: Option<f64>, b: Option<f64>) -> String {
    let f = |x: Option<f64>| x.map_or("-".into(), crate::scenario::num);
    format!("{} | {}", f(a), f(b))
}

/// The request/response flows' transactions side by side (nothing without any).
fn render_compare_rr(sim: &NetResults, kernel: &NetResults, nw: usize) -> String {
    let mut s = String::new();
    let rr: Vec<_> = (sim.flows.iter().zip(&kernel.flows))
        .filter(|(a, _)| a.transactions.is_some())
        .collect();
    if rr.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "\n{:<nw$} {:>15} {:>17} {:>17} {:>17} {:>17} {:>17}",
        "flow", "transactions", "trans/s", "lat ms", "p50 ms", "p99 ms", "max ms"
    );
    for (a, b) in rr {
        let _ = writeln!(
            s,
            "{:<nw$} {:>15} {:>17} {:>17} {:>17} {:>17} {:>17}",
            a.name,
            format!(
                "{} | {}",
                a.transactions.unwrap_or(0),
                b.transactions.unwrap_or(0)
            ),
            pair(a.tps, b.tps),
            pair(a.latency_ms, b.latency_ms),
            pair(a.latency_p50_ms, b.latency_p50_ms),
            pair(a.latency_p99_ms, b.latency_p99_ms),
            pair(a.latency_max_ms, b.latency_max_ms),
        );
    }
    s
}

/// The simulator's and the real-time run's results side by side (`label`: the
/// latter's name, "kernel" or "real"): per flow, per queue (those a flow's data
/// crosses), and each check in both.
pub fn render_compare(sim: &NetResults, kernel: &NetResults, label: &str) -> String {
    let mut s = String::new();
    let nw = (sim.flows.iter().map(|f| f.name.len()))
        .max()
        .unwrap_or(0)
        .max(4);
    let _ = writeln!(s, "sim | {label}");
    let _ = writeln!(
        s,
        "{:<nw$} {:<6} {:>17} {:>17} {:>17} {:>13} {:>13} {:>17}",
        "flow", "cc", "Mbit/s", "rtt ms", "min rtt ms", "retr", "cwnd", "delay ms"
    );
    for (a, b) in sim.flows.iter().zip(&kernel.flows) {
        let _ = writeln!(
            s,
            "{:<nw$} {:<6} {:>17} {:>17} {:>17} {:>13} {:>13} {:>17}",
            a.name,
            a.cc,
            pair(Some(a.goodput_mbps), Some(b.goodput_mbps)),
            pair(Some(a.rtt_ms), Some(b.rtt_ms)),
            pair(Some(a.min_rtt_ms), Some(b.min_rtt_ms)),
            format!("{} | {}", a.retrans, b.retrans),
            pair(a.cwnd, b.cwnd),
            pair(a.delay_ms, b.delay_ms),
        );
    }
    s.push_str(&render_compare_rr(sim, kernel, nw));
    let qw = (sim.queues.iter().map(|q| q.name.len()))
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        s,
        "\n{:<qw$} {:<8} {:>17} {:>17} {:>15} {:>13} {:>13} {:>13}",
        "queue", "qdisc", "backlog B", "sojourn ms", "drops", "ce", "util", "jain"
    );
    for (a, b) in sim
        .queues
        .iter()
        .zip(&kernel.queues)
        .filter(|(a, _)| a.flows > 0)
    {
        let _ = writeln!(
            s,
            "{:<qw$} {:<8} {:>17} {:>17} {:>15} {:>13} {:>13} {:>13}",
            a.name,
            a.qdisc,
            pair(Some(a.backlog_bytes), Some(b.backlog_bytes)),
            pair(Some(a.sojourn_ms), Some(b.sojourn_ms)),
            format!("{} | {}", a.drops, b.drops),
            format!("{} | {}", a.ce_marks, b.ce_marks),
            format!("{:.2} | {:.2}", a.utilization, b.utilization),
            pair(a.jain, b.jain),
        );
    }
    let _ = writeln!(
        s,
        "\nsim: {:.1} s simulated: {} ({:.2} s wall)",
        sim.duration_s,
        sim.verdict.summary(),
        sim.sim_wall_s
    );
    let _ = writeln!(
        s,
        "{label}: {:.1} s in real time: {} ({:.2} s wall)",
        kernel.duration_s,
        kernel.verdict.summary(),
        kernel.sim_wall_s
    );
    for (a, b) in sim.checks.iter().zip(&kernel.checks) {
        let v = |ok: bool| if ok { "ok" } else { "FAILED" };
        let _ = writeln!(
            s,
            "check {}: sim {} vs {} {}, {label} {} vs {} {}",
            a.check,
            crate::scenario::num(a.left),
            crate::scenario::num(a.right),
            v(a.pass),
            crate::scenario::num(b.left),
            crate::scenario::num(b.right),
            v(b.pass)
        );
    }
    s
}
