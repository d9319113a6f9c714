//! Interoperability with the real iperf3 (3.12) on loopback, over the kernel's sockets.
//!
//! Skipped (with a message) when `iperf3` is not installed, unless
//! `LOWTIDE_REQUIRE_PRIVILEGED_TESTS` is set, in which case its absence fails.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use lowtide_iperf3::kernel::{run_client, KernelServer};
use lowtide_iperf3::{json_report, text_report, ClientConfig, ServerConfig, TestOutcome};
use serde_json::Value;

/// Generous failure timeout for anything that should take seconds.
const TIMEOUT: Duration = Duration::from_secs(60);

fn have_iperf3() -> bool {
    let ok = Command::new("iperf3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("LOWTIDE_REQUIRE_PRIVILEGED_TESTS").is_none(),
            "iperf3 is not installed and LOWTIDE_REQUIRE_PRIVILEGED_TESTS is set"
        );
        eprintln!("SKIPPED: iperf3 is not installed (apt-get install iperf3 to run this test)");
    }
    ok
}

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A running iperf3 with its stdout collected by a thread.
struct Proc {
    child: Child,
    out: mpsc::Receiver<String>,
}

fn spawn_iperf3(args: &[&str]) -> Proc {
    let mut child = Command::new("iperf3")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn iperf3");
    let mut stdout = child.stdout.take().expect("stdout");
    let (tx, out) = mpsc::channel();
    thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    Proc { child, out }
}

impl Proc {
    /// Waits for exit (killing it after the timeout); returns (success, stdout JSON).
    fn finish(mut self) -> (bool, Value) {
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if t0.elapsed() > TIMEOUT {
                let _ = self.child.kill();
                panic!("iperf3 did not exit within {TIMEOUT:?}");
            }
            thread::sleep(Duration::from_millis(20));
        };
        let text = self.out.recv_timeout(TIMEOUT).expect("iperf3 stdout");
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("iperf3 -J output is not JSON ({e}):\n{text}"));
        (status.success(), json)
    }
}

/// Waits until something listens on 127.0.0.1:port (without connecting to it, which
/// would use up an `iperf3 -s -1`).
fn wait_listening(port: u16) {
    let needle = format!(":{port:04X} 00000000:0000 0A");
    let t0 = Instant::now();
    while t0.elapsed() < TIMEOUT {
        let tcp = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
        if tcp.contains(&needle) {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port}");
}

fn bytes(v: &Value, path: &[&str]) -> u64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?}"))
}

fn client_cfg(port: u16) -> ClientConfig {
    let mut c = ClientConfig::new(addr(port));
    c.duration = Duration::from_secs(2);
    c.idle_timeout = Duration::from_secs(20);
    c
}

/// Our client against `iperf3 -s -1 -J`; returns our outcome and the server's JSON.
fn against_real_server(port: u16, cfg: ClientConfig) -> (TestOutcome, Value) {
    let p = port.to_string();
    let server = spawn_iperf3(&["-s", "-1", "-B", "127.0.0.1", "-p", &p, "-J"]);
    wait_listening(port);
    let outcome = run_client(cfg);
    eprintln!("{}", text_report(&outcome));
    let (ok, json) = server.finish();
    assert!(outcome.is_ok(), "client failed: {:?}", outcome.error);
    assert!(ok, "iperf3 server failed: {json}");
    (outcome, json)
}

/// Checks ours against the real server's own counts, per stream and in sum.
fn check_vs_server(o: &TestOutcome, server: &Value, streams: usize) {
    assert_eq!(o.streams.len(), streams);
    let ids: Vec<u32> = o.streams.iter().map(|s| s.id).collect();
    let expect: Vec<u32> = (0..streams)
        .map(|i| if i == 0 { 1 } else { i as u32 + 2 })
        .collect();
    assert_eq!(ids, expect, "iperf3 stream numbering");
    let reverse = o.params.reverse;
    // The real server reports only its own side (it prints before the exchange).
    let (key, side) = if reverse {
        ("sum_sent", "sender")
    } else {
        ("sum_received", "receiver")
    };
    let server_sum = bytes(server, &["end", key, "bytes"]);
    let ours_view = if reverse {
        o.sum_sent()
    } else {
        o.sum_received()
    };
    assert!(server_sum > 0);
    assert_eq!(server_sum, ours_view, "server's {key} vs its results to us");
    for (i, s) in o.streams.iter().enumerate() {
        let b = bytes(&server["end"]["streams"][i], &[side, "bytes"]);
        assert_eq!(Some(b), s.peer_bytes, "stream {} bytes", s.id);
        assert!(s.local_bytes > 0);
    }
    // The receiver never counts more than the sender sent.
    assert!(o.sum_received() <= o.sum_sent());
    let j = json_report(o);
    assert_eq!(bytes(&j, &["end", "sum_sent", "bytes"]), o.sum_sent());
    assert_eq!(
        bytes(&j, &["end", "sum_received", "bytes"]),
        o.sum_received()
    );
}

#[test]
fn client_to_real_server_time() {
    if !have_iperf3() {
        return;
    }
    let (o, s) = against_real_server(5301, client_cfg(5301));
    check_vs_server(&o, &s, 1);
}

#[test]
fn client_to_real_server_bytes() {
    if !have_iperf3() {
        return;
    }
    let mut cfg = client_cfg(5302);
    cfg.bytes = Some(20 << 20);
    let (o, s) = against_real_server(5302, cfg);
    check_vs_server(&o, &s, 1);
    assert_eq!(o.sum_sent(), 20 << 20);
}

