//! The event loop: hosts, links and applications advanced in virtual time.

use crate::app::{Receiver, SendState, Sender, WriteBuf};
use crate::cpu::CpuState;
use crate::device::{classify, device_queue, host_config};
use crate::host::{SimHost, SocketRole};
use crate::hostile::{
    hostile_links, to_hostile, HostilePeer, HOSTILE_ADDR, HOSTILE_RX, HOSTILE_TX,
};
use crate::intervals::IntervalSampler;
use crate::nic::NO_FLOW;
use crate::payload::splitmix64;
use crate::sample::{auto_interval, MemorySampler};
use crate::scenario::{ProgressHook, RunProgress, Scenario, SimError, TxCompletion, Workload};
use crate::sk_backlog::{tcp_add_backlog_limit, SockLimit};
use crate::timeseries::{FlowSample, Grid, HostSample, Timeseries};
use lowtide::{EventKind, Instant, SocketError, SocketEvent, SocketHandle, Stack, Transmit};
use lowtide_link::EventQueue;
use lowtide_link::PcapSink;
use lowtide_link::WireSeg;
use lowtide_link::{LinkDir, Pipe};
use lowtide_wire::{gso, tcp::four_tuple_apart};
use rustc_hash::FxHashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// The receivers' listening port (netperf's 12865 data port is random; iperf's 5001).
pub const LISTEN_PORT: u16 = 5001;
/// Host A (senders).
pub const HOST_A: usize = 0;
/// Host B (receivers).
pub const HOST_B: usize = 1;

/// Something that happens at a point in virtual time.
pub(crate) enum Event {
    /// Flow `flow` connects.
    Start { flow: u32 },
    /// `host`'s NAPI poll runs.
    RxPoll { host: u32 },
    /// `host`'s NIC finished serializing its current packet.
    TxDone { host: u32 },
    /// `host`'s stack timer may be due.
    Timer { host: u32 },
    /// Host A's modeled CPU may be free for the next backlogged packet.
    CpuFree,
    /// `host`'s qdisc may release a packet it held back (its watchdog), or it
    /// dropped queued packets whose TX completions may let the sender go on.
    QdiscWake { host: u32 },
    /// The hostile peer's turn ([`crate::hostile`]).
    Hostile,
    /// The measured time is over.
    Stop,
}

/// One flow's two applications.
pub(crate) struct Flow {
    pub sender: Sender,
    pub receiver: Receiver,
    /// Both ends finished (counted in `World::flows_done`).
    pub done: bool,
    /// RSTs without ACK the receiving host sent to this flow's port: answers to a
    /// segment no connection of the receiver matched (its listener's, e.g. after a
    /// failed SYN cookie check), not a connection's own reset (RST+ACK).
    pub listener_resets: u32,
}

/// Everything a run holds.
pub(crate) struct World {
    pub hosts: Vec<SimHost>,
    pub links: Vec<LinkDir>,
    /// For each link direction, the segments propagating on it.
    pub pipes: Vec<Pipe>,
    /// For each link direction, the host it delivers to.
    pub link_dst: Vec<usize>,
    pub flows: Vec<Flow>,
    pub queue: EventQueue<Event>,
    pub pcap: Option<PcapSink>,
    pub gro: bool,
    /// When the devices give TX completions back ([`TxCompletion`]).
    pub tx_completion: TxCompletion,
    pub rx_usecs_ns: u64,
    pub listener: Option<SocketHandle>,
    /// Sender ephemeral port -> flow, to match accepted sockets to flows.
    pub port_flow: FxHashMap<u16, u32>,
    /// Connections accepted from a flow's port after its own one (closed, counted).
    pub stray_connections: u64,
    pub wbuf: WriteBuf,
    pub events: u64,
    /// Flows whose both ends are finished (fixed-size transfers).
    pub flows_done: u32,
    /// Flows whose connection was established.
    pub flows_connected: u32,
    /// iperf3's interval reports, if asked for.
    pub intervals: Option<IntervalSampler>,
    /// `TCP_NOTSENT_LOWAT` for every sending socket.
    pub notsent_lowat: Option<u32>,
    /// Host A's TCP memory on the sampling grid.
    pub memory: MemorySampler,
    /// Bulk runs: the middle of the measuring time, and each flow's delivered bytes
    /// there (for Jain's index over the last half).
    pub half_ns: Option<u64>,
    pub half_bytes: Option<Vec<u64>>,
    /// The time-series grid, if asked for, and whether it has flow rows.
    pub ts_grid: Option<(Grid, bool)>,
    pub timeseries: Timeseries,
    /// `SO_SNDBUF` for every sending socket.
    pub sndbuf: Option<u32>,
    /// `SO_RCVBUF` for every sending socket.
    pub sender_rcvbuf: Option<u32>,
    pub progress: Option<ProgressHook>,
    /// Host A's CPU cost model, if the scenario has one.
    pub cpu: Option<CpuState>,
    /// Perturbs the flow hash the qdiscs see (`skb_get_hash`'s random key).
    pub hash_seed: u64,
    /// The hostile peer beside the flows, if the scenario has one, and its pending
    /// turn.
    pub hostile: Option<HostilePeer>,
    pub hostile_at: Option<Instant>,
    pub now: Instant,
}

