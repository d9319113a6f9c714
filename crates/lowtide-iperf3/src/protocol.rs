//! iperf3's control protocol: state bytes, the cookie, length-prefixed JSON framing,
//! the test parameters and the results exchanged at the end of a test (as in iperf3
//! 3.12, `iperf_api.c`: `send_parameters`/`get_parameters`, `send_results`/`get_results`,
//! `JSON_write`/`JSON_read`).

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::io;

use serde_json::{json, Map, Value};

use crate::sockets::Sockets;

/// Size of the cookie that starts the control and every data connection: 36 printable
/// characters and a NUL.
pub const COOKIE_SIZE: usize = 37;
/// Largest JSON message accepted from the peer (iperf3 has no limit; we refuse a huge
/// length prefix instead of allocating it).
pub const MAX_JSON_LEN: usize = 4 << 20;
/// iperf3's `MAX_STREAMS`.
pub const MAX_STREAMS: u32 = 128;
/// iperf3's `MAX_BLOCKSIZE` for TCP (1 MiB).
pub const MAX_BLOCKSIZE: usize = 1 << 20;
/// iperf3's `MAX_TIME` (one day).
pub const MAX_TIME_SECS: u64 = 86_400;
/// iperf3's default TCP block size (`-l`): 128 KiB.
pub const DEFAULT_TCP_BLKSIZE: usize = 128 * 1024;
/// iperf3's default port.
pub const DEFAULT_PORT: u16 = 5201;
/// The version we announce as `client_version`.
pub const IPERF_VERSION: &str = "3.12";
/// iperf3's `IEUNIMP` ("an option you are trying to set is not implemented yet"), sent
/// with `SERVER_ERROR` when a client asks for something this server does not do.
pub const IEUNIMP: i32 = 13;

/// A control-connection state byte (iperf3's `signed char` states, `iperf_api.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// `TEST_START` (1).
    TestStart,
    /// `TEST_RUNNING` (2).
    TestRunning,
    /// `TEST_END` (4).
    TestEnd,
    /// `PARAM_EXCHANGE` (9).
    ParamExchange,
    /// `CREATE_STREAMS` (10).
    CreateStreams,
    /// `SERVER_TERMINATE` (11).
    ServerTerminate,
    /// `CLIENT_TERMINATE` (12).
    ClientTerminate,
    /// `EXCHANGE_RESULTS` (13).
    ExchangeResults,
    /// `DISPLAY_RESULTS` (14).
    DisplayResults,
    /// `IPERF_START` (15).
    IperfStart,
    /// `IPERF_DONE` (16).
    IperfDone,
    /// `ACCESS_DENIED` (-1).
    AccessDenied,
    /// `SERVER_ERROR` (-2), followed by two big-endian `i32`s: `i_errno` and `errno`.
    ServerError,
    /// Any other value (including the unused 3, 5..8).
    Other(i8),
}

impl State {
    /// Decodes a state byte.
    pub fn from_byte(b: u8) -> State {
        match b as i8 {
            1 => State::TestStart,
            2 => State::TestRunning,
            4 => State::TestEnd,
            9 => State::ParamExchange,
            10 => State::CreateStreams,
            11 => State::ServerTerminate,
            12 => State::ClientTerminate,
            13 => State::ExchangeResults,
            14 => State::DisplayResults,
            15 => State::IperfStart,
            16 => State::IperfDone,
            -1 => State::AccessDenied,
            -2 => State::ServerError,
            v => State::Other(v),
        }
    }

    /// Encodes a state byte.
    pub fn to_byte(self) -> u8 {
        let v: i8 = match self {
            State::TestStart => 1,
            State::TestRunning => 2,
            State::TestEnd => 4,
            State::ParamExchange => 9,
            State::CreateStreams => 10,
            State::ServerTerminate => 11,
            State::ClientTerminate => 12,
            State::ExchangeResults => 13,
            State::DisplayResults => 14,
            State::IperfStart => 15,
            State::IperfDone => 16,
            State::AccessDenied => -1,
            State::ServerError => -2,
            State::Other(v) => v,
        };
        v as u8
    }
}

