//! `lowtide`: the command line of the lowtide TCP/IP stack.
//!
//! `lowtide sim stream` runs bulk (netperf TCP_STREAM) or fixed-size flows from host
//! A to host B in the deterministic simulator and prints an iperf3-like summary, or
//! the full results as JSON with `--json`. Exit codes: 0 success, 1 the bytes did not
//! verify (or the run failed), 2 bad arguments. `lowtide sim run FILE` runs a
//! scenario file (a network of hosts, routers and queues) and its checks.

mod alloc_count;
mod config_file;
mod experiment;
mod iperf_text;
mod limits;
mod net;
mod outputs;
mod progress;
mod real;
mod real_timeseries;
mod scenario;
mod scenario_out;
mod soak;
mod summary;
mod sweep;
mod timeseries;

use clap::{Args, Parser, Subcommand};
use lowtide::Config;
use lowtide_sim::cpu::CpuModel;
use lowtide_sim::units;
use lowtide_sim::{LinkConfig, Scenario, SimError, TimeseriesConfig, Workload};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// lowtide: a userspace TCP/IP stack, its simulator and its experiments.
#[derive(Parser, Debug)]
#[command(name = "lowtide", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Runs in the deterministic network simulator (virtual time).
    #[command(subcommand)]
    Sim(SimCommand),
    /// TCP connections (one, or -P N) between lowtide on a TUN device and a kernel
    /// socket program, sending or receiving streams with their SHA-256 (needs root).
    Transfer(real::transfer::TransferArgs),
    /// iperf3's client (-c) or server (-s) on lowtide over a TUN device; the real
    /// iperf3 on the kernel's side is its peer (needs root).
    Iperf3(real::iperf::Iperf3Args),
    /// The emulated link as a bridge between two TUN devices in two network
    /// namespaces, for kernel-to-kernel TCP (needs root).
    Link(real::link::LinkArgs),
    /// Scenario files with the kernel's own TCP through an emulated network of
    /// routers, links and queues, in real time (needs root).
    #[command(subcommand)]
    Net(net::NetCommand),
    /// The five seed experiments in the simulator, with a report (report.md,
    /// results.json, plots); `merge` combines the directories of shards.
    Experiment(experiment::ExperimentArgs),
}

#[derive(Subcommand, Debug)]
enum SimCommand {
    /// TCP streams from host A (10.0.0.1) to host B (10.0.0.2), like netperf
    /// TCP_STREAM; every byte is verified at the receiver.
    Stream(Box<StreamArgs>),
    /// Randomized fixed-size transfers over random paths, impairments and sysctls;
    /// checks every byte and a liveness deadline per run, and prints a reproduction
    /// command (`lowtide sim stream ...`) for each failing run.
    Soak(soak::SoakArgs),
    /// A scenario file: hosts, routers, links with a queue on each egress, flows
    /// and checks (README, "Scenarios"); per flow and per queue figures, every
    /// byte verified; exit 1 if a check fails.
    Run(scenario::RunArgs),
    /// A scenario file at every point of a grid of settings (`--param
    /// PATH=[V1,...]`), each point with its own verdict and checks; a report
    /// (report.md, results.json, plots of a figure against the parameter);
    /// `--shard I/N` for job arrays. Exit 1 if a point fails.
    Sweep(Box<sweep::SweepArgs>),
    /// Joins the directories of `sim sweep --shard` runs into one report.
    Merge(sweep::MergeArgs),
}

