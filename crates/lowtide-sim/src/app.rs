//! The applications on the hosts: a sender per flow (bulk, like netperf
//! TCP_STREAM, or a fixed number of bytes) and a receiver per flow that checks every
//! byte it reads.

use crate::payload::{Payload, PayloadMode, Verifier};
use lowtide::{Instant, Shutdown, SocketError, SocketHandle, Stack, TcpInfo};

/// Largest write or read the applications make at once (a 64 KB user buffer).
pub const IO_BUF: usize = 64 * 1024;

/// The sender's bytes of its flow, generated once and reused while the socket takes
/// them piecemeal: one buffer shared by every sender, tagged with what it holds.
pub struct WriteBuf {
    data: Vec<u8>,
    flow: u32,
    offset: u64,
    len: usize,
}

impl Default for WriteBuf {
    fn default() -> Self {
        WriteBuf {
            data: vec![0; IO_BUF],
            flow: u32::MAX,
            offset: 0,
            len: 0,
        }
    }
}

impl WriteBuf {
    /// The bytes of `flow` from `offset`, at most `max` of them (and at least one if
    /// `max > 0`).
    fn get(&mut self, p: &Payload, flow: u32, offset: u64, max: usize) -> &[u8] {
        let (start, end, fill) = self.span(flow, offset, max);
        if fill {
            p.fill(offset, &mut self.data[..self.len]);
        }
        &self.data[start..end]
    }

    /// Where [`WriteBuf::get`]'s bytes lie in the buffer, and whether they must be
    /// generated first; pattern mode takes only the length (`end - start`), so its
    /// writes are the stored mode's, byte for byte in count.
    fn span(&mut self, flow: u32, offset: u64, max: usize) -> (usize, usize, bool) {
        let hit =
            self.flow == flow && offset >= self.offset && offset < self.offset + self.len as u64;
        if !hit {
            self.len = max.min(IO_BUF);
            self.flow = flow;
            self.offset = offset;
        }
        let start = (offset - self.offset) as usize;
        (start, self.len.min(start + max), !hit)
    }
}

/// Where a sender is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendState {
    /// Waiting for the handshake.
    Connecting,
    /// Writing whenever woken.
    Sending,
    /// Everything written and `shutdown(SHUT_WR)` done; waiting for the peer to close.
    ShutDown,
    /// The socket was closed.
    Closed,
}

/// The tcp_info figures a run reports per flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InfoSnapshot {
    /// Segments retransmitted over the connection's life.
    pub retrans_segs: u64,
    /// Smoothed RTT (µs).
    pub rtt_us: u64,
    /// Mean of the RTT samples (µs).
    pub mean_rtt_us: u64,
    /// Smallest RTT sample (µs; 0 if none).
    pub min_rtt_us: u64,
    /// Times TCP Small Queues throttled the socket.
    pub tsq_throttled: u64,
    /// Pacing rate (bytes per second).
    pub pacing_rate: u64,
    /// The congestion control's bandwidth estimate (BBR's `bbr_bw`, bytes per
    /// second; 0 for others).
    pub bbr_bw: u64,
    /// `tcpi_ca_state` at the end ("Open", "Recovery", ...).
    pub ca_state: &'static str,
    /// `TCP_NOTSENT_LOWAT` as getsockopt reports it (0: unset).
    pub notsent_lowat: u32,
    /// Data bytes the peer acknowledged: `tcpi_bytes_acked` less the SYN and the
    /// FIN, which Linux counts too (`tcp_snd_una_update`).
    pub bytes_acked: u64,
    /// `tcpi_snd_cwnd` × `tcpi_snd_mss` (bytes).
    pub snd_cwnd_bytes: u64,
    /// `tcpi_rttvar` (µs).
    pub rttvar_us: u64,
    /// `tcpi_pmtu`.
    pub pmtu: u64,
}