/// Why a test failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestError {
    /// A socket call failed.
    Io {
        /// What we were doing.
        context: &'static str,
        /// The error kind.
        kind: io::ErrorKind,
        /// The error text.
        message: String,
    },
    /// The peer closed the control connection before the test finished (iperf3's
    /// `IECTRLCLOSE`).
    ControlClosed,
    /// The peer sent something malformed or unexpected.
    Protocol(String),
    /// The server refused the test (`ACCESS_DENIED`: it is busy, or a bad cookie).
    AccessDenied,
    /// The server reported an error (`SERVER_ERROR` with iperf3's `i_errno` and `errno`,
    /// if they arrived).
    ServerError {
        /// iperf3's error code (`IEUNIMP` = 13, ...).
        i_errno: Option<i32>,
        /// The server's `errno`.
        errno: Option<i32>,
    },
    /// The server ended the test (`SERVER_TERMINATE`).
    ServerTerminated,
    /// The client ended the test (`CLIENT_TERMINATE`).
    ClientTerminated,
    /// Nothing moved for too long, or the test outlived its duration plus grace.
    Timeout(&'static str),
    /// The configuration or the requested test is not supported.
    Unsupported(String),
}

impl TestError {
    /// Wraps an I/O error.
    pub fn io(context: &'static str, e: &io::Error) -> TestError {
        TestError::Io {
            context,
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestError::Io {
                context, message, ..
            } => write!(f, "{context}: {message}"),
            TestError::ControlClosed => write!(f, "the control connection closed unexpectedly"),
            TestError::Protocol(m) => write!(f, "protocol error: {m}"),
            TestError::AccessDenied => {
                write!(f, "the server is busy running a test (access denied)")
            }
            TestError::ServerError { i_errno, errno } => {
                write!(f, "server error (i_errno {i_errno:?}, errno {errno:?})")
            }
            TestError::ServerTerminated => write!(f, "the server has terminated"),
            TestError::ClientTerminated => write!(f, "the client has terminated"),
            TestError::Timeout(what) => write!(f, "timeout: {what}"),
            TestError::Unsupported(m) => write!(f, "unsupported: {m}"),
        }
    }
}

impl std::error::Error for TestError {}

/// SplitMix64: the cookie and the payload's pseudo-random bytes (no clock, no OS
/// randomness unless the seed comes from [`random_seed`]).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `len` pseudo-random bytes (iperf3 fills its send buffer once, from /dev/urandom).
    pub(crate) fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        while v.len() < len {
            v.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        v.truncate(len);
        v
    }
}

/// A seed from the standard library's per-process random hasher keys.
pub fn random_seed() -> u64 {
    RandomState::new().hash_one(0x5eed_u64)
}

/// The 37-byte cookie identifying a test: 36 characters from iperf3's alphabet
/// (`a`-`z`, `2`-`7`) and a NUL.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Cookie(pub [u8; COOKIE_SIZE]);

impl Cookie {
    /// A fresh cookie from `seed`.
    pub fn generate(seed: u64) -> Cookie {
        const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
        let mut rng = Rng::new(seed ^ 0xc00c_1e00);
        let mut c = [0u8; COOKIE_SIZE];
        for b in c.iter_mut().take(COOKIE_SIZE - 1) {
            *b = ALPHABET[(rng.next_u64() % 32) as usize];
        }
        Cookie(c)
    }

    /// The printable part, up to the first NUL (lossy for a hostile peer's bytes).
    pub fn as_string(&self) -> String {
        let end = self.0.iter().position(|&b| b == 0).unwrap_or(COOKIE_SIZE);
        String::from_utf8_lossy(&self.0[..end]).into_owned()
    }

