//! State-machine tests over a scripted in-memory [`Sockets`]: hand-made control bytes,
//! delivered one byte per read.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};

use crate::outcome::Poll;
use crate::protocol::{State, TestError, COOKIE_SIZE};
use crate::sockets::{ConnStats, Sockets};
use crate::{Client, ClientConfig, Server, ServerConfig, TestOutcome};

#[derive(Debug, Default)]
struct FakeConn {
    /// Bytes the peer sent us, not yet read.
    rx: VecDeque<u8>,
    /// Bytes we wrote.
    tx: Vec<u8>,
    peer_closed: bool,
    closed: bool,
}

/// An in-memory network: reads return at most `read_chunk` bytes.
#[derive(Debug)]
struct FakeSockets {
    now: Duration,
    conns: Vec<FakeConn>,
    backlog: VecDeque<usize>,
    connects: Vec<SocketAddr>,
    read_chunk: usize,
    /// What `send_queue_len` reports for every connection (unacknowledged bytes).
    unacked: Option<u64>,
    /// What `cpu_time` reports.
    cpu: crate::cpu::CpuTime,
}

impl FakeSockets {
    fn new() -> Self {
        FakeSockets {
            now: Duration::from_secs(1),
            conns: Vec::new(),
            backlog: VecDeque::new(),
            connects: Vec::new(),
            read_chunk: 1,
            unacked: None,
            cpu: Default::default(),
        }
    }

    fn feed(&mut self, c: usize, b: &[u8]) {
        self.conns[c].rx.extend(b);
    }

    fn feed_json(&mut self, c: usize, v: &Value) {
        let t = v.to_string();
        self.feed(c, &(t.len() as u32).to_be_bytes());
        self.feed(c, t.as_bytes());
    }

    fn take(&mut self, c: usize) -> Vec<u8> {
        std::mem::take(&mut self.conns[c].tx)
    }

    /// A new incoming connection (for a server).
    fn incoming(&mut self, first: &[u8]) -> usize {
        self.conns.push(FakeConn::default());
        let c = self.conns.len() - 1;
        self.feed(c, first);
        self.backlog.push_back(c);
        c
    }
}

fn would_block() -> io::Error {
    io::ErrorKind::WouldBlock.into()
}

impl Sockets for FakeSockets {
    type Conn = usize;
    type Listener = usize;

