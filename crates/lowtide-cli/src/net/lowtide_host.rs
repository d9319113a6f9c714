//! The lowtide hosts of `lowtide net run` (`stack = "lowtide"` in a host's table):
//! each a lowtide [`Stack`] in this process, attached straight to its port of the
//! emulated network ([`Fabric::send`], and what the fabric delivers to it), driven
//! by the run's clock in real time beside the kernel's hosts. No namespace or TUN
//! device: the fabric is the wire, and the host's egress queue is the one the file
//! gives its link, as for a kernel host (its packets are handed over at once: TX
//! completion when the fabric takes them, so TCP Small Queues sees no queue).
//!
//! Its flows run the simulator's applications ([`Sender`], [`Receiver`]) on the
//! same streams as the kernel's threads ([`super::flows`]): a sender connects to
//! the receiving host's `BASE_PORT + i` (a kernel thread or another lowtide host
//! listening there), a receiver listens on its own and verifies every byte; probes,
//! request/response and on/off flows as the kernel's threads run them. Their
//! outcomes are the kernel threads' ([`SenderOut`], [`ReceiverOut`]: `tcp_info`
//! sampled every 10 ms the same way), so one report takes both.

use super::flows::{addr_of, off_period, SenderOut, Shared, BASE_PORT, INFO_EVERY_NS};
use lowtide::{EventKind, Instant, RxChecksum, SocketEvent, SocketHandle, Stack};
use lowtide_sim::app::{Receiver, SendState, Sender, WriteBuf, IO_BUF};
use lowtide_sim::network::fabric::Fabric;
use lowtide_sim::network::topology::{FlowDef, NodeKind, Topology, RESPONSE_STREAM};
use lowtide_sim::network::GridRecorder;
use lowtide_sim::payload::{Payload, Verifier};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// What a socket of a lowtide host is for.
#[derive(Debug, Clone, Copy)]
enum Role {
    /// Flow `0`'s sender (or request/response client).
    Sender(usize),
    /// Flow `0`'s listener.
    Listener(usize),
    /// Flow `0`'s receiver (or request/response server).
    Receiver(usize),
}

/// One lowtide host.
struct Host {
    stack: Stack,
    roles: HashMap<SocketHandle, Role>,
}

/// A request/response client's transactions.
struct RrClient {
    responses: Verifier,
    /// When the outstanding request was written (ns), while one is.
    sent_at: Option<u64>,
    /// When the next request goes (ns).
    next_at: u64,
}

/// A flow's sending side on a lowtide host.
struct LtSender {
    app: Sender,
    out: SenderOut,
    started: bool,
    stopped: bool,
    ended: bool,
    next_info: u64,
    next_probe: u64,
    rr: Option<RrClient>,
}

/// A flow's receiving side on a lowtide host.
struct LtReceiver {
    app: Receiver,
    listener: Option<SocketHandle>,
    probe_reads: Vec<u64>,
    /// A request/response server's replies and the requests it answered.
    server: Option<(Sender, u64)>,
    ended: bool,
    /// Bytes read, on the run's series grid.
    read: GridRecorder,
}

/// Every lowtide host of a run and the sides of flows they hold.
pub struct LowtideHosts {
    /// By node index; `None` for a kernel host.
    hosts: Vec<Option<Host>>,
    senders: Vec<Option<LtSender>>,
    receivers: Vec<Option<LtReceiver>>,
    wbuf: WriteBuf,
}

impl LowtideHosts {
    /// The hosts `lowtide[h]` says run lowtide, each with the stack its file
    /// configures, listening for the flows it receives.
    pub fn new(t: &Topology, lowtide: &[bool]) -> Result<LowtideHosts, String> {
        let mut hosts = Vec::new();
        for (i, node) in t.nodes.iter().enumerate() {
            let NodeKind::Host { config, addr } = &node.kind else {
                continue;
            };
            if !lowtide.get(i).copied().unwrap_or(false) {
                hosts.push(None);
                continue;
            }
            let mut cfg = (**config).clone();
            // The fabric's qdiscs take no departure times: TCP paces itself.
            cfg.device_fq = Some(false);
            let seed = t.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (1 + i as u64);
            let mut stack = Stack::new(cfg, seed);
            stack.add_address(*addr);
            hosts.push(Some(Host {
                stack,
                roles: HashMap::new(),
            }));
        }
        let mut lt = LowtideHosts {
            senders: (t.flows.iter().enumerate())
                .map(|(i, def)| is_lt(&hosts, def.from).then(|| sender(t, i, def)))
                .collect(),
            receivers: Vec::new(),
            hosts,
            wbuf: WriteBuf::default(),
        };
        for (i, def) in t.flows.iter().enumerate() {
            let r = match is_lt(&lt.hosts, def.to) {
                true => Some(lt.listen(t, i, def)?),
                false => None,
            };
            lt.receivers.push(r);
        }
        Ok(lt)
    }