/// Events between two calls of the progress hook.
const PROGRESS_EVERY: u64 = 1 << 16;

fn addr(host: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + host as u8))
}

/// A sub-seed for one component, so that the streams are independent.
pub(crate) fn derive_seed(seed: u64, component: u64) -> u64 {
    splitmix64(seed ^ splitmix64(component.wrapping_mul(0x1000_0000_01b3)))
}

impl World {
    pub fn new(sc: &Scenario) -> Result<World, SimError> {
        if sc.flows == 0 {
            return Err(SimError::Invalid("at least one flow is needed".into()));
        }
        if sc.link_ab.rate_bps == 0 || sc.link_ba.rate_bps == 0 {
            return Err(SimError::Invalid("link rate must be positive".into()));
        }
        let pcap = match &sc.pcap {
            Some(p) => {
                Some(PcapSink::create(p).map_err(|e| SimError::Invalid(format!("pcap {e}")))?)
            }
            None => None,
        };
        let hosts = (0..2)
            .map(|i| {
                let stack = Stack::new(host_config(sc, i), derive_seed(sc.seed, 1 + i as u64));
                let mut h = SimHost::new(stack, addr(i), sc.queue_limit, i);
                h.nic = device_queue(sc, i);
                h.rx_csum_valid =
                    !sc.verify_checksums && sc.link_ab.corrupt == 0.0 && sc.link_ba.corrupt == 0.0;
                // Link direction 0 is A->B, 1 is B->A: host i receives on 1 - i.
                h.rx_links.push(1 - i);
                h
            })
            .collect::<Vec<_>>();
        let mut hosts = hosts;
        let mut pipes = vec![Pipe::for_config(&sc.link_ab), Pipe::for_config(&sc.link_ba)];
        let mut links = vec![
            LinkDir::new(sc.link_ab.clone(), derive_seed(sc.seed, 101)),
            LinkDir::new(sc.link_ba.clone(), derive_seed(sc.seed, 102)),
        ];
        if sc.hostile.is_some() {
            // The peer's own path into B and back (crate::hostile).
            let (l, p) = hostile_links(sc.link_ab.delay_ns, derive_seed(sc.seed, 103));
            links.extend(l);
            pipes.extend(p);
            hosts[HOST_B].rx_links.push(HOSTILE_TX);
        }
        let limit = match sc.workload {
            Workload::Bulk { .. } => None,
            Workload::Bytes { bytes, .. } => Some(bytes),
        };
        let flows = (0..sc.flows)
            .map(|f| Flow {
                sender: Sender::new(sc.seed, f, limit).with_mode(sc.payload),
                receiver: Receiver::new(sc.seed, f, limit),
                done: false,
                listener_resets: 0,
            })
            .collect();
        Ok(World {
            hosts,
            links,
            pipes,
            link_dst: vec![HOST_B, HOST_A, HOST_B, usize::MAX],
            flows,
            queue: EventQueue::new(),
            pcap,
            gro: sc.gro,
            tx_completion: sc.tx_completion,
            rx_usecs_ns: sc.rx_usecs_ns,
            listener: None,
            port_flow: FxHashMap::default(),
            stray_connections: 0,
            wbuf: WriteBuf::default(),
            events: 0,
            flows_done: 0,
            flows_connected: 0,
            intervals: match sc.report_interval_ns {
                0 => None,
                ns => Some(IntervalSampler::new(ns)),
            },
            notsent_lowat: sc.notsent_lowat,
            memory: MemorySampler::new(match sc.sample_interval_ns {
                0 => auto_interval(sc.link_ab.delay_ns + sc.link_ba.delay_ns),
                ns => ns,
            }),
            half_ns: match sc.workload {
                crate::scenario::Workload::Bulk { duration_ns } => Some(duration_ns / 2),
                crate::scenario::Workload::Bytes { .. } => None,
            },
            half_bytes: None,
            ts_grid: sc
                .timeseries
                .map(|t| (Grid::new(t.interval_ns), t.per_flow)),
            timeseries: Timeseries {
                interval_us: sc.timeseries.map_or(0.0, |t| t.interval_ns as f64 / 1e3),
                ..Timeseries::default()
            },
            sndbuf: sc.sndbuf,
            sender_rcvbuf: sc.sender_rcvbuf,
            progress: sc.progress.clone(),
            cpu: sc.cpu.map(|m| CpuState::new(m, sc.config.rtx_queue)),
            hash_seed: derive_seed(sc.seed, 301),
            hostile: None,
            hostile_at: None,
            now: Instant::ZERO,
        })
    }

