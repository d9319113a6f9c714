//! Harness of the real-path tests: a network namespace per test, the `lowtide` binary
//! started inside it (it creates its TUN device there), and kernel socket programs
//! run as threads inside the same namespace. Everything is removed on drop, also when
//! a test fails. Tests that need root call `lowtide_tun::netns::privileged` first.

#![allow(dead_code)]

use lowtide_tun::netns::{self, NetNs};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The kernel's side of the TUN device.
pub const KERNEL: &str = "10.7.0.1";
/// lowtide's address (the default, the next one after --tun-addr).
pub const LOWTIDE: &str = "10.7.0.2";

/// A test's namespace; deleted on drop.
pub struct Env {
    pub ns: NetNs,
}

impl Env {
    pub fn new(prefix: &str) -> Env {
        let ns = NetNs::create(&netns::unique_name(prefix)).expect("create netns");
        let up = ns.command("ip").args(["link", "set", "lo", "up"]).status();
        assert!(up.expect("ip link set lo up").success());
        Env { ns }
    }

    /// Starts `lowtide ARGS` inside the namespace.
    pub fn lowtide(&self, args: &[&str]) -> ChildGuard {
        self.spawn(env!("CARGO_BIN_EXE_lowtide"), args)
    }

    /// Starts `program ARGS` inside the namespace.
    pub fn spawn(&self, program: &str, args: &[&str]) -> ChildGuard {
        let child = self
            .ns
            .command(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
        ChildGuard(Some(child))
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn kernel<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> JoinHandle<T> {
        self.ns.spawn(f).expect("thread in netns")
    }
}

/// A child process killed on drop.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    /// Guards a child started elsewhere.
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard(Some(child))
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().expect("child").id()
    }

    /// Waits for the exit (killing the process after `limit`) and returns its output.
    pub fn wait(mut self, limit: Duration) -> Output {
        let mut child = self.0.take().expect("child");
        let start = Instant::now();
        while child.try_wait().expect("try_wait").is_none() {
            if start.elapsed() > limit {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().expect("output")
    }

    /// Waits (up to `limit`) for the first line the program writes to stderr, which
    /// must say it is ready (`transfer --listen` and `link` do, for scripts); the
    /// rest of stderr stays for [`ChildGuard::wait`].
    pub fn ready(&mut self, limit: Duration) -> String {
        use std::io::Read;
        let child = self.0.as_mut().expect("child");
        let mut err = child.stderr.take().expect("stderr piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while err.read(&mut b).unwrap_or(0) == 1 && b[0] != b'\n' {
                line.push(b[0]);
            }
            let _ = tx.send((String::from_utf8_lossy(&line).into_owned(), err));
        });
        let (line, err) = rx.recv_timeout(limit).expect("no line on stderr");
        child.stderr = Some(err);
        assert!(line.contains(": ready: "), "not a ready line: {line}");
        line
    }

