//! The client side (`iperf3 -c`): connects the control connection, sends the
//! parameters, opens the data streams, runs the test and exchanges results.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::interval::{Interval, Reporter};
use crate::outcome::{Poll, Role, TestOutcome};
use crate::protocol::{
    random_seed, stream_id, Cookie, RecvBuf, Results, SendBuf, State, TestError, TestParams,
    DEFAULT_TCP_BLKSIZE, MAX_JSON_LEN,
};
use crate::sockets::Sockets;
use crate::stream::{secs_between, Pumped, Stream, Transfer};

/// Default for giving up when nothing moves (iperf3's `--rcv-timeout` default, 120 s).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The client's options (a subset of `iperf3 -c`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// The server (`-c host -p port`).
    pub server: SocketAddr,
    /// Test duration (`-t`, default 10 s; whole seconds are sent, as iperf3 does).
    /// Zero with no `bytes` runs until aborted.
    pub duration: Duration,
    /// Bytes to send in total (`-n`); when set, `duration` is ignored.
    pub bytes: Option<u64>,
    /// Parallel streams (`-P`, 1..=128).
    pub parallel: u32,
    /// Reverse mode (`-R`): the server sends.
    pub reverse: bool,
    /// Block size of each write (`-l`, default 128 KiB, at most 1 MiB).
    pub blksize: usize,
    /// Target rate of each stream in bits/s (`-b`; 0 = unlimited): the writes are
    /// paced as iperf3's `iperf_check_throttle` paces them. Sent to the server too,
    /// which paces its streams with `-R`.
    pub bandwidth: u64,
    /// Seconds at the start left out of the statistics (`-O`, whole seconds); the
    /// test runs `omit + duration`.
    pub omit: Duration,
    /// Interval of the periodic statistics (`-i`, default 1 s; `None` for none).
    pub interval: Option<Duration>,
    /// The driver wants the JSON report (`-J`); the protocol itself ignores it.
    pub json: bool,
    /// Give up when nothing moves on any connection for this long.
    pub idle_timeout: Duration,
    /// Seed for the cookie and the payload bytes.
    pub seed: u64,
}

impl ClientConfig {
    /// iperf3's defaults against `server`.
    pub fn new(server: SocketAddr) -> Self {
        ClientConfig {
            server,
            duration: Duration::from_secs(10),
            bytes: None,
            parallel: 1,
            reverse: false,
            blksize: DEFAULT_TCP_BLKSIZE,
            bandwidth: 0,
            omit: Duration::ZERO,
            interval: Some(Duration::from_secs(1)),
            json: false,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            seed: random_seed(),
        }
    }

    /// The parameters sent to the server.
    pub fn params(&self) -> TestParams {
        TestParams {
            time: if self.bytes.is_some() {
                0
            } else {
                self.duration.as_secs()
            },
            num: self.bytes.unwrap_or(0),
            parallel: self.parallel,
            reverse: self.reverse,
            len: self.blksize,
            omit: self.omit.as_secs(),
            bandwidth: self.bandwidth,
            ..TestParams::default()
        }
    }
}

/// Where the client is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    AwaitParamRequest,
    AwaitCreate,
    Creating,
    AwaitStart,
    AwaitRunning,
    Running,
    AwaitExchange,
    PeerResults,
    AwaitDisplay,
    Closing,
    ServerError,
}

#[derive(Debug)]
struct Ctrl<C> {
    conn: C,
    rx: RecvBuf,
    tx: SendBuf,
    eof: bool,
}

/// An iperf3 client test as a state machine over [`Sockets`].
#[derive(Debug)]
pub struct Client<N: Sockets> {
    cfg: ClientConfig,
    params: TestParams,
    cookie: Cookie,
    phase: Phase,
    ctrl: Option<Ctrl<N::Conn>>,
    /// A data connection whose cookie is still being written.
    opening: Option<(N::Conn, SendBuf)>,
    xfer: Transfer<N::Conn>,
    start: Option<Duration>,
    end: Option<Duration>,
    /// The stats and omit timers.
    reporter: Reporter,
    /// A stream held back by `-b` may write again at this time.
    next_send: Option<Duration>,
    last_progress: Option<Duration>,
    local_results: Option<Value>,
    peer_results: Option<(Value, Results)>,
    control_addrs: (Option<SocketAddr>, Option<SocketAddr>),
    outcome: Option<TestOutcome>,
    cpu: crate::cpu::CpuMeter,
}