    /// Opens the listener and schedules the flows' starts and the stop.
    pub fn setup(&mut self, sc: &Scenario) -> Result<(), SimError> {
        let b = &mut self.hosts[HOST_B];
        let local = SocketAddr::new(b.addr, LISTEN_PORT);
        let backlog = sc.flows.max(128);
        let l = b
            .stack
            .listen(local, backlog)
            .map_err(|e| SimError::Invalid(format!("listen: {e}")))?;
        b.register(l, SocketRole::Listener);
        self.listener = Some(l);
        for f in 0..sc.flows {
            let jitter = match sc.start_jitter_ns {
                0 => 0,
                j => splitmix64(derive_seed(sc.seed, 401 + f as u64)) % (j + 1),
            };
            self.queue.push(
                Instant(f as u64 * sc.stagger_ns + jitter),
                Event::Start { flow: f },
            );
        }
        if let Workload::Bulk { duration_ns } = sc.workload {
            self.queue.push(Instant(duration_ns), Event::Stop);
        }
        if let Some(attack) = sc.hostile {
            let backlog = backlog.min(sc.config.somaxconn);
            let seed = derive_seed(sc.seed, 501);
            self.hostile = Some(HostilePeer::new(attack, seed, sc.flows, backlog, sc.gro));
            self.arm_hostile();
        }
        Ok(())
    }

    /// Processes events until the stop, the end of every flow, the time limit, or
    /// an empty queue. Returns why it stopped.
    pub fn run_loop(&mut self, time_limit: Option<Instant>) -> StopReason {
        while let Some((at, ev)) = self.queue.pop() {
            if time_limit.is_some_and(|l| at > l) {
                self.now = time_limit.unwrap_or(at);
                return StopReason::TimeLimit;
            }
            if self.memory.due(at.as_nanos()) {
                self.sample_memory(at);
            }
            if self
                .ts_grid
                .as_ref()
                .is_some_and(|(g, _)| g.due(at.as_nanos()))
            {
                self.sample_timeseries(at);
            }
            if (self.intervals.as_ref()).is_some_and(|s| s.grid.due(at.as_nanos())) {
                self.sample_intervals(at);
            }
            self.now = at;
            self.events += 1;
            if self.events.is_multiple_of(PROGRESS_EVERY) {
                if let Some(p) = &self.progress {
                    (p.0)(&RunProgress {
                        virtual_ns: at.as_nanos(),
                        flows: self.flows.len() as u32,
                        flows_connected: self.flows_connected,
                        flows_done: self.flows_done,
                        bytes_delivered: (self.flows.iter())
                            .map(|f| f.receiver.verifier.received())
                            .sum(),
                    });
                }
            }
            match ev {
                Event::Stop => return StopReason::Stopped,
                Event::Start { flow } => self.start_flow(flow),
                Event::RxPoll { host } => self.rx_poll(host as usize),
                Event::TxDone { host } => self.tx_done(host as usize),
                Event::Timer { host } => self.timer(host as usize),
                Event::CpuFree => self.cpu_run(),
                Event::QdiscWake { host } => self.qdisc_wake(host as usize),
                Event::Hostile => self.hostile_event(),
            }
            if time_limit.is_some()
                && self.flows_done == self.flows.len() as u32
                && self.hostile_done()
            {
                return StopReason::AllDone;
            }
        }
        StopReason::Idle
    }

