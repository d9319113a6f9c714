//! A request/response flow of `lowtide net run` with the kernel's TCP, as netperf's
//! TCP_RR and the simulator's request/response flows run it: the client writes
//! `request` bytes, the server answers `response` bytes once it has read the whole
//! request, and the client writes the next request `think` after reading the
//! whole response; one transaction at a time. Both streams are the simulator's
//! ([`RESPONSE_STREAM`]), verified byte for byte; a transaction's latency runs
//! from its request's write to its response's last byte read.

use super::flows::{sample, sleep_until, socket_error, SenderOut, Shared, INFO_EVERY_NS};
use lowtide::SocketError;
use lowtide_sim::network::topology::{RrDef, RESPONSE_STREAM};
use lowtide_sim::payload::{Payload, Verifier};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Whether an I/O error only says the socket's timeout passed.
fn would_block(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Writes `len` bytes of `payload` from `offset` on `s` (its write timeout
/// set), whole unless the run is aborted; `buf` is scratch.
fn write_stream(
    s: &mut TcpStream,
    payload: &Payload,
    (offset, len): (u64, u64),
    buf: &mut [u8],
    sh: &Shared,
) -> Result<(), SocketError> {
    let mut done = 0u64;
    while done < len {
        let n = ((len - done) as usize).min(buf.len());
        payload.fill(offset + done, &mut buf[..n]);
        let mut at = 0;
        while at < n {
            if sh.abort.load(Ordering::Relaxed) {
                return Ok(());
            }
            match s.write(&buf[at..n]) {
                Ok(k) => at += k,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(socket_error(&e)),
            }
        }
        done += n as u64;
    }
    Ok(())
}

/// A request/response client on its connected socket: transactions until
/// `stop_at` (ns) or the run's end, each latency and the responses' check in
/// `out`. `Err` after a socket error (in `out`).
pub fn client(
    s: &mut TcpStream,
    (i, rr): (usize, RrDef),
    (seed, stop_at): (u64, u64),
    sh: &Shared,
    out: &mut SenderOut,
) -> Result<(), ()> {
    let clock = sh.clock;
    let requests = Payload::new(seed, i as u32);
    let responses = Payload::new(seed, i as u32 | RESPONSE_STREAM);
    let mut v = Verifier::new(responses, None);
    let mut buf = vec![0u8; 64 * 1024];
    let mut next_info = 0;
    let _ = s.set_read_timeout(Some(Duration::from_millis(10)));
    let over = |now: u64| {
        now >= stop_at || sh.stop.load(Ordering::Relaxed) || sh.abort.load(Ordering::Relaxed)
    };
    let mut latencies = Vec::new();
    let result = 'run: loop {
        let sent_at = clock.now().as_nanos();
        if over(sent_at) {
            break Ok(());
        }
        let len = rr.request as u64;
        if let Err(e) = write_stream(s, &requests, (out.written, len), &mut buf, sh) {
            break Err(e);
        }
        out.written += len;
        let want = (latencies.len() as u64 + 1) * rr.response as u64;
        while v.received() < want {
            let now = clock.now().as_nanos();
            sample(s, out, now, &mut next_info);
            if over(now) {
                break 'run Ok(());
            }
            match s.read(&mut buf) {
                // The server closed: its side says why.
                Ok(0) => break 'run Ok(()),
                Ok(k) => v.consume(&buf[..k]),
                Err(e) if would_block(&e) => {}
                Err(e) => break 'run Err(socket_error(&e)),
            }
        }
        let done = clock.now().as_nanos();
        latencies.push(done - sent_at);
        let next = done + rr.think_ns;
        loop {
            let now = clock.now().as_nanos();
            sample(s, out, now, &mut next_info);
            if now >= next || over(now) {
                break;
            }
            sleep_until(&clock, next.min(now + INFO_EVERY_NS));
        }
    };
    out.latencies = latencies;
    out.responses = Some(v);
    result.map_err(|e| out.error = Some(e))
}

/// A request/response server's answers on its accepted socket.
pub struct Server {
    rr: RrDef,
    responses: Payload,
    /// Requests answered.
    served: u64,
    buf: Vec<u8>,
}

impl Server {
    /// The server of flow `i` of the run seeded with `seed`.
    pub fn new(seed: u64, i: usize, rr: RrDef) -> Server {
        Server {
            rr,
            responses: Payload::new(seed, i as u32 | RESPONSE_STREAM),
            served: 0,
            buf: vec![0u8; 64 * 1024],
        }
    }

    /// Answers every request read whole (`read`: the request bytes read so far).
    pub fn answer(&mut self, s: &mut TcpStream, read: u64, sh: &Shared) -> Result<(), SocketError> {
        let len = self.rr.response as u64;
        while self.served < read / self.rr.request as u64 {
            let at = (self.served * len, len);
            write_stream(s, &self.responses, at, &mut self.buf, sh)?;
            self.served += 1;
        }
        Ok(())
    }
}
