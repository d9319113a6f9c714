//! The event loop of a network: hosts (as the two-host world runs them: a stack, a
//! NIC with its qdisc cutting GSO packets onto the link, a NAPI receive path with
//! GRO), and routers that take each arriving segment, look its destination up,
//! decrease its TTL and queue it on the egress port's qdisc, whose transmitter
//! serializes it onto the next link. Virtual time, one event queue, ties broken by
//! insertion order: a run is a function of its file.

use super::flow_series::{FlowSampler, Mark, NetTimeseries};
use super::port::{route, Port};
use super::series::Sampler;
use super::topology::{NodeKind, Topology, RESPONSE_STREAM};
use crate::app::{Receiver, SendState, Sender, WriteBuf, IO_BUF};
use crate::device::classify;
use crate::host::{SimHost, SocketRole};
use crate::nic::{NicQueue, NO_FLOW};
use crate::payload::{Payload, Verifier};
use crate::timeseries::FlowSample;
use crate::world::{derive_seed, LISTEN_PORT};
use lowtide::tcp::cong::CcInfo;
use lowtide::{EventKind, Instant, SocketError, SocketEvent, SocketHandle, Stack, Transmit};
use lowtide_link::{EventQueue, WireSeg};
use lowtide_wire::{gso, tcp::four_tuple_apart};
use rustc_hash::FxHashMap;
use std::net::{IpAddr, SocketAddr};

/// Something that happens at a point in virtual time.
enum Ev {
    /// Flow `0` connects.
    Start(u32),
    /// Bulk flow `0` stops writing.
    Stop(u32),
    /// Probe flow `0` writes its next message.
    Probe(u32),
    /// Request/response flow `0` writes its next request.
    Request(u32),
    /// On/off flow `0` turns on (`true`) or off.
    OnOff(u32, bool),
    /// The run's time is over.
    End,
    /// Node `0` takes what has arrived (a host's NAPI poll, a router's input).
    Rx(u32),
    /// Port `0`'s transmitter finished its packet.
    TxDone(u32),
    /// Host `0`'s stack timer may be due.
    Timer(u32),
    /// Port `0`'s qdisc may release a packet it held back.
    QdiscWake(u32),
}

/// A router's input side.
struct Router {
    rx_ports: Vec<usize>,
    rx_at: Option<Instant>,
}

/// One flow's applications, and a probe's messages.
pub(crate) struct NetFlow {
    pub sender: Sender,
    pub receiver: Receiver,
    pub done: bool,
    /// A probe's messages: when each was written (ns).
    probe_sent: Vec<u64>,
    /// Messages fully read so far.
    probe_read: usize,
    /// Each read message's one-way delay (ns).
    pub delays: Vec<u64>,
    /// A request/response flow's server side and transactions.
    pub rr: Option<Box<RrState>>,
    /// An on/off flow: since when it is off (ns), while it is.
    pub off_since: Option<u64>,
}

/// A request/response flow's server side and its transactions (one at a time).
pub(crate) struct RrState {
    /// The server's replies, written on the accepted socket.
    pub server: Sender,
    /// The client's check of the responses it reads.
    pub responses: Verifier,
    /// Requests the server has read whole and answered.
    served: u64,
    /// When the outstanding request was written (ns).
    sent_at: u64,
    /// Each transaction's latency, request written to response read (ns).
    pub latencies: Vec<u64>,
}

/// A network's state during a run.
pub(crate) struct Network<'t> {
    pub topo: &'t Topology,
    pub hosts: Vec<SimHost>,
    routers: Vec<Router>,
    pub ports: Vec<Port>,
    pub flows: Vec<NetFlow>,
    queue: EventQueue<Ev>,
    listeners: Vec<Option<SocketHandle>>,
    port_flow: FxHashMap<(IpAddr, u16), u32>,
    host_of: FxHashMap<IpAddr, usize>,
    wbuf: WriteBuf,
    pub events: u64,
    flows_done: usize,
    pub now: Instant,
    /// Every link leaves checksums intact: receivers trust them.
    csum_trusted: bool,
    /// Segments a router dropped: TTL expired or no route.
    pub router_drops: u64,
    /// The queues' time series.
    pub sampler: Sampler,
    /// The flows' time series, when asked for (`sim run --timeseries`).
    pub flow_sampler: Option<FlowSampler>,
}