    /// Records host A's TCP memory (as the last event left it) for the sampling grid
    /// points before `until`.
    pub fn sample_memory(&mut self, until: Instant) {
        // The stack keeps both sums (one pass over 10,000 sockets per sample cost
        // 18 % of a 10,000-flow run).
        let stack = &self.hosts[HOST_A].stack;
        let (pages, wmem_queued) = (stack.tcp_memory_allocated(), stack.wmem_queued());
        self.memory.record(until.as_nanos(), pages, wmem_queued);
        if self.half_bytes.is_none() && self.half_ns.is_some_and(|h| until.as_nanos() >= h) {
            let b = self
                .flows
                .iter()
                .map(|f| f.receiver.verifier.received())
                .collect();
            self.half_bytes = Some(b);
        }
    }

    /// Records the time-series rows (the state the last event left) for the grid
    /// points before `until`.
    pub fn sample_timeseries(&mut self, until: Instant) {
        let Some((grid, per_flow)) = self.ts_grid.as_mut() else {
            return;
        };
        let per_flow = *per_flow;
        let points: Vec<u64> = grid.take_due(until.as_nanos()).collect();
        if points.is_empty() {
            return;
        }
        let a = &self.hosts[HOST_A];
        let host = |t: u64| HostSample {
            time_us: t / 1_000,
            tcp_mem_pages: a.stack.tcp_memory_allocated(),
            wmem_queued: a.stack.wmem_queued(),
            dev_queue_bytes: a.nic.bytes(),
            wakeups: self.flows.iter().map(|f| f.sender.wakeups).sum(),
            delivered_bytes: self
                .flows
                .iter()
                .map(|f| f.receiver.verifier.received())
                .sum(),
            cpu: self.cpu.as_ref().map(|c| c.sample(t)),
        };
        let rows: Vec<HostSample> = points.iter().map(|&t| host(t)).collect();
        let flows: Vec<FlowSample> = match per_flow {
            true => self.flow_samples(&points),
            false => Vec::new(),
        };
        self.timeseries.host.extend(rows);
        self.timeseries.flows.extend(flows);
    }

    /// Records every sender's iperf3 figures (as the last event left them) for the
    /// interval grid points before `until`.
    pub fn sample_intervals(&mut self, until: Instant) {
        let Some(s) = self.intervals.as_mut() else {
            return;
        };
        let points: Vec<u64> = s.grid.take_due(until.as_nanos()).collect();
        if points.is_empty() {
            return;
        }
        let a = &self.hosts[HOST_A].stack;
        let now = self.now;
        let state: Vec<_> = (self.flows.iter())
            .map(|f| f.sender.point(a, now))
            .collect();
        for t in points.into_iter().filter(|&t| t > 0) {
            s.points.push((t, state.clone()));
        }
    }

    /// One row per grid point and live sending socket.
    fn flow_samples(&self, points: &[u64]) -> Vec<FlowSample> {
        let a = &self.hosts[HOST_A];
        let mut out = Vec::new();
        for &t in points {
            for f in &self.flows {
                let Some(h) = f.sender.handle else { continue };
                let Ok(i) = a.stack.info(self.now, h) else {
                    continue;
                };
                let peer = (f.receiver.handle)
                    .and_then(|r| self.hosts[HOST_B].stack.info(self.now, r).ok());
                let dev = a.nic.flow_bytes(f.sender.flow);
                out.push(FlowSample::from_info(
                    t / 1_000,
                    f.sender.flow,
                    &i,
                    dev,
                    peer.as_ref(),
                ));
            }
        }
        out
    }