#[test]
fn client_to_real_server_parallel() {
    if !have_iperf3() {
        return;
    }
    let mut cfg = client_cfg(5303);
    cfg.parallel = 4;
    let (o, s) = against_real_server(5303, cfg);
    check_vs_server(&o, &s, 4);
}

#[test]
fn client_to_real_server_reverse() {
    if !have_iperf3() {
        return;
    }
    let mut cfg = client_cfg(5304);
    cfg.reverse = true;
    let (o, s) = against_real_server(5304, cfg);
    check_vs_server(&o, &s, 1);
}

/// `iperf3 -c ... -J args` against our one-off server; returns both sides' views.
fn real_client_against_ours(port: u16, args: &[&str]) -> (TestOutcome, Value) {
    let mut cfg = ServerConfig::new(addr(port));
    cfg.one_off = true;
    cfg.idle_timeout = Duration::from_secs(20);
    let server = KernelServer::bind(cfg).expect("bind");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = server.run(|o| {
            let _ = tx.send(o.clone());
        });
    });
    let p = port.to_string();
    let mut all = vec!["-c", "127.0.0.1", "-p", &p, "-J"];
    all.extend_from_slice(args);
    let (ok, json) = spawn_iperf3(&all).finish();
    let o = rx.recv_timeout(TIMEOUT).expect("our server's outcome");
    eprintln!("{}", text_report(&o));
    assert!(ok, "iperf3 client failed: {json}");
    assert!(o.is_ok(), "server failed: {:?}", o.error);
    (o, json)
}

fn check_vs_client(o: &TestOutcome, client: &Value, streams: usize) {
    assert_eq!(o.streams.len(), streams);
    assert_eq!(
        client["end"]["streams"].as_array().map(Vec::len),
        Some(streams)
    );
    let sent = bytes(client, &["end", "sum_sent", "bytes"]);
    let received = bytes(client, &["end", "sum_received", "bytes"]);
    assert!(sent > 0 && received > 0);
    assert_eq!(sent, o.sum_sent(), "sum_sent");
    assert_eq!(received, o.sum_received(), "sum_received");
    let ours = if o.params.reverse { sent } else { received };
    assert_eq!(ours, o.local_bytes(), "our own count");
}

#[test]
fn real_client_to_server_time() {
    if !have_iperf3() {
        return;
    }
    let (o, c) = real_client_against_ours(5311, &["-t", "2"]);
    check_vs_client(&o, &c, 1);
}

#[test]
fn real_client_to_server_bytes() {
    if !have_iperf3() {
        return;
    }
    let (o, c) = real_client_against_ours(5312, &["-n", "20M"]);
    check_vs_client(&o, &c, 1);
    assert_eq!(o.params.num, 20 << 20);
    assert!(bytes(&c, &["end", "sum_sent", "bytes"]) >= 20 << 20);
}

#[test]
fn real_client_to_server_parallel() {
    if !have_iperf3() {
        return;
    }
    let (o, c) = real_client_against_ours(5313, &["-t", "2", "-P", "4"]);
    check_vs_client(&o, &c, 4);
}

#[test]
fn real_client_to_server_reverse() {
    if !have_iperf3() {
        return;
    }
    let (o, c) = real_client_against_ours(5314, &["-t", "2", "-R"]);
    check_vs_client(&o, &c, 1);
    assert!(o.local_sender());
}

#[test]
fn real_client_reverse_bytes() {
    if !have_iperf3() {
        return;
    }
    let (o, c) = real_client_against_ours(5315, &["-n", "20M", "-R", "-P", "2"]);
    check_vs_client(&o, &c, 2);
    assert_eq!(o.local_bytes(), 20 << 20);
}

fn read_exact(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0; n];
    s.read_exact(&mut b).expect("read");
    b
}

/// A hand-written server that starts a test, takes some data and then closes the
/// control and data connections mid-test.
fn rude_server(l: TcpListener) {
    let (mut ctrl, _) = l.accept().expect("accept");
    let cookie = read_exact(&mut ctrl, 37);
    ctrl.write_all(&[9]).expect("PARAM_EXCHANGE");
    let len = u32::from_be_bytes(read_exact(&mut ctrl, 4).try_into().expect("4"));
    let _params = read_exact(&mut ctrl, len as usize);
    ctrl.write_all(&[10]).expect("CREATE_STREAMS");
    let (mut data, _) = l.accept().expect("accept data");
    assert_eq!(read_exact(&mut data, 37), cookie);
    ctrl.write_all(&[1, 2]).expect("TEST_START, TEST_RUNNING");
    let _ = read_exact(&mut data, 100_000);
    drop(ctrl);
    drop(data);
}

#[test]
fn server_closing_mid_test_is_an_error() {
    let l = TcpListener::bind(addr(5321)).expect("bind");
    let t = thread::spawn(move || rude_server(l));
    let mut cfg = client_cfg(5321);
    cfg.duration = Duration::from_secs(30);
    let o = run_client(cfg);
    t.join().expect("rude server");
    assert!(o.error.is_some(), "expected an error outcome");
    eprintln!("{}", text_report(&o));
    assert!(json_report(&o)["error"].is_string());
}

#[test]
fn refused_connection_is_an_error() {
    // Nothing listens on this port.
    let o = run_client(client_cfg(5322));
    assert!(o.error.is_some());
}
