//! The data streams: blocks of `len` bytes from a buffer filled once with
//! pseudo-random bytes, or reads that only count.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::interval::IntervalResults;
use crate::outcome::StreamOutcome;
use crate::protocol::{Rng, StreamResult};
use crate::sockets::{ConnStats, Sockets};

/// Most bytes moved per stream per `poll`, so that one call never runs unbounded.
pub(crate) const BUDGET_PER_STREAM: u64 = 4 << 20;

/// One data connection of a running test.
#[derive(Debug)]
pub(crate) struct Stream<C> {
    pub conn: C,
    pub id: u32,
    /// Bytes this side sent or received on the stream.
    pub bytes: u64,
    /// The peer closed its side (receiver) or the connection was closed by us.
    pub done: bool,
    /// Statistics at the end of the test.
    pub stats: ConnStats,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    /// `bytes` when the omitted period ended (`bytes_sent_omit`; received bytes
    /// are reset instead, but one mark serves both).
    pub omit_bytes: u64,
    /// `bytes` at the end of the last interval.
    mark_bytes: u64,
    /// Total retransmits at the end of the last interval.
    mark_retrans: u64,
    /// Total retransmits when the omitted period ended (`stream_prev_total_retrans`).
    base_retrans: u64,
    /// Offset into the payload buffer where the next write starts.
    pos: usize,
    /// The connection has been closed (the handle is invalid).
    closed: bool,
}

impl<C> Stream<C> {
    /// Bytes counted in the results: those after the omitted period.
    pub(crate) fn counted(&self) -> u64 {
        self.bytes - self.omit_bytes
    }

    /// Retransmits after the omitted period (`stream_retrans`).
    fn retransmits(&self) -> u64 {
        self.stats.retransmits.saturating_sub(self.base_retrans)
    }
}

impl<C: Copy> Stream<C> {
    pub(crate) fn new<N: Sockets<Conn = C>>(net: &N, conn: C, id: u32) -> Self {
        Stream {
            conn,
            id,
            bytes: 0,
            done: false,
            stats: ConnStats::default(),
            local: net.local_addr(conn),
            peer: net.peer_addr(conn),
            omit_bytes: 0,
            mark_bytes: 0,
            mark_retrans: 0,
            base_retrans: 0,
            pos: 0,
            closed: false,
        }
    }
}

/// What one pump moved.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pumped {
    pub moved: u64,
    /// Some stream stopped at its budget, not at `WouldBlock`: poll again at once.
    pub more: bool,
    /// A stream held back by `-b` may write again at this time.
    pub next_send: Option<Duration>,
}

/// The data side of a test: all streams, sending or receiving.
#[derive(Debug)]
pub(crate) struct Transfer<C> {
    pub streams: Vec<Stream<C>>,
    /// This side sends (else it receives).
    pub sending: bool,
    /// Stop sending after this many bytes in total (`-n`).
    pub limit: Option<u64>,
    /// Bytes moved on all streams.
    pub total: u64,
    /// `total` when the omitted period ended (`-n` counts from there, as iperf3's
    /// `iperf_reset_stats` zeroes `bytes_sent`).
    omit_total: u64,
    /// `-b`: each stream's target rate in bits/s (0 = unlimited).
    pub rate: u64,
    /// When the streams started (`start_time_fixed`, the pacing reference).
    pub started: Option<Duration>,
    payload: Vec<u8>,
    scratch: Vec<u8>,
}

impl<C: Copy + core::fmt::Debug> Transfer<C> {
    pub(crate) fn new(sending: bool, blksize: usize, limit: Option<u64>, seed: u64) -> Self {
        let payload = if sending {
            Rng::new(seed).bytes(blksize.max(1))
        } else {
            Vec::new()
        };
        let scratch = if sending {
            Vec::new()
        } else {
            vec![0; blksize.clamp(1, 1 << 20)]
        };
        Transfer {
            streams: Vec::new(),
            sending,
            limit,
            total: 0,
            omit_total: 0,
            rate: 0,
            started: None,
            payload,
            scratch,
        }
    }

    /// The `-n` limit has been reached.
    pub(crate) fn limit_reached(&self) -> bool {
        self.limit
            .is_some_and(|l| self.total - self.omit_total >= l)
    }

    /// Moves data on every stream until `WouldBlock`, the per-stream budget, or the
    /// `-b` rate.
    pub(crate) fn pump<N: Sockets<Conn = C>>(
        &mut self,
        net: &mut N,
        now: Duration,
    ) -> io::Result<Pumped> {
        let mut out = Pumped::default();
        for i in 0..self.streams.len() {
            let (moved, more) = if self.sending {
                let (moved, more, next) = self.send_one(net, i, now)?;
                out.next_send = match (out.next_send, next) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                (moved, more)
            } else {
                self.recv_one(net, i)?
            };
            out.moved += moved;
            out.more |= more;
        }
        Ok(out)
    }

    /// `iperf_check_throttle`: a stream may write while its average rate since the
    /// start (`bytes_sent * 8 / seconds`) is below `-b`; else, when it may again.
    fn throttled(&self, bytes: u64, now: Duration) -> Option<Duration> {
        let start = self.started.filter(|_| self.rate > 0)?;
        let due = start + Duration::from_secs_f64(bytes as f64 * 8.0 / self.rate as f64);
        (due > now).then_some(due)
    }