    fn start_flow(&mut self, flow: u32) {
        let now = self.now;
        let a = &mut self.hosts[HOST_A];
        let local = SocketAddr::new(a.addr, 0);
        let remote = SocketAddr::new(addr(HOST_B), LISTEN_PORT);
        let s = &mut self.flows[flow as usize].sender;
        s.started_at = now;
        match a.stack.connect(now, local, remote) {
            Ok(h) => {
                a.register(h, SocketRole::Sender(flow));
                s.handle = Some(h);
                if let Some(bytes) = self.notsent_lowat {
                    s.set_notsent_lowat(&mut a.stack, now, bytes);
                }
                if let Some(bytes) = self.sndbuf {
                    // setsockopt(SO_SNDBUF) before connect, as netperf -s does.
                    if let Err(e) = a.stack.socket(h).set_sndbuf(now, bytes) {
                        tracing::warn!("flow {flow}: SO_SNDBUF refused: {e}");
                    }
                }
                if let Some(bytes) = self.sender_rcvbuf {
                    if let Err(e) = a.stack.socket(h).set_rcvbuf(bytes) {
                        tracing::warn!("flow {flow}: SO_RCVBUF refused: {e}");
                    }
                }
                if let Ok((l, _)) = a.stack.addresses(h) {
                    self.port_flow.insert(l.port(), flow);
                    s.local_port = l.port();
                }
            }
            Err(e) => {
                s.error = Some(e);
                s.state = SendState::Closed;
            }
        }
        self.service(HOST_A);
    }

    /// The NAPI poll of `host`: every segment arrived by now, as one batch.
    fn rx_poll(&mut self, host: usize) {
        let now = self.now;
        if self.hosts[host].rx_poll_at != Some(now) {
            return; // stale: re-armed earlier
        }
        let h = &mut self.hosts[host];
        h.rx_poll_at = None;
        for &li in &h.rx_links {
            while let Some(pkt) = self.pipes[li].pop_arrived(now.as_nanos()) {
                h.rx_ring.push(pkt);
            }
        }
        if host == HOST_A && self.cpu.is_some() {
            self.enqueue_backlog();
        } else {
            h.napi_poll(now, self.gro);
            self.return_spent(host);
            self.service(host);
            if let Some(peer) = self.hostile.as_mut().filter(|_| host == HOST_B) {
                peer.check(now, &self.hosts[HOST_B].stack);
            }
        }
        self.arm_rx_poll(host);
    }

    /// Gives the buffers of the packets `host` received back to the stack of the host
    /// that sent them (the other one), whose pool builds its next packets in them.
    fn return_spent(&mut self, host: usize) {
        let mut spent = std::mem::take(&mut self.hosts[host].spent);
        let sender = &mut self.hosts[1 - host].stack;
        for buf in spent.drain(..) {
            sender.recycle_buffer(buf);
        }
        self.hosts[host].spent = spent;
    }

    /// With a CPU model: host A's arrivals wait for its CPU, in their socket's
    /// backlog while it is owned (merged into its tail or dropped when it is full,
    /// [`crate::sk_backlog`]), then the CPU takes what it can.
    fn enqueue_backlog(&mut self) {
        let now = self.now.as_nanos();
        let ring = std::mem::take(&mut self.hosts[HOST_A].rx_ring);
        let verify = self.hosts[HOST_A].rx_checksum() == lowtide::RxChecksum::Verify;
        for seg in ring {
            let pkt = seg.flatten();
            let limit = self.backlog_limit(&pkt);
            if let Some(cpu) = self.cpu.as_mut() {
                cpu.add_backlog(now, pkt, verify, || limit);
            }
        }
        self.cpu_run();
    }

    /// `tcp_add_backlog`'s budget of the sending socket `pkt` is for (by its
    /// destination port): its limit and `sk_rmem_alloc`.
    fn backlog_limit(&self, pkt: &[u8]) -> Option<SockLimit> {
        let (_, local) = lowtide_wire::tcp::four_tuple(pkt).ok()?;
        let flow = *self.port_flow.get(&local.port())?;
        let h = self.flows.get(flow as usize)?.sender.handle?;
        let i = self.hosts[HOST_A].stack.info(self.now, h).ok()?;
        Some(SockLimit {
            limit: tcp_add_backlog_limit(i.rcvbuf, i.sndbuf),
            rmem_alloc: i.rmem_alloc,
        })
    }