    /// Sends SIGTERM, then waits as [`ChildGuard::wait`].
    pub fn terminate(self, limit: Duration) -> Output {
        if let Some(c) = &self.0 {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        self.wait(limit)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Deterministic test bytes (xorshift64*).
pub fn stream(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Connects to `to`, retrying while lowtide is still starting (up to 10 s).
pub fn connect_retry(to: SocketAddr) -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect_timeout(&to, Duration::from_secs(2)) {
            Ok(s) => return s,
            Err(e) if start.elapsed() > Duration::from_secs(10) => panic!("connect {to}: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Kernel client: sends `data` to `to`, half-closes, waits for the peer's close.
pub fn kernel_send(to: SocketAddr, data: Vec<u8>) -> usize {
    let mut s = connect_retry(to);
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(&data).expect("kernel write");
    s.shutdown(Shutdown::Write).expect("shutdown");
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    data.len()
}

/// Kernel server on `port`: accepts one connection, reads it to the end; returns the
/// byte count and SHA-256.
pub fn kernel_recv(listener: TcpListener) -> (u64, String) {
    let (s, _) = listener.accept().expect("accept");
    read_hashed(s)
}

/// Reads `s` to the end; returns the byte count and SHA-256.
pub fn read_hashed(mut s: TcpStream) -> (u64, String) {
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut h = Sha256::new();
    let mut n = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => {
                h.update(&buf[..k]);
                n += k as u64;
            }
            Err(e) => panic!("kernel read: {e}"),
        }
    }
    (n, hex(&h.finalize()))
}

/// Lowercase hex of `b` (a SHA-256 as `sha256sum` prints it).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A legitimate sender beside an attack: writes `stream(1 MB, 27)` over and over until
/// `stop` is set and at least 8 MB went, then closes and reads to the end; the bytes
/// written and their SHA-256 (for [`kernel_recv`]'s to match).
pub fn write_hashed_until(s: TcpStream, stop: &std::sync::atomic::AtomicBool) -> (u64, String) {
    write_hashed_paced(s, stop, None)
}

/// [`write_hashed_until`] at `rate` bytes per second (in 64 kB writes), or as fast as
/// the socket takes them if `None`.
pub fn write_hashed_paced(
    mut s: TcpStream,
    stop: &std::sync::atomic::AtomicBool,
    rate: Option<u64>,
) -> (u64, String) {
    let chunk = stream(1 << 20, 27);
    let (mut h, mut n, start) = (Sha256::new(), 0u64, Instant::now());
    while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 8 << 20 {
        for piece in chunk.chunks(64 << 10) {
            if let Some(rate) = rate {
                let due = Duration::from_secs_f64(n as f64 / rate as f64);
                std::thread::sleep(due.saturating_sub(start.elapsed()));
            }
            s.write_all(piece).expect("kernel write");
            h.update(piece);
            n += piece.len() as u64;
        }
    }
    s.shutdown(Shutdown::Write).expect("shutdown");
    let _ = s.read_to_end(&mut Vec::new());
    (n, hex(&h.finalize()))
}

/// Runs `ip ARGS` in `ns`, which must succeed.
pub fn ip(ns: &NetNs, args: &[&str]) {
    let ok = ns.command("ip").args(args).status().expect("run ip");
    assert!(ok.success(), "ip {args:?} in {}", ns.name());
}

/// What `program ARGS` printed, run in `ns`.
pub fn ns_output(ns: &NetNs, program: &str, args: &[&str]) -> String {
    let out = ns.command(program).args(args).output().expect(program);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The victim of the attack tests: `lowtide transfer --listen 7000 --recv` on TUN
/// `lt0` with a 1 MB receive buffer (`tcp_rmem` `4096 1048576 6291456`, as the kernel
/// victims), ready to accept, giving up after `timeout`; `extra` are more flags
/// (`--hold`).
/// A device's `tx_dropped` in `ns` (for TUN: packets its reader never took).
pub fn tx_dropped(ns: &NetNs, dev: &str) -> u64 {
    let j = ns_output(ns, "ip", &["-j", "-s", "link", "show", "dev", dev]);
    let v: serde_json::Value = serde_json::from_str(&j).expect("ip -j");
    v[0]["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0)
}

pub fn lowtide_victim(env: &Env, timeout: &str, extra: &[&str]) -> ChildGuard {
    let mut args = vec![
        "transfer",
        "--listen",
        "7000",
        "--recv",
        "--timeout",
        timeout,
        "--json",
        "--tun",
        "lt0",
        "--tun-addr",
        "10.7.0.1/24",
        "--sysctl",
        "net.ipv4.tcp_rmem=4096 1048576 6291456",
    ];
    args.extend_from_slice(extra);
    let mut lt = env.lowtide(&args);
    lt.ready(Duration::from_secs(10));
    lt
}

/// The legitimate client beside an attack on `to`: [`write_hashed_paced`] at `rate`
/// until `stop`.
pub fn legit_client(
    to: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    rate: Option<u64>,
) -> (u64, String) {
    let s = connect_retry(to);
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write_hashed_paced(s, &stop, rate)
}

/// A process's `VmRSS` or `VmHWM` (kB) from /proc/PID/status.
pub fn status_kb(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| {
            v.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// The JSON lowtide printed.
pub fn json_of(out: &Output) -> serde_json::Value {
    let text = String::from_utf8_lossy(&out.stdout);
    // iperf3 may print a warning line before its JSON.
    let json = text.find('{').map_or(&text[..], |i| &text[i..]);
    serde_json::from_str(json).unwrap_or_else(|e| {
        panic!(
            "lowtide printed no JSON ({e}); status {:?}\nstdout: {text}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A kernel listener in `env`'s namespace on `port`, listening when this returns;
/// the thread runs `serve` on it.
pub fn kernel_listen<T: Send + 'static>(
    env: &Env,
    port: u16,
    serve: impl FnOnce(TcpListener) -> T + Send + 'static,
) -> JoinHandle<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    let h = env.kernel(move || {
        let l = TcpListener::bind(("0.0.0.0", port)).expect("bind");
        tx.send(()).expect("signal");
        serve(l)
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("kernel server listening");
    h
}

/// A kernel server on `port` that yields [`kernel_recv`]'s result.
pub fn kernel_server(env: &Env, port: u16) -> JoinHandle<(u64, String)> {
    kernel_listen(env, port, kernel_recv)
}