    /// iperf3 compares cookies with `strcmp`: equal up to the first NUL.
    pub fn matches(&self, other: &[u8]) -> bool {
        let a = &self.0[..self.0.iter().position(|&b| b == 0).unwrap_or(COOKIE_SIZE)];
        let end = other.iter().position(|&b| b == 0).unwrap_or(other.len());
        a == &other[..end]
    }
}

impl fmt::Debug for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cookie({:?})", self.as_string())
    }
}

/// What a read into a [`RecvBuf`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Filled {
    /// Bytes read.
    pub moved: usize,
    /// The peer closed its side.
    pub eof: bool,
}

/// Incoming control bytes, parsed incrementally (state bytes, big-endian lengths,
/// JSON), so that a message split over any number of reads is handled.
#[derive(Debug, Default)]
pub(crate) struct RecvBuf {
    buf: Vec<u8>,
}

impl RecvBuf {
    /// Reads what the connection has, until `WouldBlock`, end of stream, or the buffer
    /// holds `cap` bytes.
    pub(crate) fn fill<N: Sockets>(
        &mut self,
        net: &mut N,
        c: N::Conn,
        cap: usize,
    ) -> io::Result<Filled> {
        let mut out = Filled::default();
        let mut chunk = [0u8; 4096];
        while self.buf.len() < cap {
            let want = chunk.len().min(cap - self.buf.len());
            match net.read(c, &mut chunk[..want]) {
                Ok(0) => {
                    out.eof = true;
                    break;
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    out.moved += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Appends bytes (tests, and bytes read elsewhere).
    #[cfg(test)]
    pub(crate) fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// The next state byte, if one has arrived.
    pub(crate) fn take_state(&mut self) -> Option<State> {
        let b = *self.buf.first()?;
        self.buf.remove(0);
        Some(State::from_byte(b))
    }

    /// The next `n` bytes, if they have arrived.
    pub(crate) fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        if self.buf.len() < n {
            return None;
        }
        let rest = self.buf.split_off(n);
        Some(std::mem::replace(&mut self.buf, rest))
    }

    /// The next length-prefixed JSON object, if all of it has arrived; an error for a
    /// length over `max` or text that is not a JSON object.
    pub(crate) fn take_json(&mut self, max: usize) -> Result<Option<Value>, TestError> {
        let Some(len) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > max {
            return Err(TestError::Protocol(format!(
                "JSON length {len} exceeds the limit of {max} bytes"
            )));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let msg = self.take_exact(4 + len).unwrap_or_default();
        // cJSON stops at a NUL; accept a trailing one.
        let text = msg[4..].split(|&b| b == 0).next().unwrap_or(&[]);
        match serde_json::from_slice::<Value>(text) {
            Ok(v @ Value::Object(_)) => Ok(Some(v)),
            Ok(_) => Err(TestError::Protocol("JSON message is not an object".into())),
            Err(e) => Err(TestError::Protocol(format!("bad JSON: {e}"))),
        }
    }
}

/// Outgoing control bytes not yet accepted by the connection.
#[derive(Debug, Default)]
pub(crate) struct SendBuf {
    buf: Vec<u8>,
    off: usize,
}

impl SendBuf {
    /// Queues raw bytes.
    pub(crate) fn push(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Queues a state byte.
    pub(crate) fn push_state(&mut self, s: State) {
        self.buf.push(s.to_byte());
    }

    /// Queues a JSON value behind its 4-byte big-endian length (`JSON_write`).
    pub(crate) fn push_json(&mut self, v: &Value) {
        let text = v.to_string();
        self.buf
            .extend_from_slice(&(text.len() as u32).to_be_bytes());
        self.buf.extend_from_slice(text.as_bytes());
    }

    /// Nothing left to send.
    pub(crate) fn is_empty(&self) -> bool {
        self.off >= self.buf.len()
    }

    /// The queued bytes not yet written (tests).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buf[self.off..]
    }

    /// Writes until empty or `WouldBlock`; returns the bytes written.
    pub(crate) fn flush<N: Sockets>(&mut self, net: &mut N, c: N::Conn) -> io::Result<usize> {
        let mut moved = 0;
        while self.off < self.buf.len() {
            match net.write(c, &self.buf[self.off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.off += n;
                    moved += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.off >= self.buf.len() {
            self.buf.clear();
            self.off = 0;
        }
        Ok(moved)
    }
}

/// A JSON number as `u64` (cJSON may print integers as doubles); `None` if absent.
fn get_u64(o: &Map<String, Value>, key: &str) -> Result<Option<u64>, TestError> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => num_u64(v)
            .map(Some)
            .ok_or_else(|| TestError::Protocol(format!("\"{key}\" is not a non-negative number"))),
    }
}

fn num_u64(v: &Value) -> Option<u64> {
    if let Some(u) = v.as_u64() {
        return Some(u);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f >= 0.0 && f < u64::MAX as f64).then_some(f as u64)
}

/// A JSON number as `i64`. iperf3 3.12's cJSON prints a negative 64-bit value as its
/// unsigned twin (-1 as 18446744073709551615), so values above `i64::MAX` wrap.
fn num_i64(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if let Some(u) = v.as_u64() {
        return Some(u as i64);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f.abs() < i64::MAX as f64).then_some(f as i64)
}

/// cJSON's notion of true: `true` or a non-zero number.
fn get_flag(o: &Map<String, Value>, key: &str) -> bool {
    match o.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(v) => v.as_f64().is_some_and(|f| f != 0.0),
        None => false,
    }
}

/// The test parameters the client sends after `PARAM_EXCHANGE` (the TCP subset of
/// iperf3 3.12's `send_parameters`).
#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    /// `omit`: seconds at the start not counted (we always send 0).
    pub omit: u64,
    /// `time`: test duration in seconds (0 with `-n`).
    pub time: u64,
    /// `num`: bytes to send (`-n`; 0 = by time).
    pub num: u64,
    /// `blockcount` (`-k`; 0 = unused).
    pub blockcount: u64,
    /// `parallel`: number of streams.
    pub parallel: u32,
    /// `reverse`: the server sends.
    pub reverse: bool,
    /// `bidirectional` (not supported by this implementation's server).
    pub bidirectional: bool,
    /// `len`: the block size of each read and write.
    pub len: usize,
    /// `bandwidth` (`-b`, bits/s; 0 = unlimited).
    pub bandwidth: u64,
    /// `pacing_timer` (µs).
    pub pacing_timer: u64,
    /// `udp` or `sctp` was requested (not supported).
    pub not_tcp: bool,
    /// `client_version`.
    pub client_version: Option<String>,
}

impl Default for TestParams {
    fn default() -> Self {
        TestParams {
            omit: 0,
            time: 10,
            num: 0,
            blockcount: 0,
            parallel: 1,
            reverse: false,
            bidirectional: false,
            len: DEFAULT_TCP_BLKSIZE,
            bandwidth: 0,
            pacing_timer: 1000,
            not_tcp: false,
            client_version: Some(IPERF_VERSION.into()),
        }
    }
}

impl TestParams {
    /// The JSON iperf3 3.12's client sends (same keys, same order).
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("tcp".into(), Value::Bool(true));
        o.insert("omit".into(), json!(self.omit));
        o.insert("time".into(), json!(self.time));
        o.insert("num".into(), json!(self.num));
        o.insert("blockcount".into(), json!(self.blockcount));
        o.insert("parallel".into(), json!(self.parallel));
        if self.reverse {
            o.insert("reverse".into(), Value::Bool(true));
        }
        if self.bidirectional {
            o.insert("bidirectional".into(), Value::Bool(true));
        }
        o.insert("len".into(), json!(self.len));
        if self.bandwidth != 0 {
            o.insert("bandwidth".into(), json!(self.bandwidth));
        }
        if self.pacing_timer != 0 {
            o.insert("pacing_timer".into(), json!(self.pacing_timer));
        }
        if let Some(v) = &self.client_version {
            o.insert("client_version".into(), json!(v));
        }
        Value::Object(o)
    }

    /// Parses and validates the client's parameters (absent keys keep iperf3's
    /// defaults, as `get_parameters` does).
    pub fn from_json(v: &Value) -> Result<TestParams, TestError> {
        let o = v
            .as_object()
            .ok_or_else(|| TestError::Protocol("parameters are not a JSON object".into()))?;
        let d = TestParams::default();
        let p = TestParams {
            omit: get_u64(o, "omit")?.unwrap_or(d.omit),
            time: get_u64(o, "time")?.unwrap_or(d.time),
            num: get_u64(o, "num")?.unwrap_or(d.num),
            blockcount: get_u64(o, "blockcount")?.unwrap_or(d.blockcount),
            parallel: get_u64(o, "parallel")?.map_or(1, |n| n.min(u32::MAX as u64) as u32),
            reverse: get_flag(o, "reverse"),
            bidirectional: get_flag(o, "bidirectional"),
            len: get_u64(o, "len")?.map_or(d.len, |n| n.min(usize::MAX as u64) as usize),
            bandwidth: get_u64(o, "bandwidth")?.unwrap_or(0),
            pacing_timer: get_u64(o, "pacing_timer")?.unwrap_or(d.pacing_timer),
            not_tcp: get_flag(o, "udp") || get_flag(o, "sctp"),
            client_version: o
                .get("client_version")
                .and_then(|v| v.as_str())
                .map(Into::into),
        };
        p.validate()?;
        Ok(p)
    }

    /// Checks the limits iperf3 enforces, and refuses what this implementation does not do.
    pub fn validate(&self) -> Result<(), TestError> {
        let bad = |m: String| Err(TestError::Unsupported(m));
        if self.not_tcp {
            return bad("only TCP tests are implemented".into());
        }
        if self.bidirectional {
            return bad("bidirectional tests are not implemented".into());
        }
        if self.parallel == 0 || self.parallel > MAX_STREAMS {
            return bad(format!(
                "parallel {} not in 1..={MAX_STREAMS}",
                self.parallel
            ));
        }
        if self.len == 0 || self.len > MAX_BLOCKSIZE {
            return bad(format!(
                "block size {} not in 1..={MAX_BLOCKSIZE}",
                self.len
            ));
        }
        if self.time > MAX_TIME_SECS || self.omit > MAX_TIME_SECS {
            return bad(format!("duration {} s over {MAX_TIME_SECS} s", self.time));
        }
        Ok(())
    }
}

/// One stream's entry in the results exchange.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// Stream id (1, 3, 4, 5, ... as iperf3 numbers them).
    pub id: u32,
    /// Bytes sent (the sender's entry) or received (the receiver's).
    pub bytes: u64,
    /// Retransmits, or -1 when unknown or the side is the receiver.
    pub retransmits: i64,
    /// UDP jitter (0 for TCP).
    pub jitter: f64,
    /// UDP errors (0 for TCP).
    pub errors: i64,
    /// UDP packets (0 for TCP).
    pub packets: i64,
    /// Seconds from the stream's start (always 0).
    pub start_time: f64,
    /// Seconds from the stream's start to its end.
    pub end_time: Option<f64>,
}

/// The results one side sends after `EXCHANGE_RESULTS` (iperf3's `send_results`).
#[derive(Debug, Clone, PartialEq)]
pub struct Results {
    /// CPU utilization, percent (we have no CPU accounting: 0).
    pub cpu_util_total: f64,
    /// User CPU, percent.
    pub cpu_util_user: f64,
    /// System CPU, percent.
    pub cpu_util_system: f64,
    /// 1 if the sender reports retransmits, 0 if not, -1 from a receiver.
    pub sender_has_retransmits: i64,
    /// The congestion control algorithm, if known.
    pub congestion_used: Option<String>,
    /// Per-stream results.
    pub streams: Vec<StreamResult>,
}

impl Results {
    /// The JSON object iperf3 sends.
    pub fn to_json(&self) -> Value {
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                json!({
                    "id": s.id, "bytes": s.bytes, "retransmits": s.retransmits,
                    "jitter": s.jitter, "errors": s.errors, "packets": s.packets,
                    "start_time": s.start_time, "end_time": s.end_time.unwrap_or(0.0),
                })
            })
            .collect();
        let mut o = Map::new();
        o.insert("cpu_util_total".into(), json!(self.cpu_util_total));
        o.insert("cpu_util_user".into(), json!(self.cpu_util_user));
        o.insert("cpu_util_system".into(), json!(self.cpu_util_system));
        o.insert(
            "sender_has_retransmits".into(),
            json!(self.sender_has_retransmits),
        );
        if let Some(c) = &self.congestion_used {
            o.insert("congestion_used".into(), json!(c));
        }
        o.insert("streams".into(), Value::Array(streams));
        Value::Object(o)
    }

    /// Parses the peer's results, requiring what iperf3's `get_results` requires.
    pub fn from_json(v: &Value) -> Result<Results, TestError> {
        let bad = |m: &str| TestError::Protocol(format!("results: {m}"));
        let o = v.as_object().ok_or_else(|| bad("not an object"))?;
        let f = |k: &str| o.get(k).and_then(Value::as_f64).ok_or_else(|| bad(k));
        let streams = o
            .get("streams")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no streams"))?;
        Ok(Results {
            cpu_util_total: f("cpu_util_total")?,
            cpu_util_user: f("cpu_util_user")?,
            cpu_util_system: f("cpu_util_system")?,
            sender_has_retransmits: o
                .get("sender_has_retransmits")
                .and_then(num_i64)
                .ok_or_else(|| bad("sender_has_retransmits"))?,
            congestion_used: o
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(Into::into),
            streams: streams
                .iter()
                .map(StreamResult::from_json)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl StreamResult {
    fn from_json(v: &Value) -> Result<StreamResult, TestError> {
        let bad = |m: &str| TestError::Protocol(format!("results stream: bad or missing {m}"));
        let o = v.as_object().ok_or_else(|| bad("object"))?;
        let i = |k: &str| o.get(k).and_then(num_i64).ok_or_else(|| bad(k));
        let id = i("id")?;
        Ok(StreamResult {
            id: u32::try_from(id).map_err(|_| bad("id"))?,
            bytes: o
                .get("bytes")
                .and_then(num_u64)
                .ok_or_else(|| bad("bytes"))?,
            retransmits: i("retransmits")?,
            jitter: o
                .get("jitter")
                .and_then(Value::as_f64)
                .ok_or_else(|| bad("jitter"))?,
            errors: i("errors")?,
            packets: i("packets")?,
            start_time: o.get("start_time").and_then(Value::as_f64).unwrap_or(0.0),
            end_time: o.get("end_time").and_then(Value::as_f64),
        })
    }
}

/// iperf3's stream numbering (`iperf_add_stream`): the first stream is 1, the n-th
/// (n >= 2) is n + 1, so 1, 3, 4, 5, ...
pub fn stream_id(index: usize) -> u32 {
    if index == 0 {
        1
    } else {
        (index + 2) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes() {
        for b in 0..=255u8 {
            assert_eq!(State::from_byte(b).to_byte(), b);
        }
        assert_eq!(State::from_byte(0xff), State::AccessDenied);
        assert_eq!(State::from_byte(0xfe), State::ServerError);
        assert_eq!(State::from_byte(13), State::ExchangeResults);
        assert_eq!(State::IperfDone.to_byte(), 16);
    }

    #[test]
    fn cookie_shape_and_strcmp() {
        let c = Cookie::generate(7);
        assert_eq!(c.0[36], 0);
        assert_eq!(c.as_string().len(), 36);
        assert_ne!(Cookie::generate(8), c);
        assert!(c.matches(&c.0));
        let mut other = c.0;
        other[5] ^= 1;
        assert!(!c.matches(&other));
        assert!(!c.matches(&c.0[..20]));
    }

    #[test]
    fn json_framing_byte_by_byte() {
        let v = json!({"a": 1, "b": [true]});
        let mut tx = SendBuf::default();
        tx.push_state(State::TestEnd);
        tx.push_json(&v);
        tx.push_state(State::IperfDone);
        let wire = tx.pending().to_vec();
        assert_eq!(&wire[1..5], &(v.to_string().len() as u32).to_be_bytes());
        let mut rx = RecvBuf::default();
        let mut got = Vec::new();
        let mut want_json = false;
        for &b in &wire {
            rx.push(&[b]);
            if want_json {
                if let Some(j) = rx.take_json(MAX_JSON_LEN).unwrap() {
                    got.push(format!("{j}"));
                    want_json = false;
                }
            } else if let Some(s) = rx.take_state() {
                got.push(format!("{s:?}"));
                want_json = s == State::TestEnd;
            }
        }
        assert_eq!(got, ["TestEnd", &v.to_string(), "IperfDone"]);
    }

    #[test]
    fn hostile_json_is_an_error() {
        let cases: [&[u8]; 5] = [
            &[0xff, 0xff, 0xff, 0xff],
            b"\0\0\0\x03{x}",
            b"\0\0\0\x01[",
            b"\0\0\0\x02\"\"",
            b"\0\0\0\x04\xff\xfe{}",
        ];
        for bad in cases {
            let mut rx = RecvBuf::default();
            rx.push(bad);
            assert!(rx.take_json(MAX_JSON_LEN).is_err(), "{bad:?}");
        }
        let mut rx = RecvBuf::default();
        rx.push(b"\0\0\0\x03{}\0");
        assert_eq!(
            rx.take_json(MAX_JSON_LEN).unwrap(),
            Some(json!({})),
            "trailing NUL"
        );
    }

    #[test]
    fn real_client_params() {
        // What iperf3 3.12 sends for `-t 3 -P 2 -R`.
        let text = r#"{"tcp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        let p = TestParams::from_json(&v).unwrap();
        assert_eq!((p.time, p.parallel, p.reverse, p.len), (3, 2, true, 131072));
        let ours = TestParams {
            time: 3,
            parallel: 2,
            reverse: true,
            ..TestParams::default()
        };
        assert_eq!(ours.to_json(), v, "same keys and values as iperf3 3.12");
        for bad in [
            json!({"udp": true}),
            json!({"bidirectional": true}),
            json!({"parallel": 0}),
            json!({"parallel": 129}),
            json!({"len": 2_000_000}),
            json!({"time": -1}),
            json!({"time": "x"}),
        ] {
            assert!(TestParams::from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn real_server_results() {
        // iperf3 3.12 prints -1 as an unsigned 64-bit number.
        let text = r#"{"cpu_util_total":61.2,"cpu_util_user":1.6,"cpu_util_system":59.6,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":8813452582,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":1.000043}]}"#;
        let r = Results::from_json(&serde_json::from_str(text).unwrap()).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].bytes, 8_813_452_582);
        assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
        let back = Results::from_json(&r.to_json()).unwrap();
        assert_eq!(back.streams, r.streams);
        assert!(Results::from_json(&json!({"cpu_util_total": 1})).is_err());
        let no_id = json!({"cpu_util_total": 0, "cpu_util_user": 0, "cpu_util_system": 0,
            "sender_has_retransmits": 0, "streams": [{"bytes": 1}]});
        assert!(Results::from_json(&no_id).is_err());
    }

    #[test]
    fn stream_numbering() {
        let ids: Vec<u32> = (0..5).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5, 6]);
    }
}