#[derive(Args, Debug)]
struct StreamArgs {
    /// Number of concurrent flows (connections), 1 to 20000; flow i connects at
    /// i microseconds.
    #[arg(short = 'P', long, default_value_t = 1, value_parser = limits::flows, allow_hyphen_values = true)]
    flows: u32,
    /// Link rate, both directions, 1kbit to 1tbit (e.g. 100mbit, 1gbit, 10gbit; a
    /// bare number is bit/s).
    #[arg(long, default_value = "1gbit", value_parser = limits::rate, allow_hyphen_values = true)]
    rate: u64,
    /// Round-trip propagation delay, 0 to 10s; each direction gets half (e.g. 20ms,
    /// 500us).
    #[arg(long, default_value = "20ms", value_parser = limits::rtt, allow_hyphen_values = true)]
    rtt: Duration,
    /// Loss probability on the A->B (data) direction, 0% to 100% (e.g. 1%, 0.5%, 0.01).
    #[arg(long, default_value = "0", value_parser = limits::probability, allow_hyphen_values = true)]
    loss: f64,
    /// Mean length of loss bursts in packets (both directions), 1 to 1000: above 1,
    /// losses follow a Gilbert model with the same long-run rate as
    /// --loss/--loss-reverse.
    #[arg(long, default_value = "1", value_parser = limits::loss_burst, value_name = "PACKETS", allow_hyphen_values = true)]
    loss_burst: f64,
    /// Loss probability on the B->A (ACK) direction, 0% to 100%.
    #[arg(long, default_value = "0", value_parser = limits::probability, allow_hyphen_values = true)]
    loss_reverse: f64,
    /// Extra delay per A->B packet, uniform in 0..JITTER (may reorder, like netem);
    /// at most 10s. A->B only (the real path's --jitter delays both directions).
    #[arg(long, default_value = "0ms", value_parser = limits::jitter, allow_hyphen_values = true)]
    jitter: Duration,
    /// Probability (0% to 100%) that an A->B packet is held back (by half the one-way
    /// delay, at least 100 us), so that later packets overtake it.
    #[arg(long, default_value = "0", value_parser = limits::probability, value_name = "PCT", allow_hyphen_values = true)]
    reorder: f64,
    /// Probability (0% to 100%) that an A->B packet is duplicated.
    #[arg(long, default_value = "0", value_parser = limits::probability, value_name = "PCT", allow_hyphen_values = true)]
    duplicate: f64,
    /// Probability (0% to 100%) that an A->B packet has one bit flipped.
    #[arg(long, default_value = "0", value_parser = limits::probability, value_name = "PCT", allow_hyphen_values = true)]
    corrupt: f64,
    /// Simulated measuring time of bulk flows, 1ms to 86400s (iperf3's -t limit; a
    /// bare number is seconds); it must leave every flow two round trips after its
    /// start [default: 10s].
    #[arg(short = 't', long, visible_alias = "time", value_parser = limits::duration, conflicts_with = "bytes", allow_hyphen_values = true)]
    duration: Option<Duration>,
    /// Bytes per flow, 1 to 100GB and at most 1TB over all flows (e.g. 2MB, 2000000,
    /// 64KiB); each flow then sends this much and closes, instead of a bulk transfer.
    #[arg(short = 'n', long, value_parser = limits::bytes, allow_hyphen_values = true)]
    bytes: Option<u64>,
    /// Simulated-time limit of a --bytes run, 1ms to 10000000s; reaching it fails
    /// the run.
    #[arg(long, default_value = "600s", value_parser = limits::time_limit, requires = "bytes", allow_hyphen_values = true)]
    time_limit: Duration,
    /// Reports every SECS of simulated time, as iperf3 -i: per flow the bytes
    /// acknowledged, bitrate, retransmissions and cwnd (text lines, JSON
    /// `intervals`); 0 (the default) for none, else 1ms to 3600s and at most 100000
    /// intervals. A bare number is seconds.
    #[arg(short = 'i', long, value_name = "SECS", default_value = "0", value_parser = limits::interval, allow_hyphen_values = true)]
    interval: Duration,
    /// Congestion control: reno, cubic or bbr [default: cubic (net.ipv4.tcp_congestion_control), or the config file's].
    #[arg(long, value_parser = parse_cc)]
    cc: Option<String>,
    /// MSS in bytes, 88 (Linux's TCP_MIN_MSS) to 65495; sets the MTU of both hosts
    /// to MSS + 40 [default: 1460, from the 1500-byte MTU].
    #[arg(long, value_parser = limits::mss, allow_hyphen_values = true)]
    mss: Option<u32>,
    /// NIC queue limit in packets, 1 to 1000000 (txqueuelen; a GSO packet counts once).
    #[arg(long, default_value_t = 1000, value_parser = limits::queue, allow_hyphen_values = true)]
    queue: u64,
    /// Marks ECN-capable packets CE (RFC 3168) once this many packets wait in a NIC
    /// queue, 1 to 1000000: a step AQM, as `red min K max K ecn`. Flows use ECN with
    /// `--sysctl net.ipv4.tcp_ecn=1` (the receivers accept it by default), Accurate ECN
    /// with `=3`.
    #[arg(long, value_name = "PACKETS", value_parser = limits::queue, allow_hyphen_values = true)]
    ecn_mark_at: Option<u64>,
    /// The bottleneck's queueing discipline, host A's device (A->B), as
    /// NAME[,PARAM=VALUE]...: pfifo_fast, pfifo, bfifo, codel, fq_codel, fq, red
    /// with tc's parameter names (e.g. fq_codel,target=2ms or red,limit=400kb,ecn=1).
    /// Default: net.core.default_qdisc's, as on host B (pfifo_fast: a pfifo of --queue).
    #[arg(long, value_name = "NAME[,PARAM=VALUE]...", value_parser = lowtide_sim::qdisc::QdiscSpec::parse)]
    qdisc: Option<lowtide_sim::qdisc::QdiscSpec>,
    /// Seed of every random choice in the run.
    #[arg(long, default_value_t = 1, value_parser = limits::seed, allow_hyphen_values = true)]
    seed: u64,
    /// Writes the link traffic (both directions) to this pcap file.
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// GRO on the receive path.
    #[arg(long, default_value = "on", value_parser = units::parse_on_off, value_name = "on|off", action = clap::ArgAction::Set)]
    gro: bool,
    /// When the devices give a packet's TX completion back to the stack (what TSQ
    /// waits for): wire = at the end of its serialization, as a hardware NIC;
    /// dequeue = when the qdisc hands it to the driver, as Linux's TUN and veth do
    /// (skb_orphan in tun_net_xmit/veth_xmit), the kernel's path on a test machine.
    #[arg(long, default_value = "wire", value_parser = parse_tx_completion, value_name = "wire|dequeue")]
    tx_completion: lowtide_sim::TxCompletion,
    /// Verify every TCP checksum on receive, even when no link corrupts packets
    /// (otherwise only with --corrupt: the results are the same, the work differs).
    #[arg(long)]
    verify_checksums: bool,
    /// A sysctl for both hosts, e.g. net.ipv4.tcp_rmem="4096 131072 6291456"
    /// (repeatable; overrides --config).
    #[arg(long = "sysctl", value_name = "NAME=VALUE", value_parser = parse_sysctl)]
    sysctls: Vec<String>,
    /// A TOML file of sysctls for both hosts, in a [sysctl] table of
    /// "name" = value entries (strings, integers or booleans).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// How the senders' bytes reach the sockets: stored (each write copied into the
    /// send queue, the real data path) or pattern (the sockets store no payload;
    /// each segment's bytes are made from the flow's pattern when built, and
    /// retransmissions make them again). Every figure is the same; pattern uses
    /// less memory and is faster with many flows.
    #[arg(long, default_value = "stored", value_name = "stored|pattern")]
    payload: lowtide_sim::PayloadMode,
    /// TCP_NOTSENT_LOWAT (bytes, e.g. 131072 or 128KiB) set on every sending socket
    /// as soon as it exists; 0 leaves the sysctl net.ipv4.tcp_notsent_lowat in charge.
    #[arg(long, value_name = "BYTES", value_parser = parse_lowat)]
    notsent_lowat: Option<u32>,
    /// A hostile peer attacks host B beside the flows (the soak's hostile runs):
    /// ofo-fill (1-byte segments with 1-byte gaps over the window), prepend
    /// (segments each one byte lower before a large out-of-order run) or
    /// conn-flood (spoofed SYNs, then silent handshakes); B's memory bound is
    /// checked after every receive batch (JSON `hostile`).
    #[arg(long, value_name = "ofo-fill|prepend|conn-flood")]
    hostile: Option<lowtide_sim::hostile::Attack>,
    /// Writes a time series of the run to FILE: per flow and interval, ss -ti's
    /// figures (cwnd, ssthresh, rtt, pacing_rate, unacked, in_flight, notsent,
    /// wmem_queued, sndbuf, dev_queue_bytes, delivered, bytes_acked, retrans, ca_state); CSV,
    /// or JSON lines if FILE ends in .jsonl. Host-wide rows go to FILE's stem +
    /// "-host" with the same extension.
    #[arg(long, value_name = "FILE")]
    timeseries: Option<PathBuf>,
    /// Interval of the time series, at least 1us and at most 1000000 rows per flow.
    #[arg(long, default_value = "100ms", value_parser = limits::timeseries_interval)]
    timeseries_interval: Duration,
    /// Models host A's CPU (seed 003's experiment): each packet in and out costs
    /// virtual time (constants calibrated on the project machine, see
    /// lowtide_sim::cpu), ACKs wait in a socket backlog while it is busy.
    #[arg(long)]
    cpu_model: bool,
    /// Prints the results as JSON (and no progress display).
    #[arg(long)]
    json: bool,
    /// No progress display on stderr (it is shown only on a terminal anyway).
    #[arg(short = 'q', long)]
    quiet: bool,
}