    /// Flow `i`'s receiver: listening on `BASE_PORT + i`.
    fn listen(&mut self, t: &Topology, i: usize, def: &FlowDef) -> Result<LtReceiver, String> {
        let at = SocketAddr::new(addr_of(t, def.to), BASE_PORT + i as u16);
        let h = self.hosts[def.to].as_mut().expect("a lowtide host");
        let l = (h.stack.listen(at, 128))
            .map_err(|e| format!("flow {}: listen on {at}: {e}", def.name))?;
        h.roles.insert(l, Role::Listener(i));
        Ok(LtReceiver {
            app: Receiver::new(t.seed, i as u32, def.bytes),
            listener: Some(l),
            probe_reads: Vec::new(),
            read: grid_recorder(t, Some(0)),
            server: def.rr.map(|_| {
                let id = i as u32 | RESPONSE_STREAM;
                (Sender::new(t.seed, id, None), 0)
            }),
            ended: false,
        })
    }

    /// A packet the fabric delivered to host `h` at `now` (ns).
    pub fn deliver(&mut self, now: u64, h: usize, packet: &[u8]) {
        if let Some(Some(host)) = self.hosts.get_mut(h) {
            host.stack
                .handle_packet(Instant(now), packet, RxChecksum::Verify);
        }
    }

    /// Runs everything due at `now` (ns): the flows' starts, stops, probes,
    /// requests and on/off turns, the stacks' timers, their events to the
    /// applications and their packets into `fabric`, until all are quiet.
    pub fn run(&mut self, t: &Topology, now: u64, fabric: &mut Fabric, sh: &Shared) {
        for i in 0..t.flows.len() {
            self.tick(t, i, now, sh);
        }
        for h in 0..self.hosts.len() {
            if let Some(host) = self.hosts[h].as_mut() {
                host.stack.handle_timeout(Instant(now));
                self.service(t, h, now, fabric);
            }
        }
        self.count_ended(sh);
        for (i, r) in self.receivers.iter().enumerate() {
            if let Some(r) = r {
                sh.read[i].store(r.app.verifier.received(), Ordering::Relaxed);
            }
        }
    }

    /// When something is next due on a lowtide host (ns), if anything is.
    pub fn next_deadline(&mut self, t: &Topology, now: u64) -> Option<u64> {
        let timers = (self.hosts.iter_mut().flatten())
            .filter_map(|h| h.stack.poll_timeout())
            .map(|i| i.as_nanos());
        let apps = (self.senders.iter().zip(&t.flows))
            .filter_map(|(s, def)| Some((s.as_ref()?, def)))
            .filter(|(s, _)| !s.ended)
            .filter_map(|(s, def)| next_app_event(s, def, now));
        timers.chain(apps).min()
    }

    /// Flow `i`'s sending application at `now`: what is due by the clock.
    fn tick(&mut self, t: &Topology, i: usize, now: u64, sh: &Shared) {
        let def = &t.flows[i];
        let Some(s) = self.senders[i].as_mut() else {
            return;
        };
        let Some(host) = self.hosts[def.from].as_mut() else {
            return;
        };
        let (stack, at, buf) = (&mut host.stack, Instant(now), &mut self.wbuf);
        if !s.started {
            if now < def.start_ns {
                return;
            }
            s.started = true;
            connect(t, i, def, host, at, s);
            return;
        }
        sample(stack, s, now);
        let over = now >= def.stop_ns.unwrap_or(t.duration_ns) || sh.stop.load(Ordering::Relaxed);
        if def.bytes.is_none() && over && !s.stopped {
            s.stopped = true;
            s.app.stop(stack, at);
            return;
        }
        if s.app.state != SendState::Sending || s.stopped {
            return;
        }
        if let Some((size, interval)) = def.probe {
            while now >= s.next_probe {
                s.out.probe_writes.push(now);
                s.next_probe += interval;
                s.app.allow(stack, at, buf, size as u64);
            }
        }
        if let (Some(rr), Some(c)) = (def.rr, s.rr.as_mut()) {
            if c.sent_at.is_none() && now >= c.next_at {
                c.sent_at = Some(now);
                s.app.allow(stack, at, buf, rr.request as u64);
            }
        }
        if def.onoff.is_some() {
            match (off_period(def, now), s.app.allowance.is_some()) {
                (Some(_), false) => s.app.pause(),
                (None, true) => s.app.resume(stack, at, buf),
                _ => {}
            }
        }
    }

