//! `lowtide iperf3`: iperf3's client and server on lowtide's stack over a TUN device,
//! speaking iperf3's protocol so that the real `iperf3 -s` and `iperf3 -c` on the
//! kernel's side accept it; the flags are iperf3's.

use super::shards::ShardedSockets;
use super::sockets::{Driven, StackSockets};
use super::RealArgs;
use crate::run_failure as fail;
use clap::Args;
use lowtide_iperf3::TestOutcome;
use lowtide_iperf3::{
    json_report, text_interval, text_report, Client, ClientConfig, Poll, Server, ServerConfig,
};
use lowtide_sim::verdict::{FlowOutcome, Liveness, Verdict};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `lowtide iperf3` (iperf3's own flags, plus the real-path flags).
#[derive(Args, Debug)]
pub struct Iperf3Args {
    /// Run as a client, connecting to HOST (the kernel's address).
    #[arg(
        short = 'c',
        long = "client",
        value_name = "HOST",
        conflicts_with = "server",
        required_unless_present = "server"
    )]
    client: Option<IpAddr>,
    /// Run as a server on lowtide's address.
    #[arg(short = 's', long = "server")]
    server: bool,
    /// Server port.
    #[arg(short = 'p', long = "port", default_value_t = 5201, value_parser = clap::value_parser!(u16).range(1..))]
    port: u16,
    /// Seconds to transmit for.
    #[arg(short = 't', long = "time", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    time: u64,
    /// Bytes to transmit instead of -t (iperf3 units: K, M, G are powers of 1024).
    #[arg(short = 'n', long = "bytes", value_parser = parse_iperf_bytes)]
    bytes: Option<u64>,
    /// Parallel streams.
    #[arg(short = 'P', long = "parallel", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    parallel: u32,
    /// Target bitrate of each stream in bits/s (K, M, G are powers of 1000); 0 is
    /// unlimited. The writes are paced as iperf3 paces them; with -R the server paces.
    #[arg(short = 'b', long = "bitrate", value_name = "RATE", default_value = "0", value_parser = parse_iperf_rate)]
    bitrate: u64,
    /// Omits the first N seconds from the statistics (they run, and their intervals
    /// are printed marked "(omitted)").
    #[arg(short = 'O', long = "omit", value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=60))]
    omit: u64,
    /// Seconds between interval reports (0 for none; 0.1..60).
    #[arg(short = 'i', long = "interval", value_name = "SECONDS", default_value = "1", value_parser = parse_interval)]
    interval: f64,
    /// Reverse: the server sends, the client receives.
    #[arg(short = 'R', long = "reverse")]
    reverse: bool,
    /// Length of each write (iperf3 units) [default: 128K].
    #[arg(short = 'l', long = "length", value_parser = parse_iperf_bytes)]
    length: Option<u64>,
    /// Prints iperf3's JSON report.
    #[arg(short = 'J', long = "json")]
    json: bool,
    /// Server: handle one test, then exit.
    #[arg(short = '1', long = "one-off")]
    one_off: bool,
    #[command(flatten)]
    real: RealArgs,
    #[command(flatten)]
    ts: crate::real_timeseries::TimeseriesArgs,
}

/// iperf3's `unit_atof`: a number with an optional K/M/G/T suffix, powers of 1024.
pub fn parse_iperf_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('m') => (&s[..s.len() - 1], 1 << 20),
        Some('g') => (&s[..s.len() - 1], 1 << 30),
        Some('t') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a byte count (e.g. 10M, 1G, 65536)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("byte count '{s}' must be positive"));
    }
    Ok((v * mult as f64) as u64)
}

/// iperf3's `unit_atof_rate`: bits/s with an optional K/M/G/T suffix, powers of
/// 1000; 0 is unlimited.
pub fn parse_iperf_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('t') => (&t[..t.len() - 1], 1e12),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a bitrate (e.g. 100M, 1G, 0 for unlimited)"))?;
    if !(v.is_finite() && v >= 0.0) || v * mult > 1e15 {
        return Err(format!("bitrate '{s}' must be 0..1000T"));
    }
    Ok((v * mult) as u64)
}

/// `-i`: 0, or 0.1..60 seconds (iperf3's `MIN_INTERVAL`/`MAX_INTERVAL`).
fn parse_interval(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v == 0.0 || (0.1..=60.0).contains(&v) => Ok(v),
        _ => Err(format!("'{s}' must be 0 or 0.1..60 seconds")),
    }
}

