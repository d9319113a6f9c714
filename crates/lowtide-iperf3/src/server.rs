//! The server side (`iperf3 -s`): accepts a control connection, reads the parameters,
//! accepts the data streams (matched by cookie), runs the test and exchanges results.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::client::DEFAULT_IDLE_TIMEOUT;
use crate::interval::{Interval, Reporter};
use crate::outcome::{Poll, Role, TestOutcome};
use crate::protocol::{
    random_seed, stream_id, Cookie, RecvBuf, Results, SendBuf, State, TestError, TestParams,
    COOKIE_SIZE, DEFAULT_PORT, IEUNIMP, MAX_JSON_LEN,
};
use crate::sockets::Sockets;
use crate::stream::{secs_between, Stream, Transfer};

/// iperf3's server ends a timed test this long after `time + omit` if the client has
/// not finished it (`create_server_timers`: 4 s "max RTT" x 10 state transitions).
pub const SERVER_GRACE: Duration = Duration::from_secs(40);
/// Most connections waiting for their cookie at once; more are closed.
pub const MAX_PENDING: usize = 64;
/// Most connections accepted per `poll`.
const ACCEPTS_PER_POLL: usize = 64;

/// The server's options (a subset of `iperf3 -s`).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Where to listen (`-B addr -p port`; iperf3's port is 5201).
    pub listen: SocketAddr,
    /// Serve one test, then stop (`-1`).
    pub one_off: bool,
    /// Drop a test or a half-open connection when nothing moves for this long.
    pub idle_timeout: Duration,
    /// Seed for the payload bytes.
    pub seed: u64,
    /// Interval of the periodic statistics (`-i`, default 1 s; `None` for none).
    pub interval: Option<Duration>,
}

impl ServerConfig {
    /// Listens on `listen`, serving tests forever.
    pub fn new(listen: SocketAddr) -> Self {
        ServerConfig {
            listen,
            one_off: false,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            seed: random_seed(),
            interval: Some(Duration::from_secs(1)),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig::new(SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT)))
    }
}

/// A connection that has not sent its whole cookie yet.
#[derive(Debug)]
struct Pending<C> {
    conn: C,
    buf: Vec<u8>,
    since: Duration,
}

/// Where the current test is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitParams,
    CreateStreams,
    Running,
    AwaitClientResults,
    AwaitDone,
    Finished,
}

/// One test in progress.
#[derive(Debug)]
struct Test<C> {
    cookie: Cookie,
    conn: C,
    rx: RecvBuf,
    tx: SendBuf,
    phase: Phase,
    params: TestParams,
    xfer: Transfer<C>,
    /// The stats and omit timers (the client's `-O`, our `-i`).
    reporter: Reporter,
    /// A stream held back by the client's `-b` may write again at this time.
    next_send: Option<Duration>,
    start: Option<Duration>,
    end: Option<Duration>,
    last_progress: Duration,
    local_results: Option<Value>,
    peer_results: Option<(Value, Results)>,
    addrs: (Option<SocketAddr>, Option<SocketAddr>),
    cpu: crate::cpu::CpuMeter,
}

/// An iperf3 server as a state machine over [`Sockets`].
#[derive(Debug)]
pub struct Server<N: Sockets> {
    cfg: ServerConfig,
    listener: Option<N::Listener>,
    /// Connections that may become a test's control connection.
    ctrl_pending: Vec<Pending<N::Conn>>,
    /// Connections that may become the current test's data streams.
    data_pending: Vec<Pending<N::Conn>>,
    test: Option<Test<N::Conn>>,
    tests: u64,
    finished: Vec<TestOutcome>,
    done: Option<TestOutcome>,
}

