//! The socket API over several engine shards (`--queues N`): the application runs on
//! the main thread and each shard on its own ([`lowtide_tun::shard`]); a connection
//! is a shard and a handle on that shard's stack.

use super::connect::{connect_failed, ConnectWatch};
use super::sockets::{conn_stats, io_error, Driven};
use lowtide::{EventKind, Shutdown, SocketHandle};
use lowtide_iperf3::{ConnStats, Sockets};
use lowtide_tun::clock::Clock;
use lowtide_tun::runtime::Runtime;
use lowtide_tun::shard::Shards;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// A connection: the shard it lives on and its handle there.
pub type ShardConn = (usize, SocketHandle);

/// [`Sockets`] over the shards of a multi-queue device. Active opens go to the shards
/// in turn (the kernel sends their packets back to the shard that opened them); a
/// listener listens on every shard and accepts from whichever got the connection.
pub struct ShardedSockets {
    /// The running shards.
    pub shards: Shards,
    /// lowtide's address.
    pub local: IpAddr,
    clock: Clock,
    /// The shard the next active open goes to.
    next: usize,
    /// Active opens still in SYN-SENT.
    connects: Vec<(usize, ConnectWatch)>,
    /// Each listener's handle on every shard.
    listeners: Vec<Vec<SocketHandle>>,
    /// The shard the next accept tries first.
    accept_from: usize,
    /// The shards' progress count when the application last looked at its sockets.
    seen: u64,
}

impl ShardedSockets {
    /// Starts a thread per runtime.
    pub fn start(runtimes: Vec<Runtime>, local: IpAddr) -> io::Result<Self> {
        let shards = Shards::start(runtimes)?;
        Ok(ShardedSockets {
            seen: shards.progress(),
            shards,
            local,
            clock: Clock::start(),
            next: 0,
            connects: Vec::new(),
            listeners: Vec::new(),
            accept_from: 0,
        })
    }

    /// Serves every shard until its closed connections have finished their FIN
    /// handshakes (at most `limit`), then stops the threads and gives the runtimes
    /// back.
    pub fn finish(self, limit: Duration) -> io::Result<Vec<Runtime>> {
        finish(self.shards, limit)
    }
}

impl Driven for ShardedSockets {
    fn local(&self) -> IpAddr {
        self.local
    }

    fn syn_retries(&self) -> u8 {
        self.shards
            .peek(0, |rt| rt.stack_ref().config().tcp_syn_retries)
    }

    fn watch_connects(&mut self) -> Result<(), String> {
        let mut failed = None;
        for k in 0..self.shards.len() {
            let connects = &self.connects;
            let msg = self.shards.peek_mut(k, |rt| {
                let mut failed = None;
                while let Some(ev) = rt.stack().poll_event() {
                    if let EventKind::Error(e) = ev.kind {
                        let w = connects
                            .iter()
                            .find(|(s, w)| *s == k && w.handle == ev.socket);
                        if let Some((_, w)) = w {
                            failed.get_or_insert(connect_failed(w.to, e));
                        }
                    }
                }
                failed
            });
            failed = failed.or(msg);
        }
        if let Some(msg) = failed {
            return Err(msg);
        }
        let shards = &self.shards;
        self.connects
            .retain_mut(|(k, w)| shards.peek(*k, |rt| w.check(rt)));
        Ok(())
    }

    fn turn(&mut self, wake_at: Option<Duration>) -> Result<(), String> {
        self.watch_connects()?;
        let limit = Duration::from_millis(100);
        let wait = wake_at.map_or(limit, |w| w.saturating_sub(self.now()).min(limit));
        self.shards.wait(self.seen, wait);
        self.seen = self.shards.progress();
        Ok(())
    }
}

impl Sockets for ShardedSockets {
    type Conn = ShardConn;
    type Listener = usize;

    fn now(&self) -> Duration {
        Duration::from_nanos(self.clock.now().as_nanos())
    }