impl<'t> Network<'t> {
    /// The network of `t`, with its flows and the end scheduled.
    pub fn new(t: &'t Topology) -> Result<Network<'t>, String> {
        let csum_trusted = t.ports.iter().all(|p| p.link.corrupt == 0.0);
        let mut hosts = Vec::new();
        let mut routers = Vec::new();
        let mut host_of = FxHashMap::default();
        for (i, n) in t.nodes.iter().enumerate() {
            let rx_ports: Vec<usize> = (t.ports.iter().enumerate())
                .filter(|(_, p)| p.dst == i)
                .map(|(k, _)| k)
                .collect();
            match &n.kind {
                NodeKind::Host { config, addr } => {
                    let tx = t.ports.iter().position(|p| p.src == i).unwrap_or(0);
                    // sch_fq on the host's egress paces its sockets (SK_PACING_FQ).
                    let mut cfg = (**config).clone();
                    cfg.device_fq = Some(t.ports[tx].queue.name() == "fq");
                    let stack = Stack::new(cfg, derive_seed(t.seed, 1 + i as u64));
                    let mut h = SimHost::new(stack, *addr, n.txqueuelen as usize, tx);
                    let mtu = config.mtu + 14;
                    let seed = derive_seed(t.seed, 201 + i as u64);
                    h.nic = NicQueue::with_qdisc(t.ports[tx].queue.build(n.txqueuelen, mtu, seed));
                    h.rx_csum_valid = csum_trusted;
                    h.rx_links = rx_ports;
                    host_of.insert(*addr, i);
                    hosts.push(h);
                }
                NodeKind::Router => routers.push(Router {
                    rx_ports,
                    rx_at: None,
                }),
            }
        }
        let ports = (0..t.ports.len())
            .map(|i| Port::new(t, i, t.ports[i].src >= hosts.len()))
            .collect();
        let flows = (t.flows.iter().enumerate())
            .map(|(i, f)| NetFlow {
                sender: Sender::new(t.seed, i as u32, f.bytes).with_mode(t.payload),
                receiver: Receiver::new(t.seed, i as u32, f.bytes),
                done: false,
                probe_sent: Vec::new(),
                probe_read: 0,
                delays: Vec::new(),
                rr: f.rr.map(|_| {
                    let id = i as u32 | RESPONSE_STREAM;
                    Box::new(RrState {
                        server: Sender::new(t.seed, id, None).with_mode(t.payload),
                        responses: Verifier::new(Payload::new(t.seed, id), None),
                        served: 0,
                        sent_at: 0,
                        latencies: Vec::new(),
                    })
                }),
                off_since: None,
            })
            .collect();
        let mut net = Network {
            topo: t,
            listeners: vec![None; hosts.len()],
            hosts,
            routers,
            ports,
            flows,
            queue: EventQueue::new(),
            port_flow: FxHashMap::default(),
            host_of,
            wbuf: WriteBuf::default(),
            events: 0,
            flows_done: 0,
            now: Instant::ZERO,
            csum_trusted,
            router_drops: 0,
            sampler: Sampler::new(t).with_flows(t),
            flow_sampler: None,
        };
        net.setup()?;
        Ok(net)
    }

    /// Listeners on every receiving host; the flows' starts, stops and the end.
    fn setup(&mut self) -> Result<(), String> {
        let t = self.topo;
        for f in &t.flows {
            if self.listeners[f.to].is_some() {
                continue;
            }
            let h = &mut self.hosts[f.to];
            let backlog = t.flows.len().clamp(128, u32::MAX as usize) as u32;
            let l = (h
                .stack
                .listen(SocketAddr::new(h.addr, LISTEN_PORT), backlog))
            .map_err(|e| format!("listen: {e}"))?;
            h.register(l, SocketRole::Listener);
            self.listeners[f.to] = Some(l);
        }
        for (i, f) in t.flows.iter().enumerate() {
            let i = i as u32;
            self.queue.push(Instant(f.start_ns), Ev::Start(i));
            if let Some(s) = f.stop_ns {
                self.queue.push(Instant(s), Ev::Stop(i));
            }
            if f.probe.is_some() {
                self.queue.push(Instant(f.start_ns), Ev::Probe(i));
            }
            if f.rr.is_some() {
                self.queue.push(Instant(f.start_ns), Ev::Request(i));
            }
            if let Some((on, _)) = f.onoff {
                self.queue
                    .push(Instant(f.start_ns + on), Ev::OnOff(i, false));
            }
        }
        self.queue.push(Instant(t.duration_ns), Ev::End);
        Ok(())
    }

    /// Runs until the end of the run's time, or until every flow is done when all
    /// are fixed-size transfers.
    pub fn run(&mut self) {
        let all_fixed = self.topo.flows.iter().all(|f| f.bytes.is_some());
        while let Some((at, ev)) = self.queue.pop() {
            // Nothing changes between events: the samples due before this one
            // see the state as it has stood since the last.
            let (hosts, ports, flows) = (&self.hosts, &self.ports, &self.flows);
            let (t, now) = (self.topo, self.now);
            self.sampler.until(
                at.as_nanos(),
                |p| port_totals(hosts, ports, p),
                |i| flow_figures(hosts, t, &flows[i], i, now),
            );
            self.sample_flows(at.as_nanos());
            self.now = at;
            self.events += 1;
            match ev {
                Ev::End => return,
                Ev::Start(f) => self.start_flow(f),
                Ev::Stop(f) => self.stop_flow(f),
                Ev::Probe(f) => self.probe(f),
                Ev::Request(f) => self.request(f),
                Ev::OnOff(f, on) => self.on_off(f, on),
                Ev::Rx(n) => self.rx(n as usize),
                Ev::TxDone(p) => self.tx_done(p as usize),
                Ev::Timer(h) => self.timer(h as usize),
                Ev::QdiscWake(p) => self.qdisc_wake(p as usize),
            }
            if all_fixed && self.flows_done == self.flows.len() {
                return;
            }
        }
    }

    /// The flow rows due before `at` (ns), if asked for: each connected flow's
    /// sender as it stands (its `tcp_info`, DCTCP's alpha, its bytes in the NIC
    /// queue) and its receiver's window.
    fn sample_flows(&mut self, at: u64) {
        let Some(fs) = self.flow_sampler.as_mut() else {
            return;
        };
        let points: Vec<u64> = fs.grid.take_due(at).collect();
        if points.is_empty() {
            return;
        }
        let now = self.now;
        let mut rows = Vec::new();
        for (id, (f, def)) in self.flows.iter().zip(&self.topo.flows).enumerate() {
            let Some(h) = f.sender.handle else { continue };
            let host = &self.hosts[def.from];
            let Ok(i) = host.stack.info(now, h) else {
                continue;
            };
            let peer = (f.receiver.handle).and_then(|r| self.hosts[def.to].stack.info(now, r).ok());
            let mut row = FlowSample::from_info(0, id as u32, &i, 0, peer.as_ref());
            row.dev_queue_bytes = host.nic.flow_bytes(f.sender.flow);
            if let Ok(Some(CcInfo::Dctcp(d))) = host.stack.socket_ref(h).cc_info() {
                row.dctcp_alpha = (d.dctcp_enabled != 0).then_some(d.dctcp_alpha);
            }
            rows.push(row);
        }
        for t in points {
            fs.rows.extend(rows.iter().map(|r| FlowSample {
                time_us: t / 1_000,
                ..r.clone()
            }));
        }
    }

    /// The flow rows and the routers' marks taken (`sim run --timeseries`).
    pub fn take_timeseries(&mut self) -> NetTimeseries {
        let fs = self.flow_sampler.take();
        let mut marks: Vec<Mark> = (self.ports.iter_mut().enumerate())
            .flat_map(|(i, p)| {
                let name = &self.topo.ports[i].name;
                (p.marks.take().unwrap_or_default().into_iter()).map(|m| Mark {
                    time_ns: m.time_ns,
                    queue: name.clone(),
                    backlog_packets: m.packets,
                    backlog_bytes: m.bytes,
                    flow: (m.flow != NO_FLOW).then_some(m.flow),
                    flow_backlog_bytes: m.flow_bytes,
                })
            })
            .collect();
        marks.sort_by_key(|m| m.time_ns);
        NetTimeseries {
            interval_us: fs
                .as_ref()
                .map_or(0.0, |f| f.grid.interval_ns() as f64 / 1e3),
            flow_names: self.topo.flows.iter().map(|f| f.name.clone()).collect(),
            flows: fs.map(|f| f.rows).unwrap_or_default(),
            marks,
        }
    }

    fn start_flow(&mut self, f: u32) {
        let t = self.topo;
        let (now, def) = (self.now, &t.flows[f as usize]);
        let remote = SocketAddr::new(self.hosts[def.to].addr, LISTEN_PORT);
        let h = &mut self.hosts[def.from];
        let s = &mut self.flows[f as usize].sender;
        s.started_at = now;
        match h.stack.connect(now, SocketAddr::new(h.addr, 0), remote) {
            Ok(sock) => {
                h.register(sock, SocketRole::Sender(f));
                s.handle = Some(sock);
                if let Some(cc) = &def.cc {
                    if let Err(e) = h.stack.socket(sock).set_congestion(now, cc) {
                        tracing::warn!("{}: TCP_CONGESTION {cc}: {e}", def.name);
                    }
                }
                if def.probe.is_some() {
                    // A probe's messages go at once, not behind Nagle's rule.
                    let _ = h.stack.socket(sock).set_nodelay(true);
                }
                if let Some(bytes) = def.notsent_lowat {
                    s.set_notsent_lowat(&mut h.stack, now, bytes);
                }
                if let Ok((l, _)) = h.stack.addresses(sock) {
                    self.port_flow.insert((l.ip(), l.port()), f);
                    s.local_port = l.port();
                }
            }
            Err(e) => {
                s.error = Some(e);
                s.state = SendState::Closed;
            }
        }
        self.service(def.from);
    }

    fn stop_flow(&mut self, f: u32) {
        let host = self.topo.flows[f as usize].from;
        self.flows[f as usize]
            .sender
            .stop(&mut self.hosts[host].stack, self.now);
        self.service(host);
    }

    /// A probe's next message: `size` more bytes allowed, and the next tick.
    fn probe(&mut self, f: u32) {
        let t = self.topo;
        let def = &t.flows[f as usize];
        let Some((size, interval)) = def.probe else {
            return;
        };
        let flow = &mut self.flows[f as usize];
        if flow.sender.state == SendState::Closed {
            return;
        }
        flow.probe_sent.push(self.now.as_nanos());
        let stack = &mut self.hosts[def.from].stack;
        flow.sender
            .allow(stack, self.now, &mut self.wbuf, size as u64);
        self.queue
            .push(Instant(self.now.as_nanos() + interval), Ev::Probe(f));
        self.service(def.from);
    }

    /// A request/response flow's next request: `request` more bytes allowed.
    fn request(&mut self, f: u32) {
        let def = &self.topo.flows[f as usize];
        let Some(rr) = def.rr else { return };
        let flow = &mut self.flows[f as usize];
        let Some(state) = flow.rr.as_mut() else {
            return;
        };
        if matches!(flow.sender.state, SendState::Closed | SendState::ShutDown) {
            return;
        }
        state.sent_at = self.now.as_nanos();
        let stack = &mut self.hosts[def.from].stack;
        (flow.sender).allow(stack, self.now, &mut self.wbuf, rr.request as u64);
        self.service(def.from);
    }

    /// An on/off flow turns on (writes again) or off (writes nothing), and the
    /// next turn.
    fn on_off(&mut self, f: u32, on: bool) {
        let def = &self.topo.flows[f as usize];
        let Some((on_ns, off_ns)) = def.onoff else {
            return;
        };
        let flow = &mut self.flows[f as usize];
        if matches!(flow.sender.state, SendState::Closed | SendState::ShutDown) {
            return;
        }
        let now = self.now;
        let next = match on {
            true => {
                flow.off_since = None;
                let stack = &mut self.hosts[def.from].stack;
                flow.sender.resume(stack, now, &mut self.wbuf);
                on_ns
            }
            false => {
                flow.off_since = Some(now.as_nanos());
                flow.sender.pause();
                off_ns
            }
        };
        self.queue
            .push(Instant(now.as_nanos() + next), Ev::OnOff(f, !on));
        self.service(def.from);
    }

    /// Node `n` takes every segment that has arrived: a host's NAPI poll, a
    /// router's forwarding.
    fn rx(&mut self, n: usize) {
        let now = self.now;
        if n < self.hosts.len() {
            let h = &mut self.hosts[n];
            if h.rx_poll_at != Some(now) {
                return; // stale: re-armed earlier
            }
            h.rx_poll_at = None;
            for &p in &h.rx_links {
                while let Some(seg) = self.ports[p].pipe.pop_arrived(now.as_nanos()) {
                    h.rx_ring.push(seg);
                }
            }
            h.napi_poll(now, self.topo.gro);
            for buf in std::mem::take(&mut h.spent) {
                h.stack.recycle_buffer(buf);
            }
            self.service(n);
        } else {
            let r = n - self.hosts.len();
            if self.routers[r].rx_at != Some(now) {
                return;
            }
            self.routers[r].rx_at = None;
            for k in 0..self.routers[r].rx_ports.len() {
                let p = self.routers[r].rx_ports[k];
                while let Some(seg) = self.ports[p].pipe.pop_arrived(now.as_nanos()) {
                    self.forward(n, seg);
                }
            }
        }
        self.arm_rx(n);
    }

    /// `ip_forward`: the route to the destination, `ip_decrease_ttl`, then the
    /// egress qdisc (`dev_queue_xmit`) and its transmitter.
    fn forward(&mut self, node: usize, mut seg: WireSeg) {
        let Some(p) = route(self.topo, &self.host_of, node, &mut seg) else {
            self.router_drops += 1;
            return;
        };
        let flow = match self.ports[p].marks.is_some() {
            true => self.flow_of(&seg),
            false => NO_FLOW,
        };
        let port = &mut self.ports[p];
        port.enqueue(self.now, seg, flow);
        if !port.busy {
            self.port_tx(p);
        }
    }

    /// The flow a forwarded segment belongs to: its source's (data), else its
    /// destination's (ACKs); [`NO_FLOW`] for none.
    fn flow_of(&self, seg: &WireSeg) -> u32 {
        let Ok((src, dst)) = four_tuple_apart(&seg.head, seg.body.len()) else {
            return NO_FLOW;
        };
        let find = |a: SocketAddr| self.port_flow.get(&(a.ip(), a.port())).copied();
        find(src).or_else(|| find(dst)).unwrap_or(NO_FLOW)
    }

    /// A router port's transmitter takes the qdisc's next packet onto the link.
    fn port_tx(&mut self, p: usize) {
        match self.ports[p].transmit(self.now) {
            Ok(end) => {
                self.queue.push(Instant(end), Ev::TxDone(p as u32));
                self.arm_rx(self.ports[p].dst);
            }
            Err(Some(at)) => self.arm_qdisc_wake(p, at),
            Err(None) => {}
        }
    }

    fn tx_done(&mut self, p: usize) {
        let src = self.ports[p].src;
        if src < self.hosts.len() {
            let h = &mut self.hosts[src];
            h.tx_busy = false;
            if let Some(token) = h.tx_owed.take() {
                h.stack.handle_tx_complete(self.now, token);
            }
            self.service(src);
        } else {
            self.ports[p].busy = false;
            self.port_tx(p);
        }
    }

    fn timer(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        if h.timer_at != Some(self.now) {
            return; // stale: the timer was re-armed earlier
        }
        h.timer_at = None;
        h.stack.handle_timeout(self.now);
        self.service(host);
    }

    fn qdisc_wake(&mut self, p: usize) {
        if self.ports[p].wake_at == Some(self.now) {
            self.ports[p].wake_at = None;
        }
        match self.ports[p].src {
            h if h < self.hosts.len() => self.service(h),
            _ if !self.ports[p].busy => self.port_tx(p),
            _ => {}
        }
    }

    fn arm_qdisc_wake(&mut self, p: usize, at: Instant) {
        let port = &mut self.ports[p];
        if port.wake_at.is_none_or(|cur| at < cur) {
            port.wake_at = Some(at);
            self.queue.push(at, Ev::QdiscWake(p as u32));
        }
    }

    /// Schedules node `n`'s input at the earliest arrival on its links (a host's
    /// one coalescing window later), unless an earlier one is pending.
    fn arm_rx(&mut self, n: usize) {
        let ports = &self.ports;
        let first = |links: &[usize]| {
            links
                .iter()
                .filter_map(|&p| ports[p].pipe.head_time())
                .min()
        };
        let (slot, at) = if n < self.hosts.len() {
            let h = &mut self.hosts[n];
            let Some(t) = first(&h.rx_links) else { return };
            (&mut h.rx_poll_at, Instant(t + self.topo.rx_usecs_ns))
        } else {
            let r = &mut self.routers[n - self.hosts.len()];
            let Some(t) = first(&r.rx_ports) else { return };
            (&mut r.rx_at, Instant(t))
        };
        if slot.is_none_or(|cur| at < cur) {
            *slot = Some(at);
            self.queue.push(at, Ev::Rx(n as u32));
        }
    }

    /// After anything touched host `host`: readiness to the applications and
    /// packets to the NIC until both are quiet, then the transmitter and the timer
    /// (as the two-host world's `service`).
    fn service(&mut self, host: usize) {
        loop {
            let mut busy = false;
            while let Some(ev) = self.hosts[host].stack.poll_event() {
                busy = true;
                self.dispatch(host, ev);
            }
            while let Some(tx) = self.hosts[host].stack.poll_transmit(self.now) {
                busy = true;
                self.enqueue(host, tx);
            }
            if !busy {
                break;
            }
        }
        if !self.hosts[host].tx_busy {
            self.start_tx(host);
        }
        self.arm_timer(host);
    }

    fn enqueue(&mut self, host: usize, tx: Transmit) {
        let (now, h) = (self.now, &mut self.hosts[host]);
        let result = match h.nic.classifies() {
            false => h.nic.enqueue_flow(now, tx, NO_FLOW),
            true => {
                let tuple = four_tuple_apart(&tx.packet, tx.payload.len()).ok();
                let seed = self.ports[h.tx_link].hash_seed();
                h.nic
                    .enqueue_skb(now, classify(tx, NO_FLOW, tuple, now, seed))
            }
        };
        if let Err(tx) = result {
            // NET_XMIT_DROP (a full pfifo): a local drop, not a network loss.
            h.stack.handle_tx_dropped(now, tx.token);
        }
        self.complete_freed(host);
    }

    /// TX completions of packets the host's qdisc dropped after taking them.
    fn complete_freed(&mut self, host: usize) {
        let (now, h) = (self.now, &mut self.hosts[host]);
        let mut any = false;
        for tx in h.nic.take_freed() {
            h.stack.handle_tx_complete(now, tx.token);
            any = true;
        }
        if any {
            let p = h.tx_link;
            self.arm_qdisc_wake(p, now);
        }
    }

    fn arm_timer(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        let Some(t) = h.stack.poll_timeout() else {
            return;
        };
        let t = t.max(self.now);
        if h.timer_at.is_none_or(|cur| t < cur) {
            h.timer_at = Some(t);
            self.queue.push(t, Ev::Timer(host as u32));
        }
    }

    /// The host NIC's transmitter: the head packet's wire segments back to back
    /// onto its link (as the two-host world's `start_tx`).
    fn start_tx(&mut self, host: usize) {
        let now = self.now;
        let dequeued = self.hosts[host].nic.dequeue(now);
        self.complete_freed(host);
        let p = self.hosts[host].tx_link;
        let Some(mut tx) = dequeued else {
            if let Some(at) = self.hosts[host].nic.next_ready().filter(|&t| t > now) {
                self.arm_qdisc_wake(p, at);
            }
            return;
        };
        // The device makes a pattern socket's payload now that it sends the packet
        // (a queued packet held its headers only).
        self.hosts[host].stack.make_tx_payload(&mut tx);
        if tx.gso_segs <= 1 {
            tx.flatten();
        }
        let (full_csum, apart) = (!self.csum_trusted, self.topo.gro && self.csum_trusted);
        let head_len = tx.packet.len();
        let port = &mut self.ports[p];
        let (dir, pipe) = (&mut port.dir, &mut port.pipe);
        let stack = &mut self.hosts[host].stack;
        let mut last_end = now.as_nanos();
        let mut put = |seg: WireSeg| {
            let (_, end) = dir.serialize(now.as_nanos(), seg.len());
            last_end = end;
            dir.propagate(end, seg, |at, s| pipe.push(at, s));
        };
        let token = tx.token;
        if tx.gso_segs <= 1 {
            let mut pkt = tx.packet;
            if full_csum && gso::finish_checksum(&mut pkt).is_err() {
                tracing::warn!("packet without a TCP header sent as is");
            }
            put(WireSeg::whole(pkt));
        } else {
            let take = |len| stack.take_buffer(if apart { head_len } else { len });
            let (hdr, payload) = (&tx.packet, &tx.payload.to_bytes());
            let cut = |head, range| {
                put(WireSeg {
                    head,
                    body: payload.slice(range),
                })
            };
            if gso::segment_headers_into(hdr, payload, tx.gso(), full_csum, take, cut).is_err() {
                tracing::warn!("unsegmentable packet from host {host}: dropped");
            }
            self.hosts[host].stack.recycle_buffer(tx.packet);
        }
        self.hosts[host].tx_busy = true;
        self.hosts[host].tx_owed = Some(token);
        self.queue.push(Instant(last_end), Ev::TxDone(p as u32));
        let dst = self.ports[p].dst;
        self.arm_rx(dst);
    }

    fn dispatch(&mut self, host: usize, ev: SocketEvent) {
        match self.hosts[host].role(ev.socket) {
            Some(SocketRole::Sender(f)) => self.sender_event(f, ev),
            Some(SocketRole::Receiver(f)) => self.receiver_event(f, ev),
            Some(SocketRole::Listener) => self.accept_all(host),
            Some(SocketRole::Hostile) | None => {}
        }
    }

    fn sender_event(&mut self, f: u32, ev: SocketEvent) {
        let host = self.topo.flows[f as usize].from;
        if matches!(ev.kind, EventKind::Readable | EventKind::ReadHangUp) {
            self.read_responses(f);
        }
        let (now, a) = (self.now, &mut self.hosts[host]);
        let s = &mut self.flows[f as usize].sender;
        match ev.kind {
            EventKind::Connected => s.on_connected(&mut a.stack, now, &mut self.wbuf),
            EventKind::Writable => s.on_writable(&mut a.stack, now, &mut self.wbuf),
            EventKind::ReadHangUp | EventKind::HangUp => s.on_peer_closed(&mut a.stack, now),
            EventKind::Error(e) => s.fail(&mut a.stack, now, e),
            EventKind::Readable
            | EventKind::Acceptable
            | EventKind::ErrQueue
            | EventKind::StateChange => {}
        }
        if s.state == SendState::Closed {
            a.unregister(ev.socket);
            self.check_done(f);
        }
    }

    /// A request/response client reads the responses that have come, checking
    /// them; each whole one ends a transaction, and the next request follows
    /// after the think time.
    fn read_responses(&mut self, f: u32) {
        let def = &self.topo.flows[f as usize];
        let Some(rr) = def.rr else { return };
        let (now, a) = (self.now, &mut self.hosts[def.from]);
        let flow = &mut self.flows[f as usize];
        let (Some(state), Some(h)) = (flow.rr.as_mut(), flow.sender.handle) else {
            return;
        };
        loop {
            let v = &mut state.responses;
            match a.stack.recv_with(now, h, IO_BUF, |chunk| v.consume(chunk)) {
                Ok(0) | Err(SocketError::WouldBlock) => break,
                Ok(_) => {}
                Err(e) => return flow.sender.fail(&mut a.stack, now, e),
            }
        }
        let whole = state.responses.received() / rr.response as u64;
        if whole > state.latencies.len() as u64 {
            state.latencies.push(now.as_nanos() - state.sent_at);
            // The next request as its own event (also with no think time), so
            // that it is written after this host's service.
            let at = Instant(now.as_nanos() + rr.think_ns);
            self.queue.push(at, Ev::Request(f));
        }
    }

    fn receiver_event(&mut self, f: u32, ev: SocketEvent) {
        let t = self.topo;
        let def = &t.flows[f as usize];
        let (now, b) = (self.now, &mut self.hosts[def.to]);
        let flow = &mut self.flows[f as usize];
        let r = &mut flow.receiver;
        match ev.kind {
            EventKind::Readable | EventKind::ReadHangUp => r.on_readable(&mut b.stack, now),
            EventKind::Error(e) => r.fail(&mut b.stack, now, e),
            _ => {}
        }
        if let (Some(rr), Some(state)) = (def.rr, flow.rr.as_mut()) {
            // The server answers every request it has read whole; it writes when
            // the socket has room again.
            let server = &mut state.server;
            if r.handle.is_none() {
                server.handle = None;
                server.state = SendState::Closed;
            } else if ev.kind == EventKind::Writable {
                server.on_writable(&mut b.stack, now, &mut self.wbuf);
            }
            let whole = r.verifier.received() / rr.request as u64;
            while state.served < whole && server.handle.is_some() {
                state.served += 1;
                server.allow(&mut b.stack, now, &mut self.wbuf, rr.response as u64);
            }
        }
        if let Some((size, _)) = def.probe {
            // Every message whose last byte has now been read.
            let read = r.verifier.received();
            while flow.probe_read < flow.probe_sent.len()
                && read >= (flow.probe_read as u64 + 1) * size as u64
            {
                let sent = flow.probe_sent[flow.probe_read];
                flow.delays.push(now.as_nanos() - sent);
                flow.probe_read += 1;
            }
        }
        if flow.receiver.handle.is_none() {
            b.unregister(ev.socket);
            self.check_done(f);
        }
    }

    /// Accepts every pending connection on `host`'s listener.
    fn accept_all(&mut self, host: usize) {
        let Some(l) = self.listeners[host] else {
            return;
        };
        let now = self.now;
        loop {
            let b = &mut self.hosts[host];
            let h = match b.stack.accept(l) {
                Ok(h) => h,
                Err(SocketError::WouldBlock) => return,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    return;
                }
            };
            let flow = (b.stack.addresses(h).ok())
                .and_then(|(_, remote)| self.port_flow.get(&(remote.ip(), remote.port())))
                .copied()
                .filter(|&f| !self.flows[f as usize].receiver.accepted);
            let Some(f) = flow else {
                // Unknown, or a second connection from a flow's port (an old
                // duplicate a SYN cookie let in): closed.
                let _ = b.stack.close(now, h);
                continue;
            };
            b.register(h, SocketRole::Receiver(f));
            let flow = &mut self.flows[f as usize];
            if let Some(state) = flow.rr.as_mut() {
                state.server.accepted(h, now);
            }
            let r = &mut flow.receiver;
            r.accepted = true;
            r.handle = Some(h);
            let ev = SocketEvent {
                socket: h,
                kind: EventKind::Readable,
            };
            self.receiver_event(f, ev);
        }
    }

    fn check_done(&mut self, f: u32) {
        let flow = &mut self.flows[f as usize];
        let receiver_done = flow.receiver.closed || flow.receiver.error.is_some();
        if !flow.done && flow.sender.state == SendState::Closed && receiver_done {
            flow.done = true;
            self.flows_done += 1;
        }
    }
}

/// The totals of port `p`'s queue: a router's qdisc, or the sending host's NIC.
fn port_totals(hosts: &[SimHost], ports: &[Port], p: usize) -> crate::nic::QueueTotals {
    match &ports[p].queue {
        Some(q) => q.totals(),
        None => hosts[ports[p].src].nic.totals(),
    }
}

/// Flow `i`'s figures for the series: the bytes its receiver has read, and its
/// sender's `snd_cwnd` while its socket lives.
fn flow_figures(
    hosts: &[SimHost],
    t: &Topology,
    f: &NetFlow,
    i: usize,
    now: Instant,
) -> (u64, Option<u32>) {
    let stack = &hosts[t.flows[i].from].stack;
    let cwnd = (f.sender.handle)
        .and_then(|h| stack.info(now, h).ok())
        .map(|info| info.snd_cwnd);
    (f.receiver.verifier.received(), cwnd)
}