    /// Host `h`'s events to its applications and its packets into `fabric`, until
    /// both are quiet.
    fn service(&mut self, t: &Topology, h: usize, now: u64, fabric: &mut Fabric) {
        loop {
            let mut busy = false;
            while let Some(ev) = self.host(h).stack.poll_event() {
                busy = true;
                self.dispatch(t, h, now, ev);
            }
            let stack = &mut self.host(h).stack;
            while let Some(mut tx) = stack.poll_transmit(Instant(now)) {
                busy = true;
                tx.flatten();
                let gso = if tx.gso_segs > 1 { tx.gso_size } else { 0 };
                let gso = lowtide_wire::gso::Gso {
                    size: gso,
                    tcp_accecn: tx.tcp_accecn,
                };
                let sent = lowtide_wire::gso::segment(&tx.packet, gso, |s| fabric.send(now, h, s));
                if sent.is_err() {
                    eprintln!("lowtide: net run: an unsegmentable packet from host {h}: dropped");
                }
                stack.handle_tx_complete(Instant(now), tx.token);
                stack.recycle_buffer(tx.packet);
            }
            if !busy {
                return;
            }
        }
    }

    fn host(&mut self, h: usize) -> &mut Host {
        self.hosts[h].as_mut().expect("a lowtide host")
    }

    fn dispatch(&mut self, t: &Topology, h: usize, now: u64, ev: SocketEvent) {
        match self.host(h).roles.get(&ev.socket).copied() {
            Some(Role::Sender(i)) => self.sender_event(t, i, now, ev),
            Some(Role::Listener(i)) => self.accept(t, i, now),
            Some(Role::Receiver(i)) => self.receiver_event(t, i, now, ev),
            None => {}
        }
    }

    fn sender_event(&mut self, t: &Topology, i: usize, now: u64, ev: SocketEvent) {
        let def = &t.flows[i];
        let (Some(s), Some(host)) = (self.senders[i].as_mut(), self.hosts[def.from].as_mut())
        else {
            return;
        };
        let (stack, at) = (&mut host.stack, Instant(now));
        if matches!(ev.kind, EventKind::Readable | EventKind::ReadHangUp) {
            read_responses(stack, def, s, now);
        }
        match ev.kind {
            EventKind::Connected => {
                s.out.connected_ns.get_or_insert(now);
                s.app.on_connected(stack, at, &mut self.wbuf);
            }
            EventKind::Writable => s.app.on_writable(stack, at, &mut self.wbuf),
            EventKind::ReadHangUp | EventKind::HangUp => s.app.on_peer_closed(stack, at),
            EventKind::Error(e) => s.app.fail(stack, at, e),
            EventKind::Readable
            | EventKind::Acceptable
            | EventKind::ErrQueue
            | EventKind::StateChange => {}
        }
        if s.app.state == SendState::Closed {
            host.roles.remove(&ev.socket);
        }
    }

    /// Flow `i`'s one connection accepted (its listener closed then, as the
    /// kernel's receiver drops its own).
    fn accept(&mut self, t: &Topology, i: usize, now: u64) {
        let def = &t.flows[i];
        let (Some(r), Some(host)) = (self.receivers[i].as_mut(), self.hosts[def.to].as_mut())
        else {
            return;
        };
        let Some(l) = r.listener else { return };
        let Ok(c) = host.stack.accept(l) else { return };
        let _ = host.stack.close(Instant(now), l);
        host.roles.remove(&l);
        r.listener = None;
        host.roles.insert(c, Role::Receiver(i));
        r.app.accepted = true;
        r.app.handle = Some(c);
        if let Some((server, _)) = r.server.as_mut() {
            server.accepted(c, Instant(now));
        }
        let ev = SocketEvent {
            socket: c,
            kind: EventKind::Readable,
        };
        self.receiver_event(t, i, now, ev);
    }

