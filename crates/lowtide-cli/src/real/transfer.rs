//! `lowtide transfer`: TCP connections (one, or `-P N`) between lowtide (on a TUN
//! device) and any kernel socket program, each sending a known stream or receiving
//! one, with the SHA-256 of every byte sent or received, so that both ends can be
//! compared byte for byte.

use super::connect::{connect_failed, ConnectWatch};
use super::RealArgs;
use crate::run_failure as fail;
use clap::Args;
use lowtide::{EventKind, Instant, Shutdown, SocketError, SocketHandle, TcpState};
use lowtide_sim::payload::Payload;
use lowtide_sim::verdict::{FlowOutcome, Goal, Liveness, Verdict};
use lowtide_tun::link::PathStats;
use lowtide_tun::runtime::{Runtime, RuntimeStats};
use lowtide_tun::shard::Shards;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `lowtide transfer`.
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// Connect to this kernel address and port (active open).
    #[arg(
        long,
        value_name = "ADDR:PORT",
        conflicts_with = "listen",
        required_unless_present = "listen"
    )]
    connect: Option<SocketAddr>,
    /// Listen on this port of lowtide's address and take one connection (or -P).
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    listen: Option<u16>,
    /// Parallel connections: opens (or accepts) N, each with its own stream.
    #[arg(short = 'P', long = "parallel", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=128))]
    parallel: u32,
    /// Send this many bytes (e.g. 10MB) on each connection, a stream seeded by
    /// --seed and the connection's number (0, 1, ...), then close.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::parse_bytes, conflicts_with = "recv", required_unless_present = "recv")]
    send: Option<u64>,
    /// Receive until the peer closes.
    #[arg(long)]
    recv: bool,
    /// With --listen: also accept every connection after the -P transfers' and
    /// `hold` it open, never read, until the run ends (a server's idle clients, e.g.
    /// a connection flood's), or `close` it at once (a server that hangs up first and
    /// so holds the TIME-WAIT); listens with a backlog of `net.core.somaxconn`.
    /// `others` in --json counts them.
    #[arg(long, value_enum, value_name = "hold|close", requires = "listen")]
    others: Option<OthersMode>,
    /// Give up (exit 1) after this long (1ms-86400s).
    #[arg(long, default_value = "120s", value_parser = crate::limits::duration)]
    timeout: Duration,
    /// Sign and check every segment with this TCP-MD5 key (RFC 2385, `TCP_MD5SIG`,
    /// at most 80 bytes): for the peer of --connect, for any peer with --listen.
    #[arg(long, value_name = "KEY", value_parser = md5_key_arg)]
    md5_key: Option<String>,
    /// Prints the result as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    real: RealArgs,
    #[command(flatten)]
    ts: crate::real_timeseries::TimeseriesArgs,
}

/// `--md5-key`: at most `TCP_MD5SIG_MAXKEYLEN` bytes.
fn md5_key_arg(s: &str) -> Result<String, String> {
    match s.len() <= lowtide::tcp::md5::TCP_MD5SIG_MAXKEYLEN {
        true => Ok(s.to_string()),
        false => Err("a TCP-MD5 key has at most 80 bytes".into()),
    }
}

/// Socket options with the `--md5-key` key for the peers in `peer/prefixlen`.
fn md5_opts(key: Option<&str>, peer: IpAddr, prefixlen: u8) -> lowtide::tcp::sockopt::SockOptions {
    use lowtide::tcp::md5::{Md5Cmd, Md5Key};
    let mut o = lowtide::tcp::sockopt::SockOptions::default();
    if let Some(k) = key.and_then(|k| Md5Key::new(peer, prefixlen, k.as_bytes())) {
        let _ = o.md5.apply(Md5Cmd::Add(k), 0, u32::MAX);
    }
    o
}

/// What `transfer --listen --others` does with the connections after the transfers'.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OthersMode {
    /// Holds each open, never read, until the run ends.
    Hold,
    /// Closes each at once.
    Close,
}

/// The connections accepted after the transfers' (`--others`).
struct Others {
    mode: OthersMode,
    /// How many were accepted.
    accepted: u64,
    /// Those held open (`hold`), by shard.
    held: Vec<(usize, SocketHandle)>,
}