    /// Processes backlogged packets while host A's CPU is free, charging each the
    /// work the stack reports, and schedules the next look when it is busy.
    fn cpu_run(&mut self) {
        let now = self.now.as_nanos();
        if self.cpu.as_ref().is_some_and(|c| c.wake_at == Some(now)) {
            if let Some(c) = self.cpu.as_mut() {
                c.wake_at = None;
            }
        }
        while let Some(pkt) = self.cpu.as_mut().and_then(|c| c.next_packet(now)) {
            let before = self.hosts[HOST_A].stack.rtx_work();
            let h = &mut self.hosts[HOST_A];
            let csum = h.rx_checksum();
            h.stack.handle_packet(self.now, &pkt, csum);
            h.spent.push(pkt);
            let after = h.stack.rtx_work();
            self.return_spent(HOST_A);
            if let Some(c) = self.cpu.as_mut() {
                let nodes = after.nodes_visited.saturating_sub(before.nodes_visited);
                let blocks = after.sack_blocks.saturating_sub(before.sack_blocks);
                c.charge_in(now, nodes, blocks, before.queue_skbs);
            }
            self.service(HOST_A);
        }
        let Some(c) = self.cpu.as_mut() else { return };
        if !c.backlog.is_empty() && c.wake_at.is_none_or(|w| w > c.busy_until) {
            c.wake_at = Some(c.busy_until);
            self.queue.push(Instant(c.busy_until), Event::CpuFree);
        }
    }

    /// Schedules `host`'s NAPI poll one coalescing window after the earliest
    /// segment still propagating towards it, unless an earlier poll is pending.
    pub(crate) fn arm_rx_poll(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        let first = h
            .rx_links
            .iter()
            .filter_map(|&li| self.pipes[li].head_time())
            .min();
        let Some(first) = first else { return };
        let at = Instant(first + self.rx_usecs_ns);
        if h.rx_poll_at.is_none_or(|cur| at < cur) {
            h.rx_poll_at = Some(at);
            self.queue.push(at, Event::RxPoll { host: host as u32 });
        }
    }

    fn tx_done(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        h.tx_busy = false;
        if let Some(token) = h.tx_owed.take() {
            h.stack.handle_tx_complete(self.now, token);
        }
        self.service(host);
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

    /// After anything touched `host`: readiness to the applications and packets to
    /// the NIC until both are quiet, then the transmitter and the timer.
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
        let classifies = self.hosts[host].nic.classifies();
        // The addresses, read once: host A's packets are attributed to flows by
        // their source port (for the per-flow device queue figures), and a
        // classifying qdisc sorts by them.
        let tuple = match host == HOST_A || classifies {
            true => four_tuple_apart(&tx.packet, tx.payload.len()).ok(),
            false => None,
        };
        let flow = match host {
            HOST_A => tuple
                .and_then(|(src, _)| self.port_flow.get(&src.port()).copied())
                .unwrap_or(NO_FLOW),
            _ => NO_FLOW,
        };
        if host == HOST_A {
            if let Some(c) = self.cpu.as_mut() {
                c.charge_out(self.now.as_nanos());
            }
        }
        let h = &mut self.hosts[host];
        let result = match classifies {
            false => h.nic.enqueue_flow(self.now, tx, flow),
            true => {
                let skb = classify(tx, flow, tuple, self.now, self.hash_seed);
                h.nic.enqueue_skb(self.now, skb)
            }
        };
        if let Err(tx) = result {
            // NET_XMIT_DROP (a full pfifo): a local drop, not a network loss.
            h.stack.handle_tx_dropped(self.now, tx.token);
        }
        self.complete_freed(host);
    }

    /// TX completions of packets the qdisc dropped after taking them (as
    /// `kfree_skb` runs their destructor); a service pass lets their senders go on.
    fn complete_freed(&mut self, host: usize) {
        let (now, h) = (self.now, &mut self.hosts[host]);
        let mut any = false;
        for tx in h.nic.take_freed() {
            h.stack.handle_tx_complete(now, tx.token);
            any = true;
        }
        if any {
            self.arm_qdisc_wake(host, now);
        }
    }

    /// Schedules `host`'s qdisc watchdog at `at`, unless one is due earlier.
    fn arm_qdisc_wake(&mut self, host: usize, at: Instant) {
        let h = &mut self.hosts[host];
        if h.qdisc_wake_at.is_none_or(|cur| at < cur) {
            h.qdisc_wake_at = Some(at);
            self.queue.push(at, Event::QdiscWake { host: host as u32 });
        }
    }

    fn qdisc_wake(&mut self, host: usize) {
        if self.hosts[host].qdisc_wake_at == Some(self.now) {
            self.hosts[host].qdisc_wake_at = None;
        }
        self.service(host);
    }

    fn arm_timer(&mut self, host: usize) {
        let h = &mut self.hosts[host];
        let Some(t) = h.stack.poll_timeout() else {
            return;
        };
        let t = t.max(self.now);
        // One pending timer event per host: a later deadline is found by the
        // pending (earlier) event, which re-arms; only an earlier one needs a new event.
        if h.timer_at.is_none_or(|cur| t < cur) {
            h.timer_at = Some(t);
            self.queue.push(t, Event::Timer { host: host as u32 });
        }
    }