fn interval_of(args: &Iperf3Args) -> Option<Duration> {
    (args.interval > 0.0).then(|| Duration::from_secs_f64(args.interval))
}

/// Runs `lowtide iperf3`.
pub fn run(args: &Iperf3Args) -> ExitCode {
    if let Some(len) = args.length.filter(|l| *l > 1 << 20) {
        return crate::usage_error(&format!("-l {len}: at most 1M"));
    }
    if args.server && (args.bitrate > 0 || args.omit > 0) {
        return crate::usage_error("-b, -O: client options (the client sends them to the server)");
    }
    if let Err(e) = args.real.validate().and_then(|_| args.ts.validate()) {
        return crate::usage_error(&e);
    }
    if args.real.queues > 1 {
        return run_sharded(args);
    }
    let (rt, local) = match args.real.open() {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let mut net = StackSockets::new(rt, local.into());
    net.recorder = args.ts.recorder(net.rt.now());
    let r = match args.client {
        Some(host) => run_client(args, &mut net, SocketAddr::new(host, args.port)),
        None => run_server(args, &mut net),
    };
    if let Err(e) = args.ts.write(net.recorder.as_ref()) {
        return fail(&format!("timeseries: {e}"));
    }
    super::transfer::finish_closing(&mut net.rt);
    let _ = net.rt.finish();
    r
}

/// `run` with `--queues` > 1: the application on this thread, a shard per queue.
fn run_sharded(args: &Iperf3Args) -> ExitCode {
    if args.ts.timeseries.is_some() {
        return crate::usage_error("--timeseries: one queue only (--queues 1)");
    }
    let (rts, local) = match args.real.open_queues() {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let mut net = match ShardedSockets::start(rts, local.into()) {
        Ok(n) => n,
        Err(e) => return fail(&format!("shard threads: {e}")),
    };
    let r = match args.client {
        Some(host) => run_client(args, &mut net, SocketAddr::new(host, args.port)),
        None => run_server(args, &mut net),
    };
    if let Err(e) = net.finish(super::transfer::CLOSE_LIMIT) {
        return fail(&format!("shard thread: {e}"));
    }
    r
}

fn run_client<N: Driven>(args: &Iperf3Args, net: &mut N, to: SocketAddr) -> ExitCode {
    let mut cfg = ClientConfig::new(to);
    cfg.duration = Duration::from_secs(args.time);
    cfg.bytes = args.bytes;
    cfg.parallel = args.parallel;
    cfg.reverse = args.reverse;
    cfg.bandwidth = args.bitrate;
    cfg.omit = Duration::from_secs(args.omit);
    cfg.interval = interval_of(args);
    cfg.json = args.json;
    cfg.seed = args.real.seed;
    // The idle timeout must not cut a connect short: Linux's connect(2) waits for
    // its SYN retries (ETIMEDOUT, said by the connect watch).
    let syn = super::connect::syn_timeout(net.syn_retries());
    cfg.idle_timeout = cfg.idle_timeout.max(syn + Duration::from_secs(1));
    if let Some(l) = args.length {
        cfg.blksize = l as usize;
    }
    let mut client = Client::new(cfg);
    if !args.json {
        println!("Connecting to host {}, port {}", to.ip(), to.port());
    }
    let mut announced = false;
    loop {
        if let Err(e) = net.watch_connects() {
            if args.json {
                // iperf3 -J's shape for a test that never started.
                let v = serde_json::json!({"start": {}, "intervals": [], "end": {}, "error": e});
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            return fail(&e);
        }
        let poll = client.poll(net);
        if !args.json {
            let streams = client.connected_streams();
            if !announced && !streams.is_empty() {
                announced = true;
                print_connected(&streams, args.reverse.then_some(to));
            }
            for iv in client.take_intervals() {
                print!("{}", text_interval(&iv));
            }
        }
        match poll {
            Poll::Done(outcome) => return report(&outcome, args.json),
            Poll::Pending { wake_at } => {
                if let Err(e) = net.turn(wake_at) {
                    return fail(&e);
                }
            }
        }
    }
}

fn run_server<N: Driven>(args: &Iperf3Args, net: &mut N) -> ExitCode {
    let mut cfg = ServerConfig::new(SocketAddr::new(net.local(), args.port));
    cfg.one_off = args.one_off;
    cfg.seed = args.real.seed;
    cfg.interval = interval_of(args);
    let mut server = match Server::new(cfg, net) {
        Ok(s) => s,
        Err(e) => return fail(&format!("listen on port {}: {e}", args.port)),
    };
    const RULE: &str = "-----------------------------------------------------------";
    let listening = |n: u64| {
        println!(
            "{RULE}\nServer listening on {} (test #{n})\n{RULE}",
            args.port
        )
    };
    if !args.json {
        listening(1);
    }
    let mut announced = 0;
    loop {
        let poll = server.poll(net);
        if !args.json {
            if let Some((n, from, streams)) = server.connected_streams().filter(|c| c.0 > announced)
            {
                announced = n;
                if let Some(a) = from {
                    println!("Accepted connection from {}, port {}", a.ip(), a.port());
                }
                print_connected(&streams, None);
            }
            for iv in server.take_intervals() {
                print!("{}", text_interval(&iv));
            }
        }
        for outcome in server.take_finished() {
            report(&outcome, args.json);
            if !args.json {
                listening(announced + 1);
            }
        }
        match poll {
            Poll::Done(outcome) => return report(&outcome, args.json),
            Poll::Pending { wake_at } => {
                if let Err(e) = net.turn(wake_at) {
                    return fail(&e);
                }
            }
        }
    }
}

/// iperf3's `[  5] local A port P connected to B port Q` lines (and its reverse-mode
/// notice).
fn print_connected(
    streams: &[(u32, Option<SocketAddr>, Option<SocketAddr>)],
    rev: Option<SocketAddr>,
) {
    if let Some(to) = rev {
        println!("Reverse mode, remote host {} is sending", to.ip());
    }
    for (id, local, peer) in streams {
        if let (Some(l), Some(p)) = (local, peer) {
            println!(
                "[{id:3}] local {} port {} connected to {} port {}",
                l.ip(),
                l.port(),
                p.ip(),
                p.port()
            );
        }
    }
}

fn report(outcome: &TestOutcome, as_json: bool) -> ExitCode {
    match as_json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(&json_report(outcome)).unwrap_or_default()
        ),
        false => print!("{}", text_report(outcome)),
    }
    if let Some(e) = &outcome.error {
        return fail(&format!("iperf3: {e}"));
    }
    let v = verdict(outcome);
    match v.ok {
        true => ExitCode::SUCCESS,
        false => fail(&v.summary()),
    }
}

/// The streams' verdict (lowtide-sim's, as every command): each of the `-P` streams
/// connected and carried data (the receiver's count, else ours).
fn verdict(o: &TestOutcome) -> Verdict {
    let wanted = o.params.parallel.max(o.streams.len() as u32);
    let flows: Vec<FlowOutcome> = (0..wanted)
        .map(|i| match o.streams.get(i as usize) {
            Some(s) => FlowOutcome {
                flow: i,
                connected: true,
                delivered: s.received_bytes().unwrap_or(s.local_bytes),
                ..FlowOutcome::default()
            },
            None => FlowOutcome {
                flow: i,
                ..FlowOutcome::default()
            },
        })
        .collect();
    // No per-stream progress times: only a stream that carried nothing is stalled.
    Verdict::judge(
        &flows,
        &Liveness {
            stall_after: Duration::MAX,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf_units_are_binary() {
        assert_eq!(parse_iperf_bytes("10M"), Ok(10 << 20));
        assert_eq!(parse_iperf_bytes("1g"), Ok(1 << 30));
        assert_eq!(parse_iperf_bytes("128K"), Ok(128 << 10));
        assert_eq!(parse_iperf_bytes("1000"), Ok(1000));
        assert_eq!(parse_iperf_bytes("1.5K"), Ok(1536));
        assert!(parse_iperf_bytes("x").is_err());
        assert!(parse_iperf_bytes("-1M").is_err());
        assert!(parse_iperf_bytes("0").is_err());
    }

    #[test]
    fn iperf_rates_are_decimal() {
        assert_eq!(parse_iperf_rate("100M"), Ok(100_000_000));
        assert_eq!(parse_iperf_rate("1.5g"), Ok(1_500_000_000));
        assert_eq!(parse_iperf_rate("64k"), Ok(64_000));
        assert_eq!(parse_iperf_rate("0"), Ok(0));
        assert!(parse_iperf_rate("fast").is_err());
        assert!(parse_iperf_rate("-1M").is_err());
        assert!(parse_iperf_rate("10M/100").is_err(), "no burst count");
        assert_eq!(parse_interval("0.5"), Ok(0.5));
        assert_eq!(parse_interval("0"), Ok(0.0));
        assert!(parse_interval("0.05").is_err());
        assert!(parse_interval("61").is_err());
    }
}