/// Longest wait for closed connections' FIN handshakes before exiting (reached only
/// when a peer does not answer; a Linux process does not wait at all, its kernel
/// finishes the handshake, but lowtide's stack ends with the process).
pub(super) const CLOSE_LIMIT: Duration = Duration::from_secs(2);
const CHUNK: usize = 64 * 1024;

/// One connection's transfer.
struct Transfer {
    /// The connection's number (0, 1, ...; its stream's seed with --seed).
    flow: u32,
    /// The engine shard the connection lives on (`--queues`).
    shard: usize,
    conn: Option<SocketHandle>,
    /// Bytes to send; `None` receives.
    total: Option<u64>,
    bytes: u64,
    hash: Sha256,
    payload: Payload,
    buf: Vec<u8>,
    start: Option<Instant>,
    end: Option<Instant>,
    error: Option<SocketError>,
    retransmits: u64,
    /// The connection's `tcp_info` as it ended (before close released it).
    info: Option<lowtide::TcpInfo>,
    /// When bytes last moved (or the connection was established).
    last_progress: Instant,
    /// The active open, while it is in SYN-SENT.
    watch: Option<ConnectWatch>,
}

impl Transfer {
    fn done(&self) -> bool {
        self.end.is_some() || self.error.is_some()
    }

    fn new(flow: u32, total: Option<u64>, seed: u64) -> Transfer {
        Transfer {
            flow,
            shard: 0,
            conn: None,
            total,
            bytes: 0,
            hash: Sha256::new(),
            payload: Payload::new(seed, flow),
            buf: vec![0; CHUNK],
            start: None,
            end: None,
            error: None,
            retransmits: 0,
            info: None,
            last_progress: Instant::ZERO,
            watch: None,
        }
    }

    /// Does all that can be done now.
    fn step(&mut self, rt: &mut Runtime) {
        if self.done() {
            return;
        }
        let Some(c) = self.conn else { return };
        if rt.stack_ref().state(c) != Ok(TcpState::Established) && self.start.is_none() {
            return;
        }
        if self.start.is_none() {
            self.start = Some(rt.now());
            self.last_progress = rt.now();
        }
        let r = match self.total {
            Some(total) => self.send(rt, c, total),
            None => self.recv(rt, c),
        };
        match r {
            Ok(()) | Err(SocketError::WouldBlock) => {}
            Err(e) => self.error = Some(e),
        }
    }

    /// Sends the stream; after the last byte, FIN; done when the peer's FIN arrives.
    fn send(&mut self, rt: &mut Runtime, c: SocketHandle, total: u64) -> Result<(), SocketError> {
        while self.bytes < total {
            let n = ((total - self.bytes) as usize).min(CHUNK);
            self.payload.fill(self.bytes, &mut self.buf[..n]);
            let now = rt.now();
            let k = rt.stack().send(now, c, &self.buf[..n])?;
            self.hash.update(&self.buf[..k]);
            self.bytes += k as u64;
            self.last_progress = now;
        }
        let now = rt.now();
        if rt.stack_ref().state(c) == Ok(TcpState::Established) {
            rt.stack().shutdown(now, c, Shutdown::Write)?;
        }
        // The receiver closes once it has everything: wait for its FIN.
        if rt.stack().recv(now, c, &mut self.buf)? == 0 {
            self.finish(rt, c);
        }
        Ok(())
    }

    /// Receives until end of stream.
    fn recv(&mut self, rt: &mut Runtime, c: SocketHandle) -> Result<(), SocketError> {
        loop {
            let now = rt.now();
            let n = rt.stack().recv(now, c, &mut self.buf)?;
            if n == 0 {
                self.finish(rt, c);
                return Ok(());
            }
            self.hash.update(&self.buf[..n]);
            self.bytes += n as u64;
            self.last_progress = now;
        }
    }

    fn finish(&mut self, rt: &mut Runtime, c: SocketHandle) {
        let now = rt.now();
        if let Ok(i) = rt.stack_ref().info(now, c) {
            self.retransmits = i.total_retrans as u64;
            self.info = Some(i);
        }
        self.end = Some(now);
        let _ = rt.stack().close(now, c);
    }

    fn outcome(&self, rt: &Runtime) -> FlowOutcome {
        FlowOutcome {
            flow: self.flow,
            connected: self.start.is_some(),
            error: self.error,
            delivered: self.bytes,
            goal: self.total.map_or(Goal::UntilClose, Goal::Bytes),
            complete: self.end.is_some(),
            first_error_offset: None,
            idle: Duration::from_nanos(
                rt.now().saturating_since(self.last_progress).as_nanos() as u64
            ),
            // A real host's backlog is the kernel's or the runtime's, not modelled.
            sender_lag: Duration::ZERO,
        }
    }