    /// Dequeues the head packet, puts its wire segments on the link back to back
    /// (into the link's pipe, with their arrival times) and schedules the packet's
    /// TX completion and the receiver's NAPI poll.
    fn start_tx(&mut self, host: usize) {
        let now = self.now;
        let dequeued = self.hosts[host].nic.dequeue(now);
        self.complete_freed(host);
        let Some(mut tx) = dequeued else {
            // A qdisc holding packets back (fq's pacing) says when to look again.
            if let Some(at) = self.hosts[host].nic.next_ready().filter(|&t| t > now) {
                self.arm_qdisc_wake(host, at);
            }
            return;
        };
        // The device makes a pattern socket's payload now that it sends the packet
        // (a queued packet held its headers only).
        self.hosts[host].stack.make_tx_payload(&mut tx);
        if tx.gso_segs <= 1 {
            tx.flatten();
        }
        // B's packets to the hostile peer (or the addresses it spoofed) take its path.
        let hostile = host == HOST_B && self.hostile.is_some() && to_hostile(&tx.packet);
        if host == HOST_B && tx.gso_segs <= 1 && !hostile {
            let flow = rst_without_ack_dst(&tx.packet).and_then(|p| self.port_flow.get(&p));
            if let Some(&f) = flow {
                self.flows[f as usize].listener_resets += 1;
            }
        }
        let li = match hostile {
            true => HOSTILE_RX,
            false => self.hosts[host].tx_link,
        };
        let dst = self.link_dst[li];
        // A receiver that trusts its checksums (no link corrupts) never reads them, and
        // without a capture nobody else does: the segments stay CHECKSUM_PARTIAL, as
        // Linux's GSO segments crossing veth (the pcap gets complete ones). The
        // hostile peer reads no checksum.
        let trusts = self.hosts.get(dst).is_some_and(|h| h.rx_csum_valid);
        let full_csum = !trusts || self.pcap.is_some();
        // A receiver whose GRO keeps payload apart never puts a segment in one buffer:
        // its headers get a tiny buffer, else one with room for the whole segment.
        let apart = self.gro && trusts;
        let head_len = tx.packet.len();
        let (link, pipe, pcap) = (&mut self.links[li], &mut self.pipes[li], &mut self.pcap);
        let stack = &mut self.hosts[host].stack;
        let mut last_end = now.as_nanos();
        let mut put = |seg: WireSeg| {
            let (start, end) = link.serialize(now.as_nanos(), seg.len());
            if let Some(p) = pcap.as_mut() {
                p.write_parts(Instant(start), &seg.head, &seg.body);
            }
            last_end = end;
            link.propagate(end, seg, |at, pkt| pipe.push(at, pkt));
        };
        let token = tx.token;
        if tx.gso_segs <= 1 {
            put(WireSeg::whole(match full_csum {
                true => finish_checksum(tx.packet),
                false => tx.packet,
            }));
        } else {
            // Each segment's headers in a buffer of the sender's pool (the receiver
            // gives it back), its payload a slice of the super-packet's: no copy.
            let take = |len| stack.take_buffer(if apart { head_len } else { len });
            let (hdr, payload) = (&tx.packet, &tx.payload.to_bytes());
            let cut = |head, range| {
                let body = payload.slice(range);
                put(WireSeg { head, body })
            };
            if gso::segment_headers_into(hdr, payload, tx.gso(), full_csum, take, cut).is_err() {
                tracing::warn!("unsegmentable packet from host {host}: dropped");
            }
            // The NIC is done with the super-packet: its buffer builds the next one.
            self.hosts[host].stack.recycle_buffer(tx.packet);
        }
        self.hosts[host].tx_busy = true;
        self.queue
            .push(Instant(last_end), Event::TxDone { host: host as u32 });
        match hostile {
            true => self.arm_hostile(),
            false => self.arm_rx_poll(dst),
        }
        match self.tx_completion {
            TxCompletion::Wire => self.hosts[host].tx_owed = Some(token),
            TxCompletion::Dequeue => {
                // The driver orphaned the skb: TSQ may send again at once.
                self.hosts[host].stack.handle_tx_complete(now, token);
                self.service(host);
            }
        }
    }