pub(crate) fn parse_cc(s: &str) -> Result<String, String> {
    let known = lowtide::config::CONGESTION_CONTROLS;
    match known.contains(&s) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "unknown congestion control '{s}' (available: {})",
            known.join(", ")
        )),
    }
}

fn parse_lowat(s: &str) -> Result<u32, String> {
    let n = match s.trim() {
        "0" => 0,
        _ => units::parse_bytes(s)?,
    };
    u32::try_from(n).map_err(|_| format!("notsent-lowat '{s}' is above 4294967295 bytes"))
}

/// `--tx-completion wire|dequeue`.
fn parse_tx_completion(s: &str) -> Result<lowtide_sim::TxCompletion, String> {
    match s {
        "wire" => Ok(lowtide_sim::TxCompletion::Wire),
        "dequeue" => Ok(lowtide_sim::TxCompletion::Dequeue),
        _ => Err(format!("'{s}' is not wire or dequeue")),
    }
}

pub(crate) fn parse_sysctl(s: &str) -> Result<String, String> {
    Config::default()
        .set_assignment(s)
        .map_err(|e| e.to_string())?;
    Ok(s.to_string())
}

impl StreamArgs {
    /// Defaults, then the --config file, then --cc and --mss, then each --sysctl.
    fn config(&self) -> Result<Config, String> {
        let mut cfg = Config::default();
        if let Some(path) = &self.config {
            config_file::apply_file(&mut cfg, path)?;
        }
        if let Some(cc) = &self.cc {
            cfg.set("net.ipv4.tcp_congestion_control", cc)
                .map_err(|e| e.to_string())?;
        }
        if let Some(mss) = self.mss {
            cfg.mtu = mss + 40;
        }
        for s in &self.sysctls {
            cfg.set_assignment(s).map_err(|e| e.to_string())?;
        }
        Ok(cfg)
    }