    fn now(&self) -> Duration {
        self.now
    }
    fn connect(&mut self, to: SocketAddr) -> io::Result<usize> {
        self.connects.push(to);
        self.conns.push(FakeConn::default());
        Ok(self.conns.len() - 1)
    }
    fn listen(&mut self, _: SocketAddr) -> io::Result<usize> {
        Ok(0)
    }
    fn accept(&mut self, _: usize) -> io::Result<usize> {
        self.backlog.pop_front().ok_or_else(would_block)
    }
    fn read(&mut self, c: usize, buf: &mut [u8]) -> io::Result<usize> {
        let chunk = self.read_chunk;
        let k = &mut self.conns[c];
        if k.rx.is_empty() {
            return if k.peer_closed {
                Ok(0)
            } else {
                Err(would_block())
            };
        }
        let n = buf.len().min(chunk).min(k.rx.len());
        for (d, s) in buf.iter_mut().zip(k.rx.drain(..n)) {
            *d = s;
        }
        Ok(n)
    }
    fn write(&mut self, c: usize, buf: &[u8]) -> io::Result<usize> {
        let k = &mut self.conns[c];
        if k.closed || k.peer_closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let n = buf.len().min(64 * 1024);
        k.tx.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn shutdown_write(&mut self, _: usize) -> io::Result<()> {
        Ok(())
    }
    fn close(&mut self, c: usize) {
        self.conns[c].closed = true;
    }
    fn close_listener(&mut self, _: usize) {}
    fn stats(&self, _: usize) -> ConnStats {
        ConnStats {
            retransmits: 7,
            ..ConnStats::default()
        }
    }
    fn cpu_time(&self) -> crate::cpu::CpuTime {
        self.cpu
    }

    fn send_queue_len(&self, _: usize) -> Option<u64> {
        self.unacked
    }
}

const SERVER: &str = "10.0.0.1:5201";

fn client_cfg() -> ClientConfig {
    let mut c = ClientConfig::new(SERVER.parse().unwrap());
    c.duration = Duration::from_secs(2);
    c.seed = 42;
    c
}

/// Polls until `Done` or `n` polls, without moving time.
fn spin<N: Sockets>(client: &mut Client<N>, net: &mut N, n: usize) -> Option<TestOutcome> {
    for _ in 0..n {
        if let Poll::Done(o) = client.poll(net) {
            return Some(o);
        }
    }
    None
}

fn split_json(b: &[u8]) -> Value {
    let len = u32::from_be_bytes(b[..4].try_into().unwrap()) as usize;
    assert_eq!(b.len(), 4 + len, "exactly one length-prefixed message");
    serde_json::from_slice(&b[4..]).unwrap()
}

/// Runs the client up to `TEST_RUNNING` against a scripted server (conn 0 = control).
fn client_to_running(net: &mut FakeSockets, cfg: ClientConfig) -> Client<FakeSockets> {
    let mut c = Client::new(cfg.clone());
    assert!(spin(&mut c, net, 3).is_none());
    let cookie = net.take(0);
    assert_eq!(cookie.len(), COOKIE_SIZE);
    assert_eq!(cookie[36], 0);
    assert!(cookie[..36]
        .iter()
        .all(|b| b"abcdefghijklmnopqrstuvwxyz234567".contains(b)));
    net.feed(0, &[9]);
    spin(&mut c, net, 3);
    let params = split_json(&net.take(0));
    assert_eq!(params["tcp"], json!(true));
    let time = if cfg.bytes.is_some() {
        0
    } else {
        cfg.duration.as_secs()
    };
    assert_eq!(params["time"], json!(time));
    assert_eq!(params["num"], json!(cfg.bytes.unwrap_or(0)));
    assert_eq!(params["parallel"], json!(cfg.parallel));
    assert_eq!(params["len"], json!(cfg.blksize));
    assert_eq!(params["client_version"], json!("3.12"));
    assert_eq!(params["omit"], json!(cfg.omit.as_secs()));
    let bw = (cfg.bandwidth > 0).then_some(cfg.bandwidth);
    assert_eq!(params.get("bandwidth"), bw.map(|b| json!(b)).as_ref());
    net.feed(0, &[10]);
    spin(&mut c, net, 3);
    assert_eq!(net.connects.len(), 1 + cfg.parallel as usize);
    for s in 1..=cfg.parallel as usize {
        assert_eq!(
            net.take(s),
            cookie,
            "data stream {s} starts with the cookie"
        );
    }
    net.feed(0, &[1, 2]);
    spin(&mut c, net, 3);
    c
}

fn server_results(ids: &[u32], bytes: u64) -> Value {
    let streams: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "bytes": bytes, "retransmits": 18446744073709551615u64,
            "jitter": 0, "errors": 0, "packets": 0, "start_time": 0, "end_time": 2.0})
        })
        .collect();
    json!({"cpu_util_total": 1.5, "cpu_util_user": 0.5, "cpu_util_system": 1.0,
        "sender_has_retransmits": 18446744073709551615u64, "streams": streams})
}

