//! `lowtide link`: the emulated path as a bridge between two TUN devices, each in
//! its own network namespace, for kernel-to-kernel TCP through the same path lowtide
//! uses.

use super::{configure, open_device, parse_cidr, PathArgs};
use crate::run_failure as fail;
use clap::Args;
use lowtide_tun::bridge::Bridge;
use lowtide_tun::device::{Offload, TunDevice};
use serde_json::json;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Arguments of `lowtide link`.
#[derive(Args, Debug)]
pub struct LinkArgs {
    /// Device A (the forward direction starts here).
    #[arg(long, value_name = "NAME")]
    tun: String,
    /// Address of the kernel's side of device A, e.g. 10.7.0.1/24.
    #[arg(long, value_name = "CIDR", value_parser = parse_cidr)]
    tun_addr: (Ipv4Addr, u8),
    /// Network namespace of device A [default: the current one].
    #[arg(long, value_name = "NS")]
    netns: Option<String>,
    /// Device B.
    #[arg(long, value_name = "NAME")]
    peer_tun: String,
    /// Address of the kernel's side of device B, e.g. 10.7.0.2/24.
    #[arg(long, value_name = "CIDR", value_parser = parse_cidr)]
    peer_addr: (Ipv4Addr, u8),
    /// Network namespace of device B (must differ from A's).
    #[arg(long, value_name = "NS")]
    peer_netns: String,
    /// TSO and checksum offload on both devices.
    #[arg(long, default_value = "on", value_parser = crate::units::parse_on_off, value_name = "on|off", action = clap::ArgAction::Set)]
    offload: bool,
    /// Stop after this long (1ms-86400s) [default: until SIGINT or SIGTERM].
    #[arg(long, value_parser = crate::limits::duration)]
    duration: Option<Duration>,
    /// Seed of the path's loss and jitter draws.
    #[arg(long, default_value_t = 1, value_parser = crate::limits::seed, allow_hyphen_values = true)]
    seed: u64,
    /// Microseconds (0 to 1000000) the link polls its devices before it sleeps, as
    /// Linux's net.core.busy_poll: a sleeping link adds a wakeup (tens of µs in a VM)
    /// to the packets that wake it; 0 sleeps at once and saves the CPU.
    #[arg(long, value_name = "US", default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    busy_poll: u64,
    /// Prints the counters as JSON at the end.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    path: PathArgs,
}

/// Runs `lowtide link`.
pub fn run(args: &LinkArgs) -> ExitCode {
    if args.netns.as_deref() == Some(args.peer_netns.as_str()) {
        return crate::usage_error("--netns and --peer-netns must differ");
    }
    if let Err(e) = crate::outputs::check_files([("--pcap", args.path.pcap.as_deref())]) {
        return crate::usage_error(&e);
    }
    let offload = match args.offload {
        true => Offload::Full,
        false => Offload::None,
    };
    let a = open_in(args.netns.as_deref(), &args.tun, offload, args.tun_addr);
    let b = open_in(
        Some(&args.peer_netns),
        &args.peer_tun,
        offload,
        args.peer_addr,
    );
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let (fwd, rev) = args.path.configs();
    let mut bridge = match Bridge::new(a, b, fwd, rev, args.seed) {
        Ok(b) => b,
        Err(e) => return fail(&format!("bridge: {e}")),
    };
    bridge.set_busy_poll(Duration::from_micros(args.busy_poll));
    if let Some(p) = &args.path.pcap {
        if let Err(e) = bridge.capture(p) {
            return fail(&format!("{}: {e}", p.display()));
        }
    }
    lowtide_tun::stop::install_handlers();
    // For scripts: the path forwards from now on (no need to sleep first).
    eprintln!(
        "lowtide link: ready: forwarding between {} and {}",
        args.tun, args.peer_tun
    );
    let start = Instant::now();
    let until = args.duration.map(|d| start + d);
    let stop = || lowtide_tun::stop::requested() || until.is_some_and(|u| Instant::now() >= u);
    if let Err(e) = bridge.run(Duration::from_millis(100), stop) {
        return fail(&format!("bridge: {e}"));
    }
    report(&bridge, args.json);
    match bridge.finish() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("pcap: {e}")),
    }
}

fn open_in(
    ns: Option<&str>,
    name: &str,
    offload: Offload,
    addr: (Ipv4Addr, u8),
) -> Result<TunDevice, String> {
    let Some(ns) = ns else {
        return open_device(name, offload, Some(addr));
    };
    let dev = TunDevice::open_in(ns, name, offload)
        .map_err(|e| format!("TUN device {name} in network namespace {ns}: {e}"))?;
    // The device's control socket was opened inside its namespace.
    configure(&dev, addr)?;
    Ok(dev)
}

fn report(bridge: &Bridge, as_json: bool) {
    let s = bridge.stats();
    let v = json!({
        "a_to_b": {"packets": s.a_to_b.enqueued, "delivered": s.a_to_b.delivered,
                   "lost": s.a_to_b.link.lost, "queue_drops": s.a_to_b.queue_drops},
        "b_to_a": {"packets": s.b_to_a.enqueued, "delivered": s.b_to_a.delivered,
                   "lost": s.b_to_a.link.lost, "queue_drops": s.b_to_a.queue_drops},
        "errors": s.errors,
    });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        return;
    }
    println!("direction  packets  delivered  lost  queue_drops");
    for (name, d) in [("A->B", &s.a_to_b), ("B->A", &s.b_to_a)] {
        println!(
            "{name:<9}  {:>7}  {:>9}  {:>4}  {:>11}",
            d.enqueued, d.delivered, d.link.lost, d.queue_drops
        );
    }
    if s.errors > 0 {
        println!("device errors: {}", s.errors);
    }
}