impl InfoSnapshot {
    /// Takes the figures from a `tcp_info` (`notsent_lowat` is not in it: 0) of an
    /// active opener that has written `written` bytes: its FIN can only be
    /// acknowledged after all of them, so the data acknowledged is
    /// `min(bytes_acked - SYN, written)`.
    pub fn from_info(info: &TcpInfo, written: u64) -> InfoSnapshot {
        InfoSnapshot {
            retrans_segs: info.total_retrans as u64,
            rtt_us: info.rtt as u64,
            mean_rtt_us: info.mean_rtt as u64,
            // tcpi_min_rtt is ~0 before the first RTT sample: none.
            min_rtt_us: if info.min_rtt == u32::MAX {
                0
            } else {
                info.min_rtt as u64
            },
            tsq_throttled: info.tsq_throttled,
            pacing_rate: info.pacing_rate,
            bbr_bw: info.bbr_bw,
            ca_state: info.ca_state,
            notsent_lowat: 0,
            bytes_acked: info.bytes_acked.saturating_sub(1).min(written),
            snd_cwnd_bytes: info.snd_cwnd as u64 * info.snd_mss as u64,
            rttvar_us: info.rttvar as u64,
            pmtu: info.pmtu as u64,
        }
    }
}

/// One flow's sending application.
pub struct Sender {
    /// The flow id.
    pub flow: u32,
    /// The connection (None before connect and after close).
    pub handle: Option<SocketHandle>,
    /// Bytes handed to the socket.
    pub written: u64,
    /// Total bytes to send; `None` for a bulk sender that never stops.
    pub limit: Option<u64>,
    /// Life stage.
    pub state: SendState,
    /// Writable events delivered (application wakeups).
    pub wakeups: u64,
    /// The flow started (connect) at this time.
    pub started_at: Instant,
    /// The connection was established at this time.
    pub connected_at: Option<Instant>,
    /// The socket's ephemeral port (0 until connect succeeded).
    pub local_port: u16,
    /// The last tcp_info snapshot.
    pub info: InfoSnapshot,
    /// The first socket error, if any.
    pub error: Option<SocketError>,
    /// `TCP_NOTSENT_LOWAT` still to set, because the socket refused it before the
    /// connection was established.
    pub pending_lowat: Option<u32>,
    /// A probe's allowance: the stream offset it may write up to for now (`None`:
    /// no cap). Reaching it is a pause, not the end of the stream.
    pub allowance: Option<u64>,
    /// Stored bytes or a pattern ([`PayloadMode`]).
    pub mode: PayloadMode,
    payload: Payload,
}

impl Sender {
    /// A sender for `flow` of the run seeded with `seed`.
    pub fn new(seed: u64, flow: u32, limit: Option<u64>) -> Sender {
        Sender {
            flow,
            handle: None,
            written: 0,
            limit,
            state: SendState::Connecting,
            wakeups: 0,
            started_at: Instant::ZERO,
            connected_at: None,
            local_port: 0,
            info: InfoSnapshot::default(),
            error: None,
            pending_lowat: None,
            allowance: None,
            mode: PayloadMode::Stored,
            payload: Payload::new(seed, flow),
        }
    }

    /// The sender with its payload handed over as `mode` says.
    pub fn with_mode(mut self, mode: PayloadMode) -> Sender {
        self.mode = mode;
        self
    }

    /// Sets `TCP_NOTSENT_LOWAT` on the socket; if the socket refuses it now, it is
    /// set again when the connection is established.
    pub fn set_notsent_lowat(&mut self, stack: &mut Stack, now: Instant, bytes: u32) {
        let Some(h) = self.handle else { return };
        self.pending_lowat = match stack.socket(h).set_notsent_lowat(now, bytes) {
            Ok(()) => None,
            Err(_) => Some(bytes),
        };
    }

    /// The connection completed: start writing.
    pub fn on_connected(&mut self, stack: &mut Stack, now: Instant, buf: &mut WriteBuf) {
        self.connected_at.get_or_insert(now);
        if let (Some(bytes), Some(h)) = (self.pending_lowat.take(), self.handle) {
            if let Err(e) = stack.socket(h).set_notsent_lowat(now, bytes) {
                tracing::warn!("flow {}: TCP_NOTSENT_LOWAT refused: {e}", self.flow);
            }
        }
        if self.state == SendState::Connecting {
            self.state = SendState::Sending;
        }
        self.write(stack, now, buf);
    }