    fn seconds(&self, rt: &Runtime) -> f64 {
        match self.start {
            Some(s) => (self.end.unwrap_or(rt.now()) - s).as_secs_f64(),
            None => 0.0,
        }
    }

    fn report(&self, rt: &Runtime) -> serde_json::Value {
        let secs = self.seconds(rt);
        json!({
            "flow": self.flow,
            "bytes": self.bytes,
            "sha256": hex(&self.hash.clone().finalize()),
            "seconds": secs,
            "goodput_bps": bps(self.bytes, secs),
            "retransmits": self.retransmits,
            "error": self.error.map(|e| e.to_string()),
            "tcp_info": self.info,
        })
    }
}

fn bps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

/// Where the connections' engines are: one runtime, or the shards of `--queues`.
trait Engines {
    fn shards(&self) -> usize;
    fn on<R>(&mut self, k: usize, f: impl FnOnce(&mut Runtime) -> R) -> R;
}

impl Engines for Runtime {
    fn shards(&self) -> usize {
        1
    }

    fn on<R>(&mut self, _: usize, f: impl FnOnce(&mut Runtime) -> R) -> R {
        f(self)
    }
}

impl Engines for Shards {
    fn shards(&self) -> usize {
        self.len()
    }

    fn on<R>(&mut self, k: usize, f: impl FnOnce(&mut Runtime) -> R) -> R {
        self.with(k, f)
    }
}

/// All of a run's connections, and the listeners that accept them (one per shard).
struct Flows {
    listeners: Vec<SocketHandle>,
    flows: Vec<Transfer>,
    /// `--others`: the connections accepted after the transfers'.
    others: Option<Others>,
}

impl Flows {
    fn done(&self) -> bool {
        self.flows.iter().all(Transfer::done)
    }

    fn step(&mut self, net: &mut impl Engines) {
        for k in 0..net.shards() {
            let (flows, listener) = (&mut self.flows, self.listeners.get(k).copied());
            let others = self.others.as_mut();
            net.on(k, |rt| Flows::events(flows, others, k, listener, rt));
        }
        for t in &mut self.flows {
            net.on(t.shard, |rt| {
                t.step(rt);
                if t.watch.as_mut().is_some_and(|w| !w.check(rt)) {
                    t.watch = None;
                }
            });
        }
    }

    /// Shard `k`'s socket errors, and the connections its listener accepted (into
    /// `others` once every transfer has its own).
    fn events(
        flows: &mut [Transfer],
        others: Option<&mut Others>,
        k: usize,
        listener: Option<SocketHandle>,
        rt: &mut Runtime,
    ) {
        while let Some(ev) = rt.stack().poll_event() {
            if let EventKind::Error(e) = ev.kind {
                let t = flows
                    .iter_mut()
                    .find(|t| t.shard == k && t.conn == Some(ev.socket));
                if let Some(t) = t {
                    t.error.get_or_insert(e);
                }
            }
        }
        if let Some(l) = listener {
            for t in flows.iter_mut().filter(|t| t.conn.is_none()) {
                match rt.stack().accept(l) {
                    Ok(c) => (t.conn, t.shard) = (Some(c), k),
                    Err(_) => return,
                }
            }
            if let Some(o) = others {
                while let Ok(c) = rt.stack().accept(l) {
                    o.accepted += 1;
                    match o.mode {
                        OthersMode::Hold => o.held.push((k, c)),
                        OthersMode::Close => {
                            let now = rt.now();
                            let _ = rt.stack().close(now, c);
                        }
                    }
                }
            }
        }
    }

    /// Closes the held connections (`--others hold`) once the transfers are over.
    fn close_held(&mut self, net: &mut impl Engines) {
        for &(k, c) in self.others.iter().flat_map(|o| &o.held) {
            net.on(k, |rt| {
                let now = rt.now();
                let _ = rt.stack().close(now, c);
            });
        }
    }