    fn connect(&mut self, to: SocketAddr) -> io::Result<ShardConn> {
        let k = self.next;
        self.next = (k + 1) % self.shards.len();
        let from = SocketAddr::new(self.local, 0);
        let h = self.shards.with(k, |rt| {
            let now = rt.now();
            rt.stack().connect(now, from, to)
        });
        let h = h.map_err(io_error)?;
        self.connects.push((k, ConnectWatch::new(h, to)));
        Ok((k, h))
    }

    fn listen(&mut self, at: SocketAddr) -> io::Result<usize> {
        let mut handles = Vec::new();
        for k in 0..self.shards.len() {
            let h = self.shards.with(k, |rt| rt.stack().listen(at, 128));
            handles.push(h.map_err(io_error)?);
        }
        self.listeners.push(handles);
        Ok(self.listeners.len() - 1)
    }

    fn accept(&mut self, l: usize) -> io::Result<ShardConn> {
        let n = self.shards.len();
        let handles = self
            .listeners
            .get(l)
            .ok_or_else(|| io_error(lowtide::SocketError::BadHandle))?;
        let mut last = lowtide::SocketError::WouldBlock;
        for i in 0..n {
            let k = (self.accept_from + i) % n;
            match self.shards.with(k, |rt| rt.stack().accept(handles[k])) {
                Ok(h) => {
                    self.accept_from = (k + 1) % n;
                    return Ok((k, h));
                }
                Err(e) => last = e,
            }
        }
        Err(io_error(last))
    }

    fn read(&mut self, (k, c): ShardConn, buf: &mut [u8]) -> io::Result<usize> {
        let r = self.shards.with(k, |rt| {
            let now = rt.now();
            rt.stack().recv(now, c, buf)
        });
        r.map_err(io_error)
    }

    fn write(&mut self, (k, c): ShardConn, buf: &[u8]) -> io::Result<usize> {
        let r = self.shards.with(k, |rt| {
            let now = rt.now();
            rt.stack().send(now, c, buf)
        });
        r.map_err(io_error)
    }

    fn shutdown_write(&mut self, (k, c): ShardConn) -> io::Result<()> {
        let r = self.shards.with(k, |rt| {
            let now = rt.now();
            rt.stack().shutdown(now, c, Shutdown::Write)
        });
        r.map_err(io_error)
    }

    fn close(&mut self, (k, c): ShardConn) {
        self.shards.with(k, |rt| {
            let now = rt.now();
            let _ = rt.stack().close(now, c);
        });
    }

    fn close_listener(&mut self, l: usize) {
        let Some(handles) = self.listeners.get(l) else {
            return;
        };
        for (k, &h) in handles.iter().enumerate() {
            self.shards.with(k, |rt| {
                let now = rt.now();
                let _ = rt.stack().close(now, h);
            });
        }
    }

    fn send_queue_len(&self, (k, c): ShardConn) -> Option<u64> {
        let i = self
            .shards
            .peek(k, |rt| rt.stack_ref().info(rt.now(), c))
            .ok()?;
        // Unacknowledged segments, or bytes not sent yet.
        Some(i.unacked as u64 + i.notsent_bytes)
    }

    fn local_addr(&self, (k, c): ShardConn) -> Option<SocketAddr> {
        let a = self.shards.peek(k, |rt| rt.stack_ref().addresses(c));
        a.ok().map(|(l, _)| l)
    }

    fn peer_addr(&self, (k, c): ShardConn) -> Option<SocketAddr> {
        let a = self.shards.peek(k, |rt| rt.stack_ref().addresses(c));
        a.ok().map(|(_, r)| r)
    }

    fn stats(&self, (k, c): ShardConn) -> ConnStats {
        let info = self.shards.peek(k, |rt| rt.stack_ref().info(rt.now(), c));
        info.map_or_else(|_| ConnStats::default(), |i| conn_stats(&i))
    }
}

/// Lets every shard finish its closed connections' FIN handshakes (at most `limit`),
/// then stops the threads and gives the runtimes back.
pub fn finish(shards: Shards, limit: Duration) -> io::Result<Vec<Runtime>> {
    let until = std::time::Instant::now() + limit;
    while std::time::Instant::now() < until {
        let closing: usize = (0..shards.len())
            .map(|k| shards.peek(k, |rt| rt.stack_ref().closing_count()))
            .sum();
        if closing == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    shards.stop()
}