    fn dispatch(&mut self, host: usize, ev: SocketEvent) {
        match self.hosts[host].role(ev.socket) {
            Some(SocketRole::Sender(f)) => self.sender_event(f, ev),
            Some(SocketRole::Receiver(f)) => self.receiver_event(f, ev),
            Some(SocketRole::Listener) => self.accept_all(),
            Some(SocketRole::Hostile) | None => {}
        }
    }

    fn sender_event(&mut self, f: u32, ev: SocketEvent) {
        let (now, a) = (self.now, &mut self.hosts[HOST_A]);
        let s = &mut self.flows[f as usize].sender;
        if ev.kind == EventKind::Connected && s.connected_at.is_none() {
            self.flows_connected += 1;
        }
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

    fn receiver_event(&mut self, f: u32, ev: SocketEvent) {
        let (now, b) = (self.now, &mut self.hosts[HOST_B]);
        let r = &mut self.flows[f as usize].receiver;
        match ev.kind {
            EventKind::Readable | EventKind::ReadHangUp => r.on_readable(&mut b.stack, now),
            EventKind::Error(e) => r.fail(&mut b.stack, now, e),
            _ => {}
        }
        if r.handle.is_none() {
            b.unregister(ev.socket);
            self.check_done(f);
        }
    }

    /// Accepts every pending connection and reads what already arrived on it.
    fn accept_all(&mut self) {
        let Some(l) = self.listener else { return };
        let now = self.now;
        loop {
            let b = &mut self.hosts[HOST_B];
            let h = match b.stack.accept(l) {
                Ok(h) => h,
                Err(SocketError::WouldBlock) => return,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    return;
                }
            };
            let remote = b.stack.addresses(h).ok().map(|(_, r)| r);
            if let Some(peer) = (self.hostile.as_mut())
                .filter(|_| remote.is_some_and(|r| r.ip() == IpAddr::V4(HOSTILE_ADDR)))
            {
                // The hostile peer's connection: held, never read.
                b.register(h, SocketRole::Hostile);
                peer.victims.push(h);
                continue;
            }
            let flow = remote.and_then(|r| self.port_flow.get(&r.port()).copied());
            let Some(f) = flow else {
                tracing::warn!("accepted a connection from an unknown port");
                let _ = b.stack.close(now, h);
                continue;
            };
            if self.flows[f as usize].receiver.accepted {
                // Each client port opens one connection. A second one from the same
                // port is an old duplicate that a SYN cookie let in after the first
                // closed (`tcp_v4_cookie_check` accepts it as Linux does): a new
                // connection, not more of the finished stream.
                tracing::warn!(flow = f, "stray second connection from a flow's port");
                self.stray_connections += 1;
                let _ = b.stack.close(now, h);
                continue;
            }
            b.register(h, SocketRole::Receiver(f));
            self.flows[f as usize].receiver.accepted = true;
            self.flows[f as usize].receiver.handle = Some(h);
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

/// Completes the TCP checksum of a single-segment packet in place (the NIC's
/// checksum offload), avoiding the copy a one-segment [`gso::segment`] makes.
fn finish_checksum(mut pkt: Vec<u8>) -> Vec<u8> {
    if gso::finish_checksum(&mut pkt).is_err() {
        tracing::warn!("packet without a TCP header sent as is");
    }
    pkt
}

/// Why the event loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StopReason {
    /// The measured time ended (bulk).
    Stopped,
    /// Every flow finished (fixed-size transfers).
    AllDone,
    /// The safety cap on simulated time was hit.
    TimeLimit,
    /// Nothing left to happen.
    Idle,
}

/// The destination port of `pkt` if it is a TCP RST without ACK (`tcp_v4_send_reset`
/// for a segment that carried an ACK: how a listener or a closed port answers).
fn rst_without_ack_dst(pkt: &[u8]) -> Option<u16> {
    let (hlen, proto) = match pkt.first()? >> 4 {
        4 => ((pkt[0] & 0xf) as usize * 4, *pkt.get(9)?),
        6 => (40, *pkt.get(6)?),
        _ => return None,
    };
    let tcp = pkt.get(hlen..hlen + 14).filter(|_| proto == 6)?;
    let flags = tcp[13];
    (flags & 0x04 != 0 && flags & 0x10 == 0).then(|| u16::from_be_bytes([tcp[2], tcp[3]]))
}