    fn scenario(&self) -> Result<Scenario, String> {
        let one_way = (self.rtt / 2).as_nanos() as u64;
        let base = LinkConfig {
            rate_bps: self.rate,
            delay_ns: one_way,
            loss_burst: self.loss_burst,
            ..LinkConfig::default()
        };
        let link_ab = LinkConfig {
            loss: self.loss,
            jitter_ns: self.jitter.as_nanos() as u64,
            reorder: self.reorder,
            duplicate: self.duplicate,
            corrupt: self.corrupt,
            ..base.clone()
        };
        let link_ba = LinkConfig {
            loss: self.loss_reverse,
            ..base
        };
        let workload = match (self.bytes, self.duration) {
            (Some(bytes), _) => Workload::Bytes {
                bytes,
                time_limit_ns: self.time_limit.as_nanos() as u64,
            },
            (None, d) => Workload::Bulk {
                duration_ns: d.unwrap_or(Duration::from_secs(10)).as_nanos() as u64,
            },
        };
        Ok(Scenario {
            seed: self.seed,
            flows: self.flows,
            workload,
            link_ab,
            link_ba,
            queue_limit: self.queue as usize,
            ecn_mark_at: self.ecn_mark_at.map(|k| k as usize),
            qdisc: self.qdisc.clone(),
            gro: self.gro,
            tx_completion: self.tx_completion,
            verify_checksums: self.verify_checksums,
            payload: self.payload,
            config: self.config()?,
            pcap: self.pcap.clone(),
            notsent_lowat: self.notsent_lowat,
            timeseries: self.timeseries.as_ref().map(|_| TimeseriesConfig {
                interval_ns: self.timeseries_interval.as_nanos() as u64,
                per_flow: true,
            }),
            cpu: self.cpu_model.then(CpuModel::calibrated),
            report_interval_ns: self.interval.as_nanos() as u64,
            hostile: self.hostile,
            ..Scenario::default()
        })
    }
}