    /// The run's verdict (lowtide-sim's, shared by every command): each connection
    /// connected, had no socket error, and sent its whole stream and closed, or
    /// received its stream to the end.
    fn verdict(&self, rts: &[Runtime]) -> Verdict {
        let flows: Vec<FlowOutcome> = self
            .flows
            .iter()
            .map(|t| t.outcome(&rts[t.shard]))
            .collect();
        Verdict::judge(
            &flows,
            &Liveness {
                stall_after: Duration::ZERO,
            },
        )
    }

    /// The report: the sums over the connections (and, with one connection, its
    /// SHA-256), each connection's figures under `flows`, the device and the link.
    fn report(&self, rts: &[Runtime]) -> serde_json::Value {
        let bytes: u64 = self.flows.iter().map(|t| t.bytes).sum();
        let secs = self
            .flows
            .iter()
            .map(|t| t.seconds(&rts[t.shard]))
            .fold(0.0, f64::max);
        let one = (self.flows.len() == 1).then(|| hex(&self.flows[0].hash.clone().finalize()));
        let mut counters = lowtide::Counters::default();
        for rt in rts {
            counters.merge(rt.stack_ref().counters());
        }
        let st = rts
            .iter()
            .map(Runtime::stats)
            .fold(Default::default(), add_stats);
        let mut report = json!({
            "direction": if self.flows[0].total.is_some() { "send" } else { "recv" },
            "bytes": bytes,
            "sha256": one,
            "seconds": secs,
            "goodput_bps": bps(bytes, secs),
            "retransmits": self.flows.iter().map(|t| t.retransmits).sum::<u64>(),
            "error": self.flows.iter().find_map(|t| t.error).map(|e| e.to_string()),
            "flows": self.flows.iter().map(|t| t.report(&rts[t.shard])).collect::<Vec<_>>(),
            "verdict": self.verdict(rts),
            "counters": counters.iter().collect::<std::collections::BTreeMap<_, _>>(),
            "device": {
                "rx_packets": st.rx_packets, "rx_gso_packets": st.rx_gso_packets,
                "tx_packets": st.tx_packets, "tx_gso_packets": st.tx_gso_packets,
                "errors": st.errors,
            },
            "link": {
                "egress_lost": st.egress.link.lost, "ingress_lost": st.ingress.link.lost,
                "egress_queue_drops": st.egress.queue_drops,
                "egress_max_queue_packets": st.egress.max_queue_packets,
                "egress_max_queue_bytes": st.egress.max_queue_bytes,
                "ingress_queue_drops": st.ingress.queue_drops,
            },
        });
        if let Some(o) = &self.others {
            report["others"] = json!(o.accepted);
        }
        report
    }
}