    fn send_one<N: Sockets<Conn = C>>(
        &mut self,
        net: &mut N,
        i: usize,
        now: Duration,
    ) -> io::Result<(u64, bool, Option<Duration>)> {
        let mut moved = 0;
        while moved < BUDGET_PER_STREAM && !self.streams[i].done {
            if let Some(due) = self.throttled(self.streams[i].bytes, now) {
                return Ok((moved, false, Some(due)));
            }
            let s = &mut self.streams[i];
            let mut end = self.payload.len();
            if let Some(l) = self.limit {
                let left = l.saturating_sub(self.total - self.omit_total);
                if left == 0 {
                    return Ok((moved, false, None));
                }
                end = end.min(s.pos + left.min(usize::MAX as u64) as usize);
            }
            match net.write(s.conn, &self.payload[s.pos..end]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    s.pos = (s.pos + n) % self.payload.len();
                    s.bytes += n as u64;
                    self.total += n as u64;
                    moved += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((moved, false, None)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok((moved, !self.streams[i].done, None))
    }

    fn recv_one<N: Sockets<Conn = C>>(&mut self, net: &mut N, i: usize) -> io::Result<(u64, bool)> {
        let mut moved = 0;
        let s = &mut self.streams[i];
        while moved < BUDGET_PER_STREAM && !s.done {
            match net.read(s.conn, &mut self.scratch) {
                Ok(0) => s.done = true,
                Ok(n) => {
                    s.bytes += n as u64;
                    self.total += n as u64;
                    moved += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((moved, false)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok((moved, !s.done))
    }

    /// Snapshots every stream's statistics (before closing).
    pub(crate) fn capture_stats<N: Sockets<Conn = C>>(&mut self, net: &N) {
        for s in self.streams.iter_mut().filter(|s| !s.closed) {
            s.stats = net.stats(s.conn);
        }
    }

    /// `iperf_reset_stats`, at the end of the omitted period: counts start again
    /// from here (bytes, retransmits, `-n`).
    pub(crate) fn reset_stats<N: Sockets<Conn = C>>(&mut self, net: &N) {
        self.omit_total = self.total;
        for s in self.streams.iter_mut().filter(|s| !s.closed) {
            let retrans = net.stats(s.conn).retransmits;
            (s.omit_bytes, s.mark_bytes) = (s.bytes, s.bytes);
            (s.base_retrans, s.mark_retrans) = (retrans, retrans);
        }
    }

    /// `iperf_stats_callback`: every stream's bytes and retransmits since the last
    /// interval, and its connection's statistics now.
    pub(crate) fn sample<N: Sockets<Conn = C>>(&mut self, net: &N) -> Vec<IntervalResults> {
        let sending = self.sending;
        self.streams
            .iter_mut()
            .map(|s| {
                if !s.closed {
                    s.stats = net.stats(s.conn);
                }
                let retrans = s.stats.retransmits.max(s.mark_retrans);
                let iv = IntervalResults {
                    id: s.id,
                    bytes: s.bytes - s.mark_bytes,
                    retransmits: sending.then_some(retrans - s.mark_retrans),
                    stats: s.stats,
                };
                (s.mark_bytes, s.mark_retrans) = (s.bytes, retrans);
                iv
            })
            .collect()
    }

    /// Closes every stream's connection (the counts stay).
    pub(crate) fn close_all<N: Sockets<Conn = C>>(&mut self, net: &mut N) {
        for s in &mut self.streams {
            if !s.closed {
                net.close(s.conn);
                s.closed = true;
                s.done = true;
            }
        }
    }

    /// Our results for the exchange (`send_results`): bytes and retransmits per stream.
    pub(crate) fn results(&self, seconds: f64) -> Vec<StreamResult> {
        self.streams
            .iter()
            .map(|s| StreamResult {
                id: s.id,
                bytes: s.counted(),
                retransmits: if self.sending {
                    s.retransmits() as i64
                } else {
                    -1
                },
                jitter: 0.0,
                errors: 0,
                packets: 0,
                start_time: 0.0,
                end_time: Some(seconds),
            })
            .collect()
    }

    /// Per-stream outcomes, joined with the peer's results by stream id.
    pub(crate) fn outcomes(&self, seconds: f64, peer: &[StreamResult]) -> Vec<StreamOutcome> {
        self.streams
            .iter()
            .map(|s| {
                let p = peer.iter().find(|p| p.id == s.id);
                let retransmits = if self.sending {
                    Some(s.retransmits())
                } else {
                    p.and_then(|p| u64::try_from(p.retransmits).ok())
                };
                StreamOutcome {
                    id: s.id,
                    local_sender: self.sending,
                    local_bytes: s.counted(),
                    local_seconds: seconds,
                    peer_bytes: p.map(|p| p.bytes),
                    peer_seconds: p.and_then(|p| p.end_time.map(|e| e - p.start_time)),
                    retransmits,
                    stats: s.stats,
                    local_addr: s.local,
                    peer_addr: s.peer,
                }
            })
            .collect()
    }
}

/// `to - from` in seconds (0 when `to` is earlier).
pub(crate) fn secs_between(from: Duration, to: Duration) -> f64 {
    to.saturating_sub(from).as_secs_f64()
}