impl StreamArgs {
    /// What the checks across options need.
    fn plan(&self) -> limits::StreamPlan {
        limits::StreamPlan {
            flows: self.flows,
            rtt: self.rtt,
            duration: match self.bytes {
                Some(_) => None,
                None => Some(self.duration.unwrap_or(Duration::from_secs(10))),
            },
            bytes: self.bytes,
            time_limit: self.time_limit,
            interval: self.interval,
            timeseries: self.timeseries.as_ref().map(|_| self.timeseries_interval),
        }
    }
}

/// The progress bar of a run: virtual time for bulk runs, bytes for fixed sizes.
fn stream_bar(sc: &Scenario) -> std::sync::Arc<progress::RunBar> {
    progress::RunBar::new(match sc.workload {
        Workload::Bulk { duration_ns } => progress::RunGoal::Timed(duration_ns),
        Workload::Bytes { bytes, .. } => {
            progress::RunGoal::Bytes(bytes.saturating_mul(sc.flows as u64))
        }
    })
}

fn stream(args: &StreamArgs) -> ExitCode {
    let mut sc = match args.scenario() {
        Ok(sc) => sc,
        Err(e) => return usage_error(&e),
    };
    if let Err((opt, why)) = limits::check_stream(&args.plan()) {
        return usage_error(&format!("{opt}: {why}"));
    }
    let files = [
        ("--pcap", args.pcap.as_deref()),
        ("--timeseries", args.timeseries.as_deref()),
    ];
    if let Err(e) = outputs::check_files(files) {
        return usage_error(&e);
    }
    let bar = progress::wanted(args.json, args.quiet).then(|| stream_bar(&sc));
    sc.progress = bar.as_ref().map(|b| b.hook());
    let run = sc.run();
    if let Some(b) = bar {
        b.finish();
    }
    let mut results = match run {
        Ok(r) => r,
        Err(SimError::Invalid(e)) => return usage_error(&e),
        Err(e) => return run_failure(&e.to_string()),
    };
    if let (Some(path), Some(ts)) = (&args.timeseries, results.timeseries.take()) {
        if let Err(e) = timeseries::write(path, &ts) {
            return run_failure(&format!("timeseries: {e}"));
        }
    }
    if args.json {
        match serde_json::to_string_pretty(&results) {
            Ok(s) => println!("{s}"),
            Err(e) => return run_failure(&format!("cannot serialize results: {e}")),
        }
    } else {
        print!("{}", summary::render(&sc, &results));
    }
    match results.bytes_verified {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    }
}