    fn receiver_event(&mut self, t: &Topology, i: usize, now: u64, ev: SocketEvent) {
        let def = &t.flows[i];
        let (Some(r), Some(host)) = (self.receivers[i].as_mut(), self.hosts[def.to].as_mut())
        else {
            return;
        };
        let (stack, at) = (&mut host.stack, Instant(now));
        match ev.kind {
            EventKind::Readable | EventKind::ReadHangUp => r.app.on_readable(stack, at),
            EventKind::Error(e) => r.app.fail(stack, at, e),
            _ => {}
        }
        if let (Some(rr), Some((server, served))) = (def.rr, r.server.as_mut()) {
            if r.app.handle.is_none() {
                server.handle = None;
                server.state = SendState::Closed;
            } else if ev.kind == EventKind::Writable {
                server.on_writable(stack, at, &mut self.wbuf);
            }
            while *served < r.app.verifier.received() / rr.request as u64 && server.handle.is_some()
            {
                *served += 1;
                server.allow(stack, at, &mut self.wbuf, rr.response as u64);
            }
        }
        r.read.set(now, Some(r.app.verifier.received()));
        if let Some((size, _)) = def.probe {
            let whole = r.app.verifier.received() / size as u64;
            while (r.probe_reads.len() as u64) < whole {
                r.probe_reads.push(now);
            }
        }
        if r.app.handle.is_none() {
            host.roles.remove(&ev.socket);
        }
    }

    /// Counts each side that has ended in the run's `ended`, once.
    fn count_ended(&mut self, sh: &Shared) {
        let mut n = 0;
        for s in self.senders.iter_mut().flatten() {
            let done = s.app.state == SendState::Closed || (s.started && s.app.handle.is_none());
            if done && !s.ended {
                s.ended = true;
                n += 1;
            }
        }
        for r in self.receivers.iter_mut().flatten() {
            let done = r.app.closed || r.app.error.is_some();
            if done && !r.ended {
                r.ended = true;
                n += 1;
            }
        }
        sh.ended.fetch_add(n, Ordering::Relaxed);
    }

    /// Flow `i`'s outcomes on this side, as the kernel's threads give theirs
    /// (`None` for a side a kernel host holds). Reads a live sender's last
    /// `tcp_info`; the bytes a receiver has read so far are in `read`.
    pub fn take(
        &mut self,
        t: &Topology,
        i: usize,
        now: u64,
    ) -> (Option<SenderOut>, Option<super::flows::ReceiverOut>) {
        let def = &t.flows[i];
        let s = self.senders[i].take().map(|mut s| {
            if let Some(host) = self.hosts[def.from].as_mut() {
                let at = now.max(s.next_info);
                sample(&host.stack, &mut s, at);
                s.app.snapshot(&host.stack, Instant(now));
                s.out.cwnd.set(at, None);
            }
            let mut out = s.out;
            out.written = s.app.written;
            out.error = s.app.error;
            out.retrans = out.retrans.max(s.app.info.retrans_segs as u32);
            if s.app.info.min_rtt_us > 0 {
                out.rtt.2 = s.app.info.min_rtt_us as u32;
            }
            if let Some(c) = s.rr {
                out.responses = Some(c.responses);
            }
            out
        });
        let r = self.receivers[i].take().map(|r| super::flows::ReceiverOut {
            last_byte_ns: r.app.last_byte_at.as_nanos(),
            error: r.app.error,
            verifier: r.app.verifier,
            probe_reads: r.probe_reads,
            read: r.read,
        });
        (s, r)
    }
}

fn is_lt(hosts: &[Option<Host>], h: usize) -> bool {
    matches!(hosts.get(h), Some(Some(_)))
}

/// Flow `i`'s sender, not yet connected.
fn sender(t: &Topology, i: usize, def: &FlowDef) -> LtSender {
    LtSender {
        app: Sender::new(t.seed, i as u32, def.bytes),
        out: SenderOut {
            cwnd: grid_recorder(t, None),
            ..SenderOut::default()
        },
        started: false,
        stopped: false,
        ended: false,
        next_info: 0,
        next_probe: def.start_ns,
        rr: def.rr.map(|_| RrClient {
            responses: Verifier::new(Payload::new(t.seed, i as u32 | RESPONSE_STREAM), None),
            sent_at: None,
            next_at: def.start_ns,
        }),
    }
}