/// Reads what is missing of a pending connection's cookie: `Ok(true)` once complete.
fn read_cookie<N: Sockets>(net: &mut N, p: &mut Pending<N::Conn>) -> std::io::Result<bool> {
    let mut b = [0u8; COOKIE_SIZE];
    while p.buf.len() < COOKIE_SIZE {
        let want = COOKIE_SIZE - p.buf.len();
        match net.read(p.conn, &mut b[..want]) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => p.buf.extend_from_slice(&b[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Sends `ACCESS_DENIED` (best effort) and closes, as iperf3 does for a connection it
/// will not serve.
fn deny<N: Sockets>(net: &mut N, c: N::Conn) {
    let _ = net.write(c, &[State::AccessDenied.to_byte()]);
    net.close(c);
}

impl<N: Sockets> Server<N> {
    /// Opens the listener.
    pub fn new(cfg: ServerConfig, net: &mut N) -> std::io::Result<Self> {
        let listener = net.listen(cfg.listen)?;
        Ok(Server {
            cfg,
            listener: Some(listener),
            ctrl_pending: Vec::new(),
            data_pending: Vec::new(),
            test: None,
            tests: 0,
            finished: Vec::new(),
            done: None,
        })
    }

    /// The current test, once its streams are all connected: the number of the
    /// test (1, 2, ...), the client's control address, and each data stream's id
    /// and addresses (iperf3's `Accepted connection from ...` and `[  5] local ...
    /// connected to ...` lines).
    #[allow(clippy::type_complexity)]
    pub fn connected_streams(
        &self,
    ) -> Option<(
        u64,
        Option<SocketAddr>,
        Vec<(u32, Option<SocketAddr>, Option<SocketAddr>)>,
    )> {
        let t = self.test.as_ref().filter(|t| t.start.is_some())?;
        let streams = t.xfer.streams.iter().map(|s| (s.id, s.local, s.peer));
        Some((self.tests, t.addrs.1, streams.collect()))
    }

    /// The current test's intervals completed since the last call.
    pub fn take_intervals(&mut self) -> Vec<Interval> {
        self.test
            .as_mut()
            .map_or_else(Vec::new, |t| t.reporter.take_new())
    }

    /// The outcomes of tests finished since the last call (when not `one_off`).
    pub fn take_finished(&mut self) -> Vec<TestOutcome> {
        std::mem::take(&mut self.finished)
    }

    /// A test is in progress.
    pub fn busy(&self) -> bool {
        self.test.is_some()
    }

    /// Does all the work possible now. With `one_off`, returns [`Poll::Done`] once the
    /// first test has ended (and the listener is closed); otherwise always `Pending`,
    /// and finished tests are handed out by [`take_finished`](Self::take_finished).
    pub fn poll(&mut self, net: &mut N) -> Poll {
        if let Some(o) = &self.done {
            return Poll::Done(o.clone());
        }
        let now = net.now();
        let mut more = self.accept_new(net, now);
        self.read_control_cookies(net, now);
        if self.test.is_some() {
            match self.step_test(net, now) {
                Ok(m) => more |= m,
                Err(e) => self.end_test(net, now, Some(e)),
            }
        }
        if let Some(o) = &self.done {
            return Poll::Done(o.clone());
        }
        Poll::Pending {
            wake_at: Some(if more { now } else { self.wake_at(now) }),
        }
    }

    /// Stops serving: ends any test with `SERVER_TERMINATE` sent to its client (best
    /// effort) and closes every connection and the listener.
    pub fn shutdown(&mut self, net: &mut N) {
        if let Some(t) = &mut self.test {
            t.tx.push_state(State::ServerTerminate);
            let _ = t.tx.flush(net, t.conn);
            let now = net.now();
            self.end_test(net, now, Some(TestError::ServerTerminated));
        }
        self.close_all(net);
    }

    fn close_all(&mut self, net: &mut N) {
        for p in self
            .ctrl_pending
            .drain(..)
            .chain(self.data_pending.drain(..))
        {
            net.close(p.conn);
        }
        if let Some(l) = self.listener.take() {
            net.close_listener(l);
        }
    }

    fn wake_at(&self, now: Duration) -> Duration {
        let idle = self.cfg.idle_timeout;
        let pending = self.ctrl_pending.iter().chain(&self.data_pending);
        let mut w = pending.map(|p| p.since + idle).min().unwrap_or(now + idle);
        if let Some(t) = &self.test {
            w = w.min(t.last_progress + idle);
            let timers = [Self::test_deadline(t), t.reporter.wake_at(), t.next_send];
            for d in timers.into_iter().flatten() {
                w = w.min(d.max(now));
            }
        }
        w
    }

    /// iperf3's server timer: `time + omit + grace` after the start of a timed test.
    fn test_deadline(t: &Test<N::Conn>) -> Option<Duration> {
        let p = &t.params;
        let start = t.start?;
        (p.time != 0).then(|| start + Duration::from_secs(p.time + p.omit) + SERVER_GRACE)
    }

    /// Accepts queued connections: candidates for control before a test, for data
    /// while the test sets up, refused with `ACCESS_DENIED` once it runs.
    fn accept_new(&mut self, net: &mut N, now: Duration) -> bool {
        let Some(l) = self.listener else {
            return false;
        };
        for _ in 0..ACCEPTS_PER_POLL {
            let Ok(c) = net.accept(l) else {
                return false;
            };
            let phase = self.test.as_ref().map(|t| t.phase);
            let queue = match phase {
                None => &mut self.ctrl_pending,
                Some(Phase::AwaitParams | Phase::CreateStreams) => &mut self.data_pending,
                Some(_) => {
                    deny(net, c);
                    continue;
                }
            };
            if queue.len() >= MAX_PENDING {
                net.close(c);
                continue;
            }
            queue.push(Pending {
                conn: c,
                buf: Vec::with_capacity(COOKIE_SIZE),
                since: now,
            });
        }
        true
    }

    /// Reads cookies on control candidates; the first complete one starts a test.
    fn read_control_cookies(&mut self, net: &mut N, now: Duration) {
        let mut i = 0;
        while i < self.ctrl_pending.len() {
            let p = &mut self.ctrl_pending[i];
            match read_cookie(net, p) {
                Ok(false) if now.saturating_sub(p.since) < self.cfg.idle_timeout => i += 1,
                Ok(true) if self.test.is_none() => {
                    let p = self.ctrl_pending.remove(i);
                    self.start_test(net, p, now);
                }
                Ok(true) => self.data_pending.push(self.ctrl_pending.remove(i)),
                _ => net.close(self.ctrl_pending.remove(i).conn),
            }
        }
        if self.test.is_some() {
            // Like iperf3, later connections are taken as data streams (and refused
            // unless their cookie matches).
            self.data_pending.append(&mut self.ctrl_pending);
        }
    }

    fn start_test(&mut self, net: &mut N, p: Pending<N::Conn>, now: Duration) {
        let mut cookie = Cookie([0; COOKIE_SIZE]);
        cookie.0.copy_from_slice(&p.buf[..COOKIE_SIZE]);
        let mut tx = SendBuf::default();
        tx.push_state(State::ParamExchange);
        self.tests += 1;
        self.test = Some(Test {
            cookie,
            conn: p.conn,
            rx: RecvBuf::default(),
            tx,
            phase: Phase::AwaitParams,
            params: TestParams::default(),
            xfer: Transfer::new(false, 1, None, 0),
            reporter: Reporter::default(),
            next_send: None,
            start: None,
            end: None,
            last_progress: now,
            local_results: None,
            peer_results: None,
            addrs: (net.local_addr(p.conn), net.peer_addr(p.conn)),
            cpu: Default::default(),
        });
    }

    /// Advances the current test; `Ok(true)` when more work remains right now.
    fn step_test(&mut self, net: &mut N, now: Duration) -> Result<bool, TestError> {
        let Some(t) = &mut self.test else {
            return Ok(false);
        };
        let mut moved = flush(net, t)?;
        let mut more = false;
        if t.phase == Phase::Running {
            let p = t
                .xfer
                .pump(net, now)
                .map_err(|e| TestError::io("data stream", &e))?;
            moved += p.moved;
            more = p.more;
            t.next_send = p.next_send;
            t.reporter.tick(&mut t.xfer, net, now);
        }
        moved += self.read_control(net, now)?;
        more |= self.accept_streams(net, now)?;
        let Some(t) = &mut self.test else {
            return Ok(false);
        };
        moved += flush(net, t)?;
        if moved > 0 {
            t.last_progress = now;
        }
        if t.phase == Phase::Finished {
            self.end_test(net, now, None);
            return Ok(false);
        }
        if Self::test_deadline(t).is_some_and(|d| now >= d) {
            return Err(TestError::Timeout(
                "the test outlived its duration plus grace",
            ));
        }
        if now.saturating_sub(t.last_progress) >= self.cfg.idle_timeout {
            return Err(TestError::Timeout("nothing moved for the idle timeout"));
        }
        Ok(more)
    }

    fn read_control(&mut self, net: &mut N, now: Duration) -> Result<u64, TestError> {
        let Some(t) = &mut self.test else {
            return Ok(0);
        };
        let f =
            t.rx.fill(net, t.conn, MAX_JSON_LEN + 4)
                .map_err(|e| TestError::io("reading the control connection", &e))?;
        while self.next_message(net, now)? {}
        let phase = self.test.as_ref().map(|t| t.phase);
        if f.eof && phase != Some(Phase::Finished) {
            return Err(TestError::ControlClosed);
        }
        Ok(f.moved as u64)
    }

    /// Handles one complete control message, if one has arrived.
    fn next_message(&mut self, net: &mut N, now: Duration) -> Result<bool, TestError> {
        let seed = self.cfg.seed.wrapping_add(self.tests);
        let interval = self.cfg.interval;
        let Some(t) = &mut self.test else {
            return Ok(false);
        };
        match t.phase {
            Phase::Finished => Ok(false),
            Phase::AwaitParams => match t.rx.take_json(MAX_JSON_LEN)? {
                Some(v) => on_params(net, t, &v, (seed, interval)).map(|_| true),
                None => Ok(false),
            },
            Phase::AwaitClientResults => match t.rx.take_json(MAX_JSON_LEN)? {
                Some(v) => on_client_results(t, v).map(|_| true),
                None => Ok(false),
            },
            _ => match t.rx.take_state() {
                Some(s) => on_state(net, t, now, s).map(|_| true),
                None => Ok(false),
            },
        }
    }

    /// Matches data candidates' cookies; with all streams in, starts the test.
    fn accept_streams(&mut self, net: &mut N, now: Duration) -> Result<bool, TestError> {
        let Some(t) = &mut self.test else {
            return Ok(false);
        };
        let mut i = 0;
        while i < self.data_pending.len() {
            let p = &mut self.data_pending[i];
            let complete = read_cookie(net, p);
            let wanted = t.phase == Phase::CreateStreams
                && t.xfer.streams.len() < t.params.parallel as usize;
            match complete {
                Ok(false) if now.saturating_sub(p.since) < self.cfg.idle_timeout => i += 1,
                Ok(true) if wanted && t.cookie.matches(&p.buf) => {
                    let p = self.data_pending.remove(i);
                    let id = stream_id(t.xfer.streams.len());
                    t.xfer.streams.push(Stream::new(net, p.conn, id));
                }
                Ok(true) => deny(net, self.data_pending.remove(i).conn),
                _ => net.close(self.data_pending.remove(i).conn),
            }
        }
        if t.phase != Phase::CreateStreams || t.xfer.streams.len() < t.params.parallel as usize {
            return Ok(false);
        }
        for p in self.data_pending.drain(..) {
            deny(net, p.conn);
        }
        t.tx.push_state(State::TestStart);
        t.tx.push_state(State::TestRunning);
        t.start = Some(now);
        t.xfer.started = Some(now);
        t.reporter.begin(now);
        t.cpu.start(net);
        t.phase = Phase::Running;
        Ok(true)
    }

    /// Ends the current test: records its outcome and closes its connections.
    fn end_test(&mut self, net: &mut N, now: Duration, error: Option<TestError>) {
        let Some(mut t) = self.test.take() else {
            return;
        };
        if t.start.is_some() && t.end.is_none() {
            stop(net, &mut t, now);
        }
        let outcome = outcome(&t, now, error);
        t.xfer.close_all(net);
        net.close(t.conn);
        for p in self.data_pending.drain(..) {
            deny(net, p.conn);
        }
        if self.cfg.one_off {
            self.close_all(net);
            self.done = Some(outcome);
        } else {
            self.finished.push(outcome);
        }
    }
}

fn flush<C: Copy, N: Sockets<Conn = C>>(net: &mut N, t: &mut Test<C>) -> Result<u64, TestError> {
    t.tx.flush(net, t.conn)
        .map(|n| n as u64)
        .map_err(|e| TestError::io("writing to the control connection", &e))
}

/// The client's parameters: refuse with `SERVER_ERROR` what we do not implement.
fn on_params<N: Sockets>(
    net: &mut N,
    t: &mut Test<N::Conn>,
    v: &Value,
    (seed, interval): (u64, Option<Duration>),
) -> Result<(), TestError> {
    match TestParams::from_json(v) {
        Ok(p) => {
            let limit = (p.num != 0).then_some(p.num);
            t.xfer = Transfer::new(p.reverse, p.len, limit, seed);
            t.xfer.rate = if p.reverse { p.bandwidth } else { 0 };
            t.reporter = Reporter::new(interval, Duration::from_secs(p.omit));
            t.params = p;
            t.tx.push_state(State::CreateStreams);
            t.phase = Phase::CreateStreams;
            Ok(())
        }
        Err(e @ TestError::Unsupported(_)) => {
            t.tx.push_state(State::ServerError);
            t.tx.push(&IEUNIMP.to_be_bytes());
            t.tx.push(&0i32.to_be_bytes());
            let _ = t.tx.flush(net, t.conn);
            Err(e)
        }
        Err(e) => Err(e),
    }
}

fn on_state<N: Sockets>(
    net: &mut N,
    t: &mut Test<N::Conn>,
    now: Duration,
    s: State,
) -> Result<(), TestError> {
    match (t.phase, s) {
        (_, State::ClientTerminate) => Err(TestError::ClientTerminated),
        // iperf3 ignores a TEST_START from the client.
        (_, State::TestStart) => Ok(()),
        (Phase::Running, State::TestEnd) => {
            if !t.xfer.sending {
                // Count what already arrived (iperf3 closes without reading it).
                let _ = t.xfer.pump(net, now);
            }
            stop(net, t, now);
            t.xfer.close_all(net);
            t.tx.push_state(State::ExchangeResults);
            t.phase = Phase::AwaitClientResults;
            Ok(())
        }
        (Phase::AwaitDone, State::IperfDone) => {
            t.phase = Phase::Finished;
            Ok(())
        }
        (p, s) => Err(TestError::Protocol(format!(
            "unexpected state {s:?} (byte {}) while {p:?}",
            s.to_byte() as i8
        ))),
    }
}

/// The client's results; answers with ours and `DISPLAY_RESULTS`.
fn on_client_results<C: Copy + core::fmt::Debug>(
    t: &mut Test<C>,
    v: Value,
) -> Result<(), TestError> {
    let r = Results::from_json(&v)?;
    t.peer_results = Some((v, r));
    let secs = seconds(t, t.end.unwrap_or_default());
    let [total, user, system] = t.cpu.percent();
    let ours = Results {
        cpu_util_total: total,
        cpu_util_user: user,
        cpu_util_system: system,
        sender_has_retransmits: if t.xfer.sending { 1 } else { -1 },
        congestion_used: None,
        streams: t.xfer.results(secs),
    }
    .to_json();
    t.tx.push_json(&ours);
    t.tx.push_state(State::DisplayResults);
    t.local_results = Some(ours);
    t.phase = Phase::AwaitDone;
    Ok(())
}

fn stop<N: Sockets>(net: &mut N, t: &mut Test<N::Conn>, now: Duration) {
    t.end = Some(now);
    t.reporter.finish(&mut t.xfer, net, now);
    t.xfer.capture_stats(net);
    t.cpu.stop(net);
}

/// Seconds counted: from the start (or the end of omitting) to the end.
fn seconds<C>(t: &Test<C>, now: Duration) -> f64 {
    t.reporter
        .origin()
        .map_or(0.0, |s| secs_between(s, t.end.unwrap_or(now)))
}

fn outcome<C: Copy + core::fmt::Debug>(
    t: &Test<C>,
    now: Duration,
    error: Option<TestError>,
) -> TestOutcome {
    let peer = t.peer_results.as_ref().map_or(&[][..], |(_, r)| &r.streams);
    let mut o = TestOutcome::empty(Role::Server, t.params.clone(), t.cookie.as_string());
    (o.control_local, o.control_peer) = t.addrs;
    o.streams = t.xfer.outcomes(seconds(t, now), peer);
    o.local_results = t.local_results.clone();
    o.peer_results = t.peer_results.as_ref().map(|(v, _)| v.clone());
    o.intervals = t.reporter.intervals.clone();
    o.error = error;
    o
}
