//! `lowtide transfer`: one TCP connection between lowtide (on a TUN device) and any
//! kernel socket program, sending a known stream or receiving one, with the SHA-256
//! of every byte sent or received, so that both ends can be compared byte for byte.

use super::connect::{connect_failed, ConnectWatch};
use super::RealArgs;
use crate::run_failure as fail;
use clap::Args;
use lowtide::{EventKind, Instant, Shutdown, SocketError, SocketHandle, TcpState};
use lowtide_sim::payload::Payload;
use lowtide_sim::verdict::{FlowOutcome, Goal, Liveness, Verdict};
use lowtide_tun::runtime::Runtime;
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
    /// Listen on this port of lowtide's address and take one connection.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    listen: Option<u16>,
    /// Send this many bytes (e.g. 10MB) of a stream seeded by --seed, then close.
    #[arg(long, value_name = "BYTES", value_parser = crate::units::parse_bytes, conflicts_with = "recv", required_unless_present = "recv")]
    send: Option<u64>,
    /// Receive until the peer closes.
    #[arg(long)]
    recv: bool,
    /// Give up (exit 1) after this long.
    #[arg(long, default_value = "120s", value_parser = crate::units::parse_duration)]
    timeout: Duration,
    /// Prints the result as JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    real: RealArgs,
}

/// Longest wait for closed connections' FIN handshakes before exiting (reached only
/// when a peer does not answer; a Linux process does not wait at all, its kernel
/// finishes the handshake, but lowtide's stack ends with the process).
const CLOSE_LIMIT: Duration = Duration::from_secs(2);
const CHUNK: usize = 64 * 1024;

/// One connection's transfer.
struct Transfer {
    listener: Option<SocketHandle>,
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
    /// When bytes last moved (or the connection was established).
    last_progress: Instant,
    /// The active open, while it is in SYN-SENT.
    watch: Option<ConnectWatch>,
}

impl Transfer {
    fn done(&self) -> bool {
        self.end.is_some() || self.error.is_some()
    }

    /// Does all that can be done now.
    fn step(&mut self, rt: &mut Runtime) {
        self.drain_events(rt);
        if self.done() {
            return;
        }
        if self.conn.is_none() {
            self.accept(rt);
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

    fn drain_events(&mut self, rt: &mut Runtime) {
        while let Some(ev) = rt.stack().poll_event() {
            if let EventKind::Error(e) = ev.kind {
                if Some(ev.socket) == self.conn {
                    self.error.get_or_insert(e);
                }
            }
        }
    }

    fn accept(&mut self, rt: &mut Runtime) {
        if let Some(l) = self.listener {
            if let Ok(c) = rt.stack().accept(l) {
                self.conn = Some(c);
            }
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
        }
        self.end = Some(now);
        let _ = rt.stack().close(now, c);
    }

    /// The run's verdict (lowtide-sim's, shared by every command): connected, no
    /// socket error, and the whole stream sent and closed or received to its end.
    fn verdict(&self, rt: &Runtime) -> Verdict {
        let o = FlowOutcome {
            flow: 0,
            connected: self.start.is_some(),
            error: self.error,
            delivered: self.bytes,
            goal: self.total.map_or(Goal::UntilClose, Goal::Bytes),
            complete: self.end.is_some(),
            first_error_offset: None,
            idle: Duration::from_nanos(
                rt.now().saturating_since(self.last_progress).as_nanos() as u64
            ),
        };
        Verdict::judge(
            &[o],
            &Liveness {
                stall_after: Duration::ZERO,
            },
        )
    }

    fn report(&self, rt: &Runtime) -> serde_json::Value {
        let secs = match (self.start, self.end.or(Some(rt.now()))) {
            (Some(s), Some(e)) => (e - s).as_secs_f64(),
            _ => 0.0,
        };
        let st = rt.stats();
        json!({
            "direction": if self.total.is_some() { "send" } else { "recv" },
            "bytes": self.bytes,
            "sha256": hex(&self.hash.clone().finalize()),
            "seconds": secs,
            "goodput_bps": if secs > 0.0 { self.bytes as f64 * 8.0 / secs } else { 0.0 },
            "retransmits": self.retransmits,
            "error": self.error.map(|e| e.to_string()),
            "verdict": self.verdict(rt),
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
        })
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Runs `lowtide transfer`.
pub fn run(args: &TransferArgs) -> ExitCode {
    if let Err(e) = args.real.validate() {
        return crate::usage_error(&e);
    }
    let (mut rt, local) = match args.real.open() {
        Ok(x) => x,
        Err(e) => return fail(&e),
    };
    let mut t = Transfer {
        listener: None,
        conn: None,
        total: args.send,
        bytes: 0,
        hash: Sha256::new(),
        payload: Payload::new(args.real.seed, 0),
        buf: vec![0; CHUNK],
        start: None,
        end: None,
        error: None,
        retransmits: 0,
        last_progress: Instant::ZERO,
        watch: None,
    };
    if let Err(e) = open(&mut rt, &mut t, args, local.into()) {
        let what = match args.connect {
            Some(to) => connect_failed(to, e),
            None => format!("listen on port {}: {e}", args.listen.unwrap_or(0)),
        };
        return fail(&what);
    }
    let deadline = rt.now() + args.timeout;
    if let Err(e) = drive(&mut rt, &mut t, deadline) {
        return fail(&e);
    }
    finish_closing(&mut rt);
    let report = t.report(&rt);
    let v = t.verdict(&rt);
    let _ = rt.finish();
    if let (Some(to), None) = (args.connect, t.start) {
        // The connect failed: Linux's error, and the report only for machines.
        if args.json {
            print_report(&report, true);
        }
        return fail(&match t.error {
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

fn open(
    rt: &mut Runtime,
    t: &mut Transfer,
    args: &TransferArgs,
    local: IpAddr,
) -> Result<(), SocketError> {
    let now = rt.now();
    match (args.connect, args.listen) {
        (Some(to), _) => {
            let c = rt.stack().connect(now, SocketAddr::new(local, 0), to)?;
            t.conn = Some(c);
            t.watch = Some(ConnectWatch::new(c, to));
        }
        (None, Some(port)) => {
            t.listener = Some(rt.stack().listen(SocketAddr::new(local, port), 16)?)
        }
        (None, None) => return Err(SocketError::InvalidInput),
    }
    Ok(())
}

fn drive(rt: &mut Runtime, t: &mut Transfer, deadline: Instant) -> Result<(), String> {
    loop {
        t.step(rt);
        if t.watch.as_mut().is_some_and(|w| !w.check(rt)) {
            t.watch = None;
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
    let mbit = report["goodput_bps"].as_f64().unwrap_or(0.0) / 1e6;
    println!(
        "{} {} bytes in {:.3} s ({mbit:.2} Mbit/s), {} retransmits, sha256 {}",
        report["direction"].as_str().unwrap_or(""),
        report["bytes"],
        report["seconds"].as_f64().unwrap_or(0.0),
        report["retransmits"],
        report["sha256"].as_str().unwrap_or("")
    );
}