impl<N: Sockets> Client<N> {
    /// A client that starts connecting at the first [`poll`](Self::poll). An invalid
    /// configuration makes the first poll return an error outcome.
    pub fn new(cfg: ClientConfig) -> Self {
        let params = cfg.params();
        let limit = cfg.bytes;
        let mut xfer = Transfer::new(!cfg.reverse, cfg.blksize, limit, cfg.seed);
        xfer.rate = if cfg.reverse { 0 } else { cfg.bandwidth };
        Client {
            reporter: Reporter::new(cfg.interval, cfg.omit),
            next_send: None,
            cookie: Cookie::generate(cfg.seed),
            params,
            cfg,
            phase: Phase::Start,
            ctrl: None,
            opening: None,
            xfer,
            start: None,
            end: None,
            last_progress: None,
            local_results: None,
            peer_results: None,
            control_addrs: (None, None),
            outcome: None,
            cpu: Default::default(),
        }
    }

    /// The test's cookie.
    pub fn cookie(&self) -> &Cookie {
        &self.cookie
    }

    /// The intervals completed since the last call (for a driver that prints them
    /// as they come, as iperf3 does); the outcome holds all of them.
    pub fn take_intervals(&mut self) -> Vec<Interval> {
        self.reporter.take_new()
    }

    /// The data streams' ids and addresses, once they are all connected (iperf3's
    /// `[  5] local ... connected to ...` lines).
    pub fn connected_streams(&self) -> Vec<(u32, Option<SocketAddr>, Option<SocketAddr>)> {
        match self.start {
            Some(_) => self
                .xfer
                .streams
                .iter()
                .map(|s| (s.id, s.local, s.peer))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Does all the work possible now: see [`Poll`].
    pub fn poll(&mut self, net: &mut N) -> Poll {
        if let Some(o) = &self.outcome {
            return Poll::Done(o.clone());
        }
        let now = net.now();
        match self.step(net, now) {
            Ok(more) if self.outcome.is_none() => Poll::Pending {
                wake_at: Some(self.wake_at(now, more)),
            },
            Ok(_) => Poll::Done(
                self.outcome
                    .clone()
                    .unwrap_or_else(|| self.outcome(now, None)),
            ),
            Err(e) => {
                self.fail(net, now, e);
                self.poll(net)
            }
        }
    }

    /// Ends the test at once: sends `CLIENT_TERMINATE` (best effort) and closes
    /// everything; the outcome carries [`TestError::ClientTerminated`].
    pub fn abort(&mut self, net: &mut N) -> TestOutcome {
        if self.outcome.is_none() {
            if let Some(c) = &mut self.ctrl {
                c.tx.push_state(State::ClientTerminate);
                let _ = c.tx.flush(net, c.conn);
            }
            let now = net.now();
            self.fail(net, now, TestError::ClientTerminated);
        }
        self.outcome
            .clone()
            .unwrap_or_else(|| self.outcome(net.now(), None))
    }

    fn step(&mut self, net: &mut N, now: Duration) -> Result<bool, TestError> {
        let last = *self.last_progress.get_or_insert(now);
        if self.phase == Phase::Start {
            self.open_control(net)?;
        }
        let mut moved = self.flush_ctrl(net)?;
        moved += self.read_ctrl(net, now)?;
        moved += self.open_streams(net)?;
        let (data, more) = self.run_data(net, now)?;
        moved += data + self.flush_ctrl(net)?;
        if moved > 0 {
            self.last_progress = Some(now);
        } else if now.saturating_sub(last) >= self.cfg.idle_timeout {
            return Err(TestError::Timeout("nothing moved for the idle timeout"));
        }
        if self.phase == Phase::Closing && self.ctrl.as_ref().is_none_or(|c| c.tx.is_empty()) {
            self.finish(net, now, None);
        }
        Ok(more)
    }

    fn wake_at(&self, now: Duration, more: bool) -> Duration {
        if more {
            return now;
        }
        let mut w = self.last_progress.unwrap_or(now) + self.cfg.idle_timeout;
        if self.phase == Phase::Running {
            let timers = [self.deadline(), self.reporter.wake_at(), self.next_send];
            for t in timers.into_iter().flatten() {
                w = w.min(t.max(now));
            }
        }
        w
    }

    /// When a timed test ends: `omit + time` after the start (iperf3's test timer).
    fn deadline(&self) -> Option<Duration> {
        let timed = self.cfg.bytes.is_none() && !self.cfg.duration.is_zero();
        Some(self.start? + self.cfg.omit + self.cfg.duration).filter(|_| timed)
    }

    fn open_control(&mut self, net: &mut N) -> Result<(), TestError> {
        self.params.validate()?;
        let conn = net
            .connect(self.cfg.server)
            .map_err(|e| TestError::io("connecting to the server", &e))?;
        let mut tx = SendBuf::default();
        tx.push(&self.cookie.0);
        self.ctrl = Some(Ctrl {
            conn,
            rx: RecvBuf::default(),
            tx,
            eof: false,
        });
        self.phase = Phase::AwaitParamRequest;
        Ok(())
    }

    fn flush_ctrl(&mut self, net: &mut N) -> Result<u64, TestError> {
        let Some(c) = &mut self.ctrl else {
            return Ok(0);
        };
        let n =
            c.tx.flush(net, c.conn)
                .map_err(|e| TestError::io("writing to the control connection", &e))?;
        if n > 0 && self.control_addrs.0.is_none() {
            self.control_addrs = (net.local_addr(c.conn), net.peer_addr(c.conn));
        }
        Ok(n as u64)
    }

    fn read_ctrl(&mut self, net: &mut N, now: Duration) -> Result<u64, TestError> {
        let Some(c) = &mut self.ctrl else {
            return Ok(0);
        };
        let f =
            c.rx.fill(net, c.conn, MAX_JSON_LEN + 4)
                .map_err(|e| TestError::io("reading the control connection", &e))?;
        c.eof |= f.eof;
        while self.next_message(net, now)? {}
        let eof = self.ctrl.as_ref().is_some_and(|c| c.eof);
        if eof && self.phase != Phase::Closing {
            return Err(match self.phase {
                Phase::ServerError => TestError::ServerError {
                    i_errno: None,
                    errno: None,
                },
                _ => TestError::ControlClosed,
            });
        }
        Ok(f.moved as u64)
    }

    /// Handles one complete control message, if one has arrived.
    fn next_message(&mut self, net: &mut N, now: Duration) -> Result<bool, TestError> {
        let Some(c) = &mut self.ctrl else {
            return Ok(false);
        };
        match self.phase {
            Phase::Closing => Ok(false),
            Phase::PeerResults => match c.rx.take_json(MAX_JSON_LEN)? {
                Some(v) => {
                    let r = Results::from_json(&v)?;
                    self.peer_results = Some((v, r));
                    self.phase = Phase::AwaitDisplay;
                    Ok(true)
                }
                None => Ok(false),
            },
            Phase::ServerError => match c.rx.take_exact(8) {
                Some(b) => Err(TestError::ServerError {
                    i_errno: Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]])),
                    errno: Some(i32::from_be_bytes([b[4], b[5], b[6], b[7]])),
                }),
                None => Ok(false),
            },
            _ => match c.rx.take_state() {
                Some(s) => self.on_state(net, now, s).map(|_| true),
                None => Ok(false),
            },
        }
    }

    fn queue(&mut self, f: impl FnOnce(&mut SendBuf)) {
        if let Some(c) = &mut self.ctrl {
            f(&mut c.tx);
        }
    }

    fn on_state(&mut self, net: &mut N, now: Duration, s: State) -> Result<(), TestError> {
        match (self.phase, s) {
            (_, State::AccessDenied) => return Err(TestError::AccessDenied),
            (_, State::ServerTerminate) => return Err(TestError::ServerTerminated),
            (_, State::ServerError) => self.phase = Phase::ServerError,
            (Phase::AwaitParamRequest, State::ParamExchange) => {
                let p = self.params.to_json();
                self.queue(|tx| tx.push_json(&p));
                self.phase = Phase::AwaitCreate;
            }
            (Phase::AwaitCreate, State::CreateStreams) => self.phase = Phase::Creating,
            (Phase::AwaitStart, State::TestStart) => {
                self.start = Some(now);
                self.xfer.started = Some(now);
                self.reporter.begin(now);
                self.cpu.start(net);
                self.phase = Phase::AwaitRunning;
            }
            (Phase::AwaitRunning, State::TestRunning) => self.phase = Phase::Running,
            (Phase::Running | Phase::AwaitExchange, State::ExchangeResults) => {
                if self.end.is_none() {
                    self.stop(net, now);
                }
                let results = self.our_results();
                self.queue(|tx| tx.push_json(&results));
                self.local_results = Some(results);
                self.phase = Phase::PeerResults;
            }
            (Phase::AwaitDisplay, State::DisplayResults) => {
                self.queue(|tx| tx.push_state(State::IperfDone));
                self.phase = Phase::Closing;
            }
            (p, s) => {
                return Err(TestError::Protocol(format!(
                    "unexpected state {s:?} (byte {}) while {p:?}",
                    s.to_byte() as i8
                )))
            }
        }
        Ok(())
    }

    /// Opens the data connections one at a time (the next once the previous one's
    /// cookie is written), so the server numbers them in our order.
    fn open_streams(&mut self, net: &mut N) -> Result<u64, TestError> {
        let mut moved = 0;
        while self.phase == Phase::Creating {
            if let Some((conn, tx)) = &mut self.opening {
                let conn = *conn;
                moved += tx
                    .flush(net, conn)
                    .map_err(|e| TestError::io("connecting a data stream", &e))?;
                if !tx.is_empty() {
                    break;
                }
                let id = stream_id(self.xfer.streams.len());
                self.xfer.streams.push(Stream::new(net, conn, id));
                self.opening = None;
            }
            if self.xfer.streams.len() >= self.cfg.parallel as usize {
                self.phase = Phase::AwaitStart;
                break;
            }
            let conn = net
                .connect(self.cfg.server)
                .map_err(|e| TestError::io("connecting a data stream", &e))?;
            let mut tx = SendBuf::default();
            tx.push(&self.cookie.0);
            self.opening = Some((conn, tx));
        }
        Ok(moved as u64)
    }

    /// Runs the data streams; at the end condition sends `TEST_END`.
    fn run_data(&mut self, net: &mut N, now: Duration) -> Result<(u64, bool), TestError> {
        if self.phase != Phase::Running {
            return Ok((0, false));
        }
        // Past the deadline nothing more is sent (what has arrived is still counted);
        // with -n, the pump stops at the limit.
        let timed_out = self.deadline().is_some_and(|d| now >= d);
        let p = if timed_out && self.xfer.sending {
            Pumped::default()
        } else {
            self.xfer
                .pump(net, now)
                .map_err(|e| TestError::io("data stream", &e))?
        };
        self.next_send = p.next_send;
        self.reporter.tick(&mut self.xfer, net, now);
        if !timed_out && !self.xfer.limit_reached() {
            return Ok((p.moved, p.more));
        }
        // iperf3's semantics: the sender counts what it wrote, the receiver what it
        // read by TEST_END; the test does not wait for the bytes in flight.
        self.stop(net, now);
        self.queue(|tx| tx.push_state(State::TestEnd));
        self.phase = Phase::AwaitExchange;
        Ok((p.moved, false))
    }

    fn stop(&mut self, net: &mut N, now: Duration) {
        self.end = Some(now);
        self.reporter.finish(&mut self.xfer, net, now);
        self.xfer.capture_stats(net);
        self.cpu.stop(net);
    }

    /// Seconds counted: from the start (or the end of omitting) to the end.
    fn seconds(&self, now: Duration) -> f64 {
        match self.reporter.origin() {
            Some(s) => secs_between(s, self.end.unwrap_or(now)),
            None => 0.0,
        }
    }

    fn our_results(&self) -> Value {
        let secs = self.seconds(self.end.unwrap_or_default());
        let [total, user, system] = self.cpu.percent();
        Results {
            cpu_util_total: total,
            cpu_util_user: user,
            cpu_util_system: system,
            sender_has_retransmits: if self.xfer.sending { 1 } else { -1 },
            congestion_used: None,
            streams: self.xfer.results(secs),
        }
        .to_json()
    }

    fn outcome(&self, now: Duration, error: Option<TestError>) -> TestOutcome {
        let peer = self
            .peer_results
            .as_ref()
            .map_or(&[][..], |(_, r)| &r.streams);
        let mut o = TestOutcome::empty(Role::Client, self.params.clone(), self.cookie.as_string());
        (o.control_local, o.control_peer) = self.control_addrs;
        o.streams = self.xfer.outcomes(self.seconds(now), peer);
        o.local_results = self.local_results.clone();
        o.peer_results = self.peer_results.as_ref().map(|(v, _)| v.clone());
        o.intervals = self.reporter.intervals.clone();
        o.error = error;
        o
    }

    fn fail(&mut self, net: &mut N, now: Duration, e: TestError) {
        if self.start.is_some() && self.end.is_none() {
            self.stop(net, now);
        }
        self.finish(net, now, Some(e));
    }

    /// Records the outcome and closes every connection.
    fn finish(&mut self, net: &mut N, now: Duration, error: Option<TestError>) {
        self.outcome = Some(self.outcome(now, error));
        self.xfer.close_all(net);
        if let Some((conn, _)) = self.opening.take() {
            net.close(conn);
        }
        if let Some(c) = self.ctrl.take() {
            net.close(c.conn);
        }
    }
}