    /// Send space opened (`EPOLLOUT`): one wakeup, then write.
    pub fn on_writable(&mut self, stack: &mut Stack, now: Instant, buf: &mut WriteBuf) {
        self.wakeups += 1;
        self.write(stack, now, buf);
    }

    /// Writes until the socket takes less than offered (netperf's loop with a
    /// non-blocking socket: it sleeps until the next `EPOLLOUT`).
    fn write(&mut self, stack: &mut Stack, now: Instant, buf: &mut WriteBuf) {
        let Some(h) = self.handle.filter(|_| self.state == SendState::Sending) else {
            return;
        };
        loop {
            let remaining = self.limit.map_or(u64::MAX, |l| l - self.written);
            if remaining == 0 {
                self.finish_writing(stack, now, h);
                return;
            }
            let allowed = self.allowance.map_or(u64::MAX, |a| a - self.written);
            if allowed == 0 {
                return;
            }
            let remaining = remaining.min(allowed);
            let max = remaining.min(IO_BUF as u64) as usize;
            let (offered, sent) = match self.mode {
                PayloadMode::Stored => {
                    let chunk = buf.get(&self.payload, self.flow, self.written, max);
                    (chunk.len(), stack.send(now, h, chunk))
                }
                PayloadMode::Pattern => {
                    if self.written == 0 {
                        // Before the first write (the socket refuses it later).
                        let source = std::sync::Arc::new(self.payload);
                        let _ = stack.socket(h).set_payload_source(source);
                    }
                    let (start, end, _) = buf.span(self.flow, self.written, max);
                    (end - start, stack.send_pattern(now, h, end - start))
                }
            };
            match sent {
                Ok(n) => {
                    self.written += n as u64;
                    if n < offered {
                        return;
                    }
                }
                Err(SocketError::WouldBlock) => return,
                Err(e) => return self.fail(stack, now, e),
            }
        }
    }

    /// Lets a probe write `bytes` more, and writes them.
    pub fn allow(&mut self, stack: &mut Stack, now: Instant, buf: &mut WriteBuf, bytes: u64) {
        let a = self.allowance.get_or_insert(self.written);
        *a += bytes;
        self.write(stack, now, buf);
    }

    /// Lifts an allowance (an on/off flow's next on period) and writes.
    pub fn resume(&mut self, stack: &mut Stack, now: Instant, buf: &mut WriteBuf) {
        self.allowance = None;
        self.write(stack, now, buf);
    }

    /// Writes nothing more until [`Sender::allow`] or [`Sender::resume`] (an
    /// on/off flow's off period; what the socket holds still goes).
    pub fn pause(&mut self) {
        self.allowance = Some(self.written);
    }

    /// A sender on an accepted socket (a request/response server's replies),
    /// writing only what [`Sender::allow`] lets it.
    pub fn accepted(&mut self, h: SocketHandle, now: Instant) {
        self.handle = Some(h);
        self.state = SendState::Sending;
        self.connected_at = Some(now);
        self.allowance = Some(self.written);
    }

    /// A bulk sender's stop: what it wrote is the whole stream; it shuts down its
    /// write side (at once if it is sending, else when it connects).
    pub fn stop(&mut self, stack: &mut Stack, now: Instant) {
        self.limit = Some(self.written);
        if let (SendState::Sending, Some(h)) = (self.state, self.handle) {
            self.finish_writing(stack, now, h);
        }
    }

    fn finish_writing(&mut self, stack: &mut Stack, now: Instant, h: SocketHandle) {
        self.state = SendState::ShutDown;
        if let Err(e) = stack.shutdown(now, h, Shutdown::Write) {
            self.fail(stack, now, e);
        }
    }

    /// The peer closed its side (or the connection ended): a sender that has
    /// finished writing closes its socket.
    pub fn on_peer_closed(&mut self, stack: &mut Stack, now: Instant) {
        if self.state == SendState::ShutDown {
            self.close(stack, now);
        }
    }

    /// The connection failed.
    pub fn fail(&mut self, stack: &mut Stack, now: Instant, e: SocketError) {
        self.error.get_or_insert(e);
        self.close(stack, now);
    }