#[test]
fn client_full_test_one_byte_reads() {
    let mut net = FakeSockets::new();
    let mut cfg = client_cfg();
    cfg.parallel = 2;
    let mut c = client_to_running(&mut net, cfg);
    let sent: Vec<usize> = (1..=2).map(|s| net.take(s).len()).collect();
    assert!(sent.iter().all(|&n| n > 0), "data flows on both streams");
    assert!(net.take(0).is_empty(), "no TEST_END before the time is up");
    net.now += Duration::from_secs(2);
    // iperf3's cpu_util: 1 s user + 0.5 s system over the test's 2 s.
    net.cpu = crate::cpu::CpuTime {
        user: Duration::from_secs(1),
        system: Duration::from_millis(500),
    };
    spin(&mut c, &mut net, 2);
    assert_eq!(net.take(0), [4], "TEST_END");
    net.feed(0, &[13]);
    spin(&mut c, &mut net, 3);
    let ours = split_json(&net.take(0));
    assert_eq!(ours["sender_has_retransmits"], json!(1));
    let cpu = |k: &str| ours[k].as_f64().unwrap();
    assert_eq!(
        [
            cpu("cpu_util_total"),
            cpu("cpu_util_user"),
            cpu("cpu_util_system")
        ],
        [75.0, 50.0, 25.0]
    );
    let ids: Vec<Value> = ours["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    assert_eq!(ids, [json!(1), json!(3)]);
    assert_eq!(ours["streams"][0]["bytes"], json!(sent[0]));
    assert_eq!(ours["streams"][0]["retransmits"], json!(7));
    net.feed_json(0, &server_results(&[1, 3], 1000));
    net.feed(0, &[14]);
    let o = spin(&mut c, &mut net, 200).expect("done");
    assert_eq!(net.take(0), [16], "IPERF_DONE");
    assert!(o.is_ok(), "{:?}", o.error);
    assert!(net.conns.iter().all(|k| k.closed));
    assert_eq!(o.streams[1].id, 3);
    assert_eq!(o.streams[0].sent_bytes(), Some(sent[0] as u64));
    assert_eq!(o.streams[0].received_bytes(), Some(1000));
    assert_eq!(o.streams[0].peer_seconds, Some(2.0));
    assert_eq!(o.sum_received(), 2000);
}

#[test]
fn client_bytes_limit_is_exact() {
    let mut net = FakeSockets::new();
    let mut cfg = client_cfg();
    cfg.bytes = Some(300_000);
    cfg.blksize = 100_000;
    let mut c = client_to_running(&mut net, cfg);
    spin(&mut c, &mut net, 3);
    assert_eq!(net.take(1).len(), 300_000);
    assert_eq!(net.take(0), [4], "TEST_END after -n bytes");
}

#[test]
fn client_reverse_counts_received() {
    let mut net = FakeSockets::new();
    net.read_chunk = 1000;
    let mut cfg = client_cfg();
    cfg.reverse = true;
    let mut c = client_to_running(&mut net, cfg);
    net.feed(1, &[7; 5000]);
    spin(&mut c, &mut net, 2);
    assert!(net.take(1).is_empty(), "the receiver does not write");
    net.now += Duration::from_secs(3);
    net.feed(1, &[7; 100]);
    spin(&mut c, &mut net, 2);
    assert_eq!(net.take(0), [4]);
    net.feed(0, &[13]);
    spin(&mut c, &mut net, 2);
    let ours = split_json(&net.take(0));
    assert_eq!(ours["streams"][0]["bytes"], json!(5100));
    assert_eq!(ours["sender_has_retransmits"], json!(-1));
}

/// Feeds `bytes` after the cookie and returns the client's error.
fn client_error_after(script: &[&[u8]]) -> TestError {
    let mut net = FakeSockets::new();
    let mut c = Client::new(client_cfg());
    spin(&mut c, &mut net, 2);
    for part in script {
        net.feed(0, part);
        if let Some(o) = spin(&mut c, &mut net, 200) {
            assert!(net.conns.iter().all(|k| k.closed), "everything closed");
            return o.error.expect("an error outcome");
        }
    }
    net.conns[0].peer_closed = true;
    let o = spin(&mut c, &mut net, 5).expect("done after EOF");
    o.error.expect("an error outcome")
}

#[test]
fn client_errors_end_the_test() {
    assert_eq!(client_error_after(&[&[0xff]]), TestError::AccessDenied);
    assert_eq!(client_error_after(&[&[11]]), TestError::ServerTerminated);
    assert_eq!(
        client_error_after(&[&[0xfe, 0, 0, 0, 13, 0, 0, 0, 0]]),
        TestError::ServerError {
            i_errno: Some(13),
            errno: Some(0)
        }
    );
    assert!(matches!(
        client_error_after(&[&[0xfe, 0, 0]]),
        TestError::ServerError { i_errno: None, .. }
    ));
    assert!(matches!(
        client_error_after(&[&[77]]),
        TestError::Protocol(_)
    ));
    assert!(matches!(
        client_error_after(&[&[1]]),
        TestError::Protocol(_)
    ));
    assert_eq!(client_error_after(&[&[9]]), TestError::ControlClosed);
}

#[test]
fn client_rejects_hostile_results() {
    for bad in [
        &[0xff, 0xff, 0xff, 0xff][..],
        &[0, 0, 0, 3, b'{', b'x', b'}'],
        &[0, 0, 0, 2, b'[', b']'],
        b"\0\0\0\x02{}",
    ] {
        let mut net = FakeSockets::new();
        let mut c = client_to_running(&mut net, client_cfg());
        net.now += Duration::from_secs(5);
        net.feed(0, &[13]);
        net.feed(0, bad);
        let o = spin(&mut c, &mut net, 100).expect("done");
        assert!(
            matches!(o.error, Some(TestError::Protocol(_))),
            "{bad:?}: {:?}",
            o.error
        );
    }
}

#[test]
fn client_idle_timeout() {
    let mut net = FakeSockets::new();
    let mut c = Client::new(client_cfg());
    let Poll::Pending { wake_at: Some(w) } = c.poll(&mut net) else {
        panic!("pending");
    };
    net.now = w;
    let o = spin(&mut c, &mut net, 2).expect("timed out");
    assert!(matches!(o.error, Some(TestError::Timeout(_))));
}

fn params(extra: Value) -> Value {
    let mut p = json!({"tcp": true, "omit": 0, "time": 2, "num": 0, "blockcount": 0,
        "parallel": 1, "len": 1000, "pacing_timer": 1000, "client_version": "3.12"});
    for (k, v) in extra.as_object().unwrap() {
        p[k] = v.clone();
    }
    p
}

fn server(one_off: bool) -> (FakeSockets, Server<FakeSockets>) {
    let mut net = FakeSockets::new();
    let mut cfg = ServerConfig::new(SERVER.parse().unwrap());
    cfg.one_off = one_off;
    cfg.seed = 1;
    let s = Server::new(cfg, &mut net).unwrap();
    (net, s)
}

fn sspin(s: &mut Server<FakeSockets>, net: &mut FakeSockets, n: usize) -> Option<TestOutcome> {
    for _ in 0..n {
        if let Poll::Done(o) = s.poll(net) {
            return Some(o);
        }
    }
    None
}

const COOKIE: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz234567abcd\0";

/// A server test up to `TEST_RUNNING` with `streams` data connections (conn 0 =
/// control, 1.. = data).
fn server_to_running(extra: Value, streams: usize) -> (FakeSockets, Server<FakeSockets>) {
    let (mut net, mut s) = server(true);
    let ctrl = net.incoming(COOKIE);
    sspin(&mut s, &mut net, COOKIE_SIZE + 2);
    assert_eq!(net.take(ctrl), [9], "PARAM_EXCHANGE after the whole cookie");
    net.feed_json(ctrl, &params(extra));
    sspin(&mut s, &mut net, 300);
    assert_eq!(net.take(ctrl), [10], "CREATE_STREAMS");
    for _ in 0..streams {
        net.incoming(COOKIE);
    }
    sspin(&mut s, &mut net, 40 * streams);
    assert_eq!(net.take(ctrl), [1, 2], "TEST_START, TEST_RUNNING");
    (net, s)
}

#[test]
fn server_full_test_one_byte_reads() {
    let (mut net, mut s) = server_to_running(json!({"parallel": 2}), 2);
    net.read_chunk = 4096;
    net.feed(1, &[0; 10_000]);
    net.feed(2, &[0; 3_000]);
    sspin(&mut s, &mut net, 3);
    net.read_chunk = 1;
    net.feed(0, &[4]);
    net.feed(1, &[0; 5]);
    sspin(&mut s, &mut net, 3);
    assert_eq!(net.take(0), [13], "EXCHANGE_RESULTS");
    assert!(
        net.conns[1].closed && net.conns[2].closed,
        "streams closed at TEST_END"
    );
    net.feed_json(0, &server_results(&[1, 3], 20_000));
    sspin(&mut s, &mut net, 300);
    let out = net.take(0);
    assert_eq!(out.last(), Some(&14), "DISPLAY_RESULTS");
    let ours = split_json(&out[..out.len() - 1]);
    assert_eq!(ours["streams"][0]["bytes"], json!(10_005));
    assert_eq!(ours["streams"][1]["id"], json!(3));
    assert_eq!(ours["sender_has_retransmits"], json!(-1));
    net.feed(0, &[16]);
    let o = sspin(&mut s, &mut net, 3).expect("one-off done");
    assert!(o.is_ok(), "{:?}", o.error);
    assert_eq!(o.sum_received(), 13_005);
    assert_eq!(o.sum_sent(), 40_000);
}

#[test]
fn server_reverse_sends_exactly_num() {
    let (mut net, mut s) =
        server_to_running(json!({"reverse": true, "num": 250_000, "time": 0}), 1);
    sspin(&mut s, &mut net, 3);
    assert_eq!(net.take(1).len(), 250_000);
}

#[test]
fn server_refuses_bad_cookie_and_late_connections() {
    let (mut net, mut s) = server(true);
    let ctrl = net.incoming(COOKIE);
    sspin(&mut s, &mut net, 40);
    net.feed_json(ctrl, &params(json!({})));
    sspin(&mut s, &mut net, 300);
    net.take(ctrl);
    let intruder = net.incoming(b"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\0");
    sspin(&mut s, &mut net, 40);
    assert_eq!(
        net.take(intruder),
        [0xff],
        "ACCESS_DENIED for a wrong cookie"
    );
    assert!(net.conns[intruder].closed);
    net.incoming(COOKIE);
    sspin(&mut s, &mut net, 40);
    assert_eq!(net.take(ctrl), [1, 2]);
    let late = net.incoming(COOKIE);
    sspin(&mut s, &mut net, 2);
    assert_eq!(net.take(late), [0xff], "ACCESS_DENIED while a test runs");
    assert!(s.busy());
}

#[test]
fn server_refuses_unsupported_and_malformed_params() {
    let (mut net, mut s) = server(false);
    let c = net.incoming(COOKIE);
    sspin(&mut s, &mut net, 40);
    net.take(c);
    net.feed_json(c, &params(json!({"udp": true})));
    sspin(&mut s, &mut net, 300);
    assert_eq!(
        net.take(c),
        [0xfe, 0, 0, 0, 13, 0, 0, 0, 0],
        "SERVER_ERROR IEUNIMP"
    );
    assert!(net.conns[c].closed);
    // Malformed JSON and a huge length: the test ends, the server keeps serving.
    for bad in [&b"\0\0\0\x05{nope"[..], &[0x7f, 0xff, 0xff, 0xff]] {
        let c = net.incoming(COOKIE);
        sspin(&mut s, &mut net, 40);
        net.feed(c, bad);
        sspin(&mut s, &mut net, 40);
        assert!(net.conns[c].closed);
    }
    let done = s.take_finished();
    assert_eq!(done.len(), 3);
    assert!(done.iter().all(|o| o.error.is_some()));
    assert!(!s.busy());
}

#[test]
fn server_client_vanishing_mid_test() {
    let (mut net, mut s) = server_to_running(json!({}), 1);
    net.conns[0].peer_closed = true;
    let o = sspin(&mut s, &mut net, 3).expect("done");
    assert_eq!(o.error, Some(TestError::ControlClosed));
    assert!(net.conns.iter().all(|k| k.closed));
}

#[test]
fn server_unexpected_state_and_timer() {
    let (mut net, mut s) = server_to_running(json!({}), 1);
    net.feed(0, &[State::DisplayResults.to_byte()]);
    let o = sspin(&mut s, &mut net, 3).expect("done");
    assert!(matches!(o.error, Some(TestError::Protocol(_))));

    let (mut net, mut s) = server_to_running(json!({}), 1);
    net.now += Duration::from_secs(2 + 40);
    net.feed(1, &[1]);
    let o = sspin(&mut s, &mut net, 3).expect("done");
    assert!(matches!(o.error, Some(TestError::Timeout(_))));
}

/// Polls every `step` until `until` (time moves, as on a real clock).
fn run_until(c: &mut Client<FakeSockets>, net: &mut FakeSockets, step: Duration, until: Duration) {
    while net.now < until {
        net.now += step;
        spin(c, net, 2);
    }
}

#[test]
fn sender_ends_at_the_deadline_with_bytes_in_flight() {
    // iperf3 sends TEST_END when its timer fires: the bytes in flight stay the
    // sender's (the receiver reports what it read), the test does not wait for them.
    let mut net = FakeSockets::new();
    net.unacked = Some(1 << 20);
    let mut c = client_to_running(&mut net, client_cfg());
    let start = net.now;
    net.now = start + Duration::from_secs(2);
    spin(&mut c, &mut net, 2);
    assert_eq!(
        net.take(0),
        [4],
        "TEST_END at -t although data is unacknowledged"
    );
}

#[test]
fn bitrate_paces_each_stream() {
    let mut net = FakeSockets::new();
    let mut cfg = client_cfg();
    cfg.parallel = 2;
    cfg.bandwidth = 8_000_000; // 1 MB/s per stream
    cfg.blksize = 10_000;
    cfg.interval = None;
    let mut c = client_to_running(&mut net, cfg);
    let start = net.now;
    run_until(
        &mut c,
        &mut net,
        Duration::from_millis(10),
        start + Duration::from_secs(1),
    );
    for s in 1..=2 {
        let n = net.take(s).len() as i64;
        // One second at 1 MB/s, give or take the block written at the start.
        assert!((n - 1_000_000).abs() <= 20_000, "stream {s}: {n} bytes");
    }
}

#[test]
fn omit_and_intervals() {
    let mut net = FakeSockets::new();
    let mut cfg = client_cfg();
    cfg.omit = Duration::from_secs(1);
    cfg.interval = Some(Duration::from_millis(500));
    cfg.bandwidth = 8_000_000;
    cfg.blksize = 1000;
    let mut c = client_to_running(&mut net, cfg);
    let start = net.now;
    let step = Duration::from_millis(10);
    run_until(&mut c, &mut net, step, start + Duration::from_millis(2990));
    assert!(net.take(0).is_empty(), "the test runs omit + time = 3 s");
    run_until(&mut c, &mut net, step, start + Duration::from_secs(3));
    assert_eq!(net.take(0), [4], "TEST_END at 3 s");
    let ivs = c.take_intervals();
    let omitted: Vec<bool> = ivs.iter().map(|i| i.omitted).collect();
    assert_eq!(omitted, [true, true, false, false, false, false]);
    let starts: Vec<f64> = ivs
        .iter()
        .map(|i| (i.start * 10.0).round() / 10.0)
        .collect();
    assert_eq!(
        starts,
        [0.0, 0.5, 0.0, 0.5, 1.0, 1.5],
        "counted time restarts"
    );
    for (i, iv) in ivs.iter().enumerate() {
        // 0.5 s at 1 MB/s.
        assert!(iv.bytes().abs_diff(500_000) <= 12_000, "{iv:?}");
        // The connection's 7 retransmits all fall in the first interval.
        let r = if i == 0 { 7 } else { 0 };
        assert_eq!(iv.streams[0].retransmits, Some(r));
    }
    assert!(c.take_intervals().is_empty(), "taken once");
    net.feed(0, &[13]);
    spin(&mut c, &mut net, 3);
    let ours = split_json(&net.take(0));
    let counted: u64 = ivs[2..].iter().map(|i| i.bytes()).sum();
    assert_eq!(
        ours["streams"][0]["bytes"],
        json!(counted),
        "omitted bytes left out"
    );
    let secs = ours["streams"][0]["end_time"].as_f64().unwrap();
    assert!((secs - 2.0).abs() < 0.02, "seconds after omitting: {secs}");
    net.feed_json(0, &server_results(&[1], 1000));
    net.feed(0, &[14]);
    let o = spin(&mut c, &mut net, 200).expect("done");
    let report = crate::json_report(&o);
    let iv = &report["intervals"][0];
    assert_eq!(iv["sum"]["omitted"], json!(true));
    assert_eq!(iv["streams"][0]["socket"], json!(1));
    assert_eq!(iv["streams"][0]["retransmits"], json!(7));
    assert_eq!(
        ours["streams"][0]["retransmits"],
        json!(0),
        "none after omitting"
    );
    assert!(iv["streams"][0]["snd_cwnd"].is_u64());
    assert_eq!(report["intervals"].as_array().unwrap().len(), 6);
    let text = crate::text_interval(&o.intervals[0]);
    assert!(text.starts_with("[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n"));
    assert!(text.trim_end().ends_with("(omitted)"), "{text}");
}