/// The device and link counters of two shards together (maxima for the queue peaks).
fn add_stats(a: RuntimeStats, b: RuntimeStats) -> RuntimeStats {
    let path = |mut x: PathStats, y: PathStats| {
        x.queue_drops += y.queue_drops;
        x.max_queue_packets = x.max_queue_packets.max(y.max_queue_packets);
        x.max_queue_bytes = x.max_queue_bytes.max(y.max_queue_bytes);
        x.link.lost += y.link.lost;
        x
    };
    RuntimeStats {
        rx_packets: a.rx_packets + b.rx_packets,
        rx_gso_packets: a.rx_gso_packets + b.rx_gso_packets,
        tx_packets: a.tx_packets + b.tx_packets,
        tx_gso_packets: a.tx_gso_packets + b.tx_gso_packets,
        errors: a.errors + b.errors,
        egress: path(a.egress, b.egress),
        ingress: path(a.ingress, b.ingress),
        ..a
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs `lowtide transfer`.
pub fn run(args: &TransferArgs) -> ExitCode {
    if let Err(e) = args.real.validate().and_then(|_| args.ts.validate()) {
        return crate::usage_error(&e);
    }
    let sharded = args.real.queues > 1;
    if sharded && args.ts.timeseries.is_some() {
        return crate::usage_error("--timeseries: one queue only (--queues 1)");
    }
    let ran = match sharded {
        true => run_sharded(args),
        false => run_single(args),
    };
    let (t, rts) = match ran {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let report = t.report(&rts);
    let v = t.verdict(&rts);
    for rt in rts {
        let _ = rt.finish();
    }
    let unconnected = t.flows.iter().find(|f| f.start.is_none());
    if let (Some(to), Some(f)) = (args.connect, unconnected) {
        // A connect failed: Linux's error, and the report only for machines.
        if args.json {
            print_report(&report, true);
        }
        return fail(&match f.error {
            Some(e) => connect_failed(to, e),
            None => format!(
                "connect {to}: no SYN-ACK within --timeout {:?}",
                args.timeout
            ),
        });
    }
    print_report(&report, args.json);
    match v.ok {
        true => ExitCode::SUCCESS,
        false => fail(&v.summary()),
    }
}

fn new_flows(args: &TransferArgs) -> Flows {
    Flows {
        listeners: Vec::new(),
        others: args.others.map(|mode| Others {
            mode,
            accepted: 0,
            held: Vec::new(),
        }),
        flows: (0..args.parallel)
            .map(|i| Transfer::new(i, args.send, args.real.seed))
            .collect(),
    }
}

/// One runtime on this thread, the application between its turns.
fn run_single(args: &TransferArgs) -> Result<(Flows, Vec<Runtime>), String> {
    let (mut rt, local) = args.real.open()?;
    let mut t = new_flows(args);
    open(&mut rt, &mut t, args, local.into()).map_err(|e| open_failed(args, e))?;
    let deadline = rt.now() + args.timeout;
    let mut rec = args.ts.recorder(rt.now());
    drive(&mut rt, &mut t, deadline, rec.as_mut())?;
    t.close_held(&mut rt);
    args.ts
        .write(rec.as_ref())
        .map_err(|e| format!("timeseries: {e}"))?;
    finish_closing(&mut rt);
    Ok((t, vec![rt]))
}

/// `--queues` > 1: a shard per queue on its own thread, the application on this one;
/// connections opened go to the shards in turn.
fn run_sharded(args: &TransferArgs) -> Result<(Flows, Vec<Runtime>), String> {
    let (rts, local) = args.real.open_queues()?;
    let mut shards = Shards::start(rts).map_err(|e| format!("shard threads: {e}"))?;
    let mut t = new_flows(args);
    open(&mut shards, &mut t, args, local.into()).map_err(|e| open_failed(args, e))?;
    let deadline = std::time::Instant::now() + args.timeout;
    loop {
        let seen = shards.progress();
        t.step(&mut shards);
        // Judged by the verdict: never connected, or stalled short of its goal.
        if t.done() || std::time::Instant::now() > deadline {
            break;
        }
        shards.wait(seen, Duration::from_millis(100));
    }
    t.close_held(&mut shards);
    let rts =
        super::shards::finish(shards, CLOSE_LIMIT).map_err(|e| format!("shard thread: {e}"))?;
    Ok((t, rts))
}

fn open_failed(args: &TransferArgs, e: SocketError) -> String {
    match args.connect {
        Some(to) => connect_failed(to, e),
        None => format!("listen on port {}: {e}", args.listen.unwrap_or(0)),
    }
}

fn open(
    net: &mut impl Engines,
    t: &mut Flows,
    args: &TransferArgs,
    local: IpAddr,
) -> Result<(), SocketError> {
    match (args.connect, args.listen) {
        (Some(to), _) => {
            let n = net.shards();
            let host = if to.is_ipv4() { 32 } else { 128 };
            let opts = md5_opts(args.md5_key.as_deref(), to.ip(), host);
            for (i, f) in t.flows.iter_mut().enumerate() {
                f.shard = i % n;
                let c = net.on(f.shard, |rt| {
                    let now = rt.now();
                    rt.stack()
                        .connect_with(now, SocketAddr::new(local, 0), to, &opts)
                })?;
                f.conn = Some(c);
                f.watch = Some(ConnectWatch::new(c, to));
            }
        }
        (None, Some(port)) => {
            // --others serves as many clients as come: the largest backlog, as a
            // server's listen(fd, SOMAXCONN), which listen() caps at somaxconn.
            let backlog = match args.others {
                Some(_) => u32::MAX,
                None => args.parallel.max(16),
            };
            let at = SocketAddr::new(local, port);
            let any = match local {
                IpAddr::V4(_) => IpAddr::from([0u8; 4]),
                IpAddr::V6(_) => IpAddr::from([0u8; 16]),
            };
            let opts = md5_opts(args.md5_key.as_deref(), any, 0);
            for k in 0..net.shards() {
                let l = net.on(k, |rt| rt.stack().listen_with(at, backlog, &opts))?;
                t.listeners.push(l);
            }
            // For scripts: connect once this line is out, rather than sleep first.
            eprintln!("lowtide transfer: ready: listening on {at}");
        }
        (None, None) => return Err(SocketError::InvalidInput),
    }
    Ok(())
}

fn drive(
    rt: &mut Runtime,
    t: &mut Flows,
    deadline: Instant,
    mut rec: Option<&mut crate::real_timeseries::Recorder>,
) -> Result<(), String> {
    loop {
        t.step(rt);
        if let Some(r) = rec.as_deref_mut() {
            let conns: Vec<SocketHandle> = t.flows.iter().filter_map(|f| f.conn).collect();
            r.observe(rt, &conns);
        }
        if t.done() {
            return Ok(());
        }
        if rt.now() > deadline {
            // Judged by the verdict: never connected, or stalled short of its goal.
            return Ok(());
        }
        rt.turn(Some(deadline), Duration::from_millis(100))
            .map_err(|e| format!("event loop: {e}"))?;
    }
}

/// Serves the stack until every closed connection has finished its FIN handshake
/// (TIME-WAIT is left to the stack, not slept on), at most [`CLOSE_LIMIT`].
pub(super) fn finish_closing(rt: &mut Runtime) {
    let until = rt.now() + CLOSE_LIMIT;
    while rt.now() < until && rt.stack_ref().closing_count() > 0 {
        while rt.stack().poll_event().is_some() {}
        if rt.turn(Some(until), Duration::from_millis(50)).is_err() {
            return;
        }
    }
}

fn print_report(report: &serde_json::Value, as_json: bool) {
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
        return;
    }
    let line = |v: &serde_json::Value, sha: &str| {
        format!(
            "{} bytes in {:.3} s ({:.2} Mbit/s), {} retransmits{sha}",
            v["bytes"],
            v["seconds"].as_f64().unwrap_or(0.0),
            v["goodput_bps"].as_f64().unwrap_or(0.0) / 1e6,
            v["retransmits"],
        )
    };
    let dir = report["direction"].as_str().unwrap_or("");
    let flows = report["flows"].as_array().map_or(&[][..], |v| v);
    if flows.len() == 1 {
        let sha = format!(", sha256 {}", flows[0]["sha256"].as_str().unwrap_or(""));
        println!("{dir} {}", line(&flows[0], &sha));
        return;
    }
    for f in flows {
        let sha = format!(", sha256 {}", f["sha256"].as_str().unwrap_or(""));
        let id = f["flow"].as_u64().unwrap_or(0);
        println!("[{id:3}] {dir} {}", line(f, &sha));
    }
    println!("[SUM] {dir} {}", line(report, ""));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SHA-256 of flow `flow`'s `bytes`-byte stream with `seed`.
    fn stream_sha(seed: u64, flow: u32, bytes: u64) -> String {
        let (p, mut h) = (Payload::new(seed, flow), Sha256::new());
        let mut buf = vec![0u8; CHUNK];
        let mut at = 0;
        while at < bytes {
            let n = ((bytes - at) as usize).min(CHUNK);
            p.fill(at, &mut buf[..n]);
            h.update(&buf[..n]);
            at += n as u64;
        }
        hex(&h.finalize())
    }

    /// README's `transfer` lines name the hashes of the streams those commands
    /// send (--seed 1): `[  N] send BYTES bytes ... sha256 HEX` is flow N's.
    #[test]
    fn readme_transfer_hashes_are_the_streams() {
        let readme = include_str!("../../../../README.md");
        let (mut checked, mut stale) = (0, Vec::new());
        for line in readme.lines().filter(|l| l.contains(", sha256 ")) {
            let (flow, rest) = match line.strip_prefix('[') {
                Some(r) => {
                    let (n, rest) = r.split_once(']').unwrap();
                    (n.trim().parse().unwrap(), rest.trim_start())
                }
                None => (0, line),
            };
            let Some(rest) = rest.strip_prefix("send ") else {
                continue;
            };
            let bytes: u64 = rest.split(' ').next().unwrap().parse().unwrap();
            let sha = line.rsplit("sha256 ").next().unwrap();
            let want = stream_sha(1, flow, bytes);
            if sha != want {
                stale.push(format!(
                    "flow {flow}, {bytes} bytes: {sha} should be {want}"
                ));
            }
            checked += 1;
        }
        assert!(checked >= 3, "README's transfer example has no hashes");
        assert!(
            stale.is_empty(),
            "stale hashes in README:\n{}",
            stale.join("\n")
        );
    }
}