    /// The iperf3 interval figures now: from the live socket, or the last snapshot
    /// once it is closed.
    pub fn point(&self, stack: &Stack, now: Instant) -> crate::intervals::SenderPoint {
        let i = match self.handle.map(|h| stack.info(now, h)) {
            Some(Ok(info)) => InfoSnapshot::from_info(&info, self.written),
            _ => self.info,
        };
        crate::intervals::SenderPoint {
            bytes_acked: i.bytes_acked,
            retrans: i.retrans_segs,
            snd_cwnd: i.snd_cwnd_bytes,
            rtt_us: i.rtt_us,
            rttvar_us: i.rttvar_us,
            pmtu: i.pmtu,
        }
    }

    /// Takes a tcp_info snapshot (while the handle is valid).
    pub fn snapshot(&mut self, stack: &Stack, now: Instant) {
        let Some(h) = self.handle else { return };
        if let Ok(info) = stack.info(now, h) {
            self.info = InfoSnapshot::from_info(&info, self.written);
            self.info.notsent_lowat = stack.socket_ref(h).notsent_lowat().unwrap_or(0);
        }
    }

    /// Snapshots tcp_info and closes the socket.
    pub fn close(&mut self, stack: &mut Stack, now: Instant) {
        self.snapshot(stack, now);
        if let Some(h) = self.handle.take() {
            let _ = stack.close(now, h);
        }
        self.state = SendState::Closed;
    }
}

/// One flow's receiving application.
pub struct Receiver {
    /// The accepted connection (None before accept and after close).
    pub handle: Option<SocketHandle>,
    /// Checks the bytes read.
    pub verifier: Verifier,
    /// When the last byte was read.
    pub last_byte_at: Instant,
    /// The first socket error, if any.
    pub error: Option<SocketError>,
    /// The receiver saw the end of stream and closed.
    pub closed: bool,
    /// A connection was accepted for this flow (a later one from the same port is
    /// a stray: see `World::accept_all`).
    pub accepted: bool,
}

impl Receiver {
    /// A receiver for `flow`; `expected` is the transfer size if fixed.
    pub fn new(seed: u64, flow: u32, expected: Option<u64>) -> Receiver {
        Receiver {
            handle: None,
            verifier: Verifier::new(Payload::new(seed, flow), expected),
            last_byte_at: Instant::ZERO,
            error: None,
            closed: false,
            accepted: false,
        }
    }

    /// Reads everything available, checking it; at the end of stream, closes.
    /// Reads are `IO_BUF` bytes at most, as a `recv` into a 64 KB buffer, but the bytes
    /// are checked where they lie in the receive queue ([`Stack::recv_with`]): one
    /// pass over them, no copy.
    pub fn on_readable(&mut self, stack: &mut Stack, now: Instant) {
        let Some(h) = self.handle else { return };
        loop {
            let verifier = &mut self.verifier;
            match stack.recv_with(now, h, IO_BUF, |chunk| verifier.consume(chunk)) {
                Ok(0) => return self.on_eof(stack, now, h),
                Ok(_) => self.last_byte_at = now,
                Err(SocketError::WouldBlock) => return,
                Err(e) => return self.fail(stack, now, e),
            }
        }
    }

    fn on_eof(&mut self, stack: &mut Stack, now: Instant, h: SocketHandle) {
        self.verifier.end_of_stream();
        let _ = stack.close(now, h);
        self.handle = None;
        self.closed = true;
    }

    /// The connection failed.
    pub fn fail(&mut self, stack: &mut Stack, now: Instant, e: SocketError) {
        self.error.get_or_insert(e);
        if let Some(h) = self.handle.take() {
            let _ = stack.close(now, h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_buf_reuses_and_regenerates() {
        let p = Payload::new(1, 2);
        let mut b = WriteBuf::default();
        let first = b.get(&p, 2, 10, 100).to_vec();
        let mut want = vec![0; 100];
        p.fill(10, &mut want);
        assert_eq!(first, want);
        // A later offset inside the generated range is served from it.
        assert_eq!(b.get(&p, 2, 50, 1000), &want[40..]);
        // Another flow regenerates.
        let q = Payload::new(1, 3);
        let mut other = vec![0; 8];
        q.fill(50, &mut other);
        assert_eq!(b.get(&q, 3, 50, 8), &other[..]);
    }
}