/// Flow `i`'s connect, its options set as the kernel's sender sets them.
fn connect(t: &Topology, i: usize, def: &FlowDef, host: &mut Host, at: Instant, s: &mut LtSender) {
    let stack = &mut host.stack;
    s.app.started_at = at;
    let local = SocketAddr::new(addr_of(t, def.from), 0);
    let remote = SocketAddr::new(addr_of(t, def.to), BASE_PORT + i as u16);
    let h = match stack.connect(at, local, remote) {
        Ok(h) => h,
        Err(e) => {
            s.app.error = Some(e);
            s.app.state = SendState::Closed;
            return;
        }
    };
    host.roles.insert(h, Role::Sender(i));
    s.app.handle = Some(h);
    if let Some(cc) = &def.cc {
        if let Err(e) = stack.socket(h).set_congestion(at, cc) {
            eprintln!("lowtide: flow {}: TCP_CONGESTION {cc}: {e}", def.name);
        }
    }
    if def.probe.is_some() {
        let _ = stack.socket(h).set_nodelay(true);
    }
    if let Some(bytes) = def.notsent_lowat {
        s.app.set_notsent_lowat(stack, at, bytes);
    }
    if def.rr.is_some() || def.probe.is_some() {
        // Writes only what a request or a probe's message allows.
        s.app.allowance = Some(0);
    }
}

/// A `tcp_info` sample if one is due at `now`, as the kernel's senders take theirs.
fn sample(stack: &Stack, s: &mut LtSender, now: u64) {
    if now < s.next_info {
        return;
    }
    s.next_info = now + INFO_EVERY_NS;
    let Some(Ok(info)) = s.app.handle.map(|h| stack.info(Instant(now), h)) else {
        return;
    };
    let out = &mut s.out;
    out.rtt.0 += info.rtt as u64;
    out.rtt.1 += 1;
    out.rtt.2 = if info.min_rtt == u32::MAX {
        0
    } else {
        info.min_rtt
    };
    out.retrans = info.total_retrans;
    out.cwnd.set(now, Some(info.snd_cwnd as u64));
}

/// A recorder on `t`'s series grid, `initial` until set.
fn grid_recorder(t: &Topology, initial: Option<u64>) -> GridRecorder {
    GridRecorder::new(t.series_interval_ns, t.duration_ns, initial)
}

/// A request/response client reads the responses that have come, checking them;
/// a whole one ends the transaction, and the next request goes after the think
/// time.
fn read_responses(stack: &mut Stack, def: &FlowDef, s: &mut LtSender, now: u64) {
    let (Some(rr), Some(c), Some(h)) = (def.rr, s.rr.as_mut(), s.app.handle) else {
        return;
    };
    loop {
        let v = &mut c.responses;
        match stack.recv_with(Instant(now), h, IO_BUF, |chunk| v.consume(chunk)) {
            Ok(0) | Err(lowtide::SocketError::WouldBlock) => break,
            Ok(_) => {}
            Err(e) => return s.app.fail(stack, Instant(now), e),
        }
    }
    let whole = c.responses.received() / rr.response as u64;
    if let Some(sent) = c.sent_at.filter(|_| whole > s.out.latencies.len() as u64) {
        s.out.latencies.push(now - sent);
        c.sent_at = None;
        c.next_at = now + rr.think_ns;
    }
}

/// When flow `def`'s sender next has something due by the clock (ns).
fn next_app_event(s: &LtSender, def: &FlowDef, now: u64) -> Option<u64> {
    if !s.started {
        return Some(def.start_ns);
    }
    let mut due = vec![s.next_info];
    if let Some(stop) = def.stop_ns.filter(|_| !s.stopped) {
        due.push(stop);
    }
    if def.probe.is_some() {
        due.push(s.next_probe);
    }
    if let Some(c) = s.rr.as_ref().filter(|c| c.sent_at.is_none()) {
        due.push(c.next_at);
    }
    if let Some((on, off)) = def.onoff {
        let period = on + off;
        let base = def.start_ns + now.saturating_sub(def.start_ns) / period * period;
        due.push(if now < base + on {
            base + on
        } else {
            base + period
        });
    }
    due.into_iter().min()
}