/// A run that could not complete: the message on stderr, exit code 1.
pub(crate) fn run_failure(msg: &str) -> ExitCode {
    eprintln!("lowtide: {msg}");
    ExitCode::from(1)
}

/// Bad arguments: the message on stderr, exit code 2.
pub(crate) fn usage_error(msg: &str) -> ExitCode {
    eprintln!("lowtide: {msg}");
    ExitCode::from(2)
}

/// Parses the command line; clap's own errors come out in the house style,
/// `lowtide: <what>: <why>` on stderr with exit code 2 (help and version on stdout, 0).
fn parse_cli() -> Result<Cli, ExitCode> {
    use clap::error::{ContextKind, ErrorKind};
    let e = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || matches!(
            e.kind(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
        )
    {
        let _ = e.print();
        return Err(ExitCode::from(e.exit_code() as u8));
    }
    // The option's name without its value name ("--mss <MSS>" -> "--mss").
    let what = match e.get(ContextKind::InvalidArg) {
        Some(arg) => arg
            .to_string()
            .split(' ')
            .next()
            .unwrap_or("usage")
            .to_string(),
        None => "usage".to_string(),
    };
    // clap's rendered text is "error: <why>\n\n<usage>...": keep the first line's why;
    // for a bad value, the value parser's own message (it names the value).
    let text = e.render().to_string();
    let why = match (e.kind(), std::error::Error::source(&e)) {
        (ErrorKind::ValueValidation, Some(src)) => src.to_string(),
        _ => {
            // A first line ending in ':' lists what it means on the next one.
            let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let first = lines.next().unwrap_or("").trim_start_matches("error: ");
            match (first.ends_with(':'), lines.next()) {
                (true, Some(next)) => format!("{first} {next}"),
                _ => first.to_string(),
            }
        }
    };
    // clap's suggestions ("a similar argument exists"), said in one line.
    let similar = [ContextKind::SuggestedArg, ContextKind::SuggestedSubcommand]
        .into_iter()
        .find_map(|k| e.get(k));
    let why = match similar {
        Some(s) => format!(
            "{why} (did you mean '{}'?)",
            s.to_string().trim_matches('\'')
        ),
        None => why,
    };
    eprintln!("lowtide: {what}: {why}");
    eprintln!("(lowtide --help, or lowtide <command> --help, lists the options)");
    Err(ExitCode::from(2))
}

/// Gives SIGPIPE its default action back (Rust's runtime ignores it), so that
/// `lowtide ... | head` ends quietly when the reader goes, as iperf3, ss and every C
/// tool do, instead of panicking on the failed print. Sockets are unaffected: std
/// sends with `MSG_NOSIGNAL`, and lowtide writes to no pipe but stdout and stderr.
fn restore_sigpipe() {
    // SAFETY: signal(2) with SIG_DFL installs no handler, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    let _alloc_stats = alloc_count::ReportOnDrop;
    let cli = match parse_cli() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match &cli.command {
        Command::Sim(SimCommand::Stream(args)) => stream(args),
        Command::Sim(SimCommand::Soak(args)) => soak::run(args),
        Command::Sim(SimCommand::Run(args)) => scenario::run(args),
        Command::Sim(SimCommand::Sweep(args)) => sweep::run(args),
        Command::Sim(SimCommand::Merge(args)) => sweep::merge(args),
        Command::Transfer(args) => real::transfer::run(args),
        Command::Link(args) => real::link::run(args),
        Command::Net(cmd) => net::run(cmd),
        Command::Iperf3(args) => real::iperf::run(args),
        Command::Experiment(args) => experiment::run(args),
    }
}
