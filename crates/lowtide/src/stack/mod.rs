//! The stack: sockets, demultiplexing, timers, and the sans-IO entry points.

use crate::config::Config;
use crate::mib::{Counters, Mib};
use crate::rng::Rng;
use crate::socket::*;
use crate::tcp::rcvqueue::Payload;
use crate::tcp::{self, Ctx, FourTuple, Listener, Tcb, TcpState};
use crate::time::Instant;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use lowtide_wire::{checksum, WireError};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use tracing::trace;

/// A connection's view of the stack, borrowing only the fields it needs (a macro, not
/// a method, so that the slot being worked on can stay borrowed at the same time).
macro_rules! ctx {
    ($stack:ident, $now:expr) => {
        Ctx {
            now: $now,
            cfg: &$stack.cfg,
            mib: &mut $stack.mib,
            out: &mut $stack.out,
            events: &mut $stack.events,
            ip_id: &mut $stack.ip_id,
            challenge: &mut $stack.challenge,
            pool: &mut $stack.pool,
            frag: &mut $stack.frag,
            tx_orphan: $stack.tx_orphan,
            tx_orphan_frags: $stack.tx_orphan_frags,
            tx_apart: $stack.tx_apart,
            death_row: $stack.death_row,
            routes: &$stack.routes,
            mem: &mut $stack.tcp_mem,
            metrics: &mut $stack.tcp_metrics,
            tx_delay_us: 0,
            rx_tos: $stack.rx_tos,
            rx_flowlabel: $stack.rx_flowlabel,
            flow_key: $stack.flow_key,
            netstamp: $stack.netstamp > 0,
        }
    };
}

mod bind;
mod connect;
mod defrag;
mod drops;
mod embed;
mod exthdrs;
mod fastopen;
mod frag6;
mod icmp;
#[cfg(test)]
pub(crate) use icmp::tests as icmp_tests;
mod icmp_out;
mod ip_input;
mod ip_output;
mod listen;
mod md5;
mod memory;
pub use memory::{RtxWork, TcpMemory};
mod netdev;
pub use netdev::{DEVICE_IFINDEX, LOOPBACK_IFINDEX};
mod options;
mod procnet;
mod recv;
mod sockapi;
#[cfg(test)]
mod testutil;
mod timewait;
pub use options::{SocketMut, SocketRef};
mod udp;
pub use bind::PortOwner;
pub use procnet::{ProcKind, ProcTcpEntry};
pub use udp::{Datagram, UdpHandle};

enum Sock {
    Listener(Box<Listener>),
    Tcp(Box<Tcb>),
    /// A connection in TIME-WAIT, or an orphan's FIN-WAIT-2, without its `Tcb`
    /// (`inet_timewait_sock`; `stack/timewait.rs`).
    TimeWait(Box<tcp::minisocks::TimeWaitSock>),
}

struct Slot {
    generation: u32,
    sock: Option<Sock>,
    /// The deadline this slot has in the timer heap, if any.
    armed: Option<Instant>,
    /// The application closed its handle; the connection lives on as an orphan.
    orphan: bool,
    /// Counted in [`Stack::death_row`] as an orphan, as a TIME-WAIT socket.
    counted: (bool, bool),
    /// The socket's `sk_wmem_queued` as [`Stack::wmem_queued`] counts it.
    wmem_counted: u64,
}

/// A TCP/IP stack: every socket of one host, driven by its caller (see the crate docs
/// for the order of calls).
pub struct Stack {
    cfg: Config,
    rng: Rng,
    addrs: Vec<IpAddr>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// The established table, keyed with the secret (`tcp/ehash.rs`).
    conns: tcp::ehash::ConnTable,
    /// Listeners by address; several as `SO_REUSEPORT` groups or on different
    /// devices, in the order `reuse->socks` keeps.
    listeners: FxHashMap<SocketAddr, Vec<u32>>,
    /// Listens so far: a listener's place in its `lhash2` bucket (stack/listen.rs).
    listen_seq: u64,
    /// The stack's device's name (stack/netdev.rs).
    device_name: String,
    /// Some socket was bound to a device (stack/netdev.rs).
    off_device: bool,
    /// Sockets whose port was bound (not picked by `connect`), per port: the
    /// `bhash` buckets `__inet_hash_connect` passes over (`stack/bind.rs`).
    bhash: FxHashMap<u16, u32>,
    timers: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    out: VecDeque<Transmit>,
    events: VecDeque<SocketEvent>,
    mib: Counters,
    ip_id: u16,
    challenge: tcp::ratelimit::ChallengeLimit,
    secrets: crate::secure::Secrets,
    /// The device orphans packets at transmit ([`Stack::set_tx_orphan`]).
    tx_orphan: bool,
    /// The device copies packets' payload ([`Stack::set_tx_orphan_frags`]).
    tx_orphan_frags: bool,
    /// Payload kept apart from the headers ([`Stack::set_tx_payload_apart`]).
    tx_apart: bool,
    /// The TOS of the segment [`Stack::tcp_rcv`] is handling, 0 outside it
    /// ([`Ctx::rx_tos`]).
    rx_tos: u8,
    /// The IPv6 flow label of the packet being taken in ([`Ctx::rx_flowlabel`]).
    rx_flowlabel: Option<u32>,
    /// [`Ctx::flow_key`], from the secret.
    flow_key: (u64, u64),
    /// `max(1, gso_segs)` of the segment this input handles (tcp/drops.rs).
    rx_segs: u32,
    /// The fixed TCP header of the segment being handled, kept when it carries a
    /// TCP-MD5 option, for its digest (stack/md5.rs).
    rx_md5_header: [u8; lowtide_wire::tcp::TCP_HEADER_LEN],
    /// Connections that want net timestamps (`netstamp_needed_key`'s count,
    /// tcp/rx_tstamp.rs).
    netstamp: u32,
    /// The catch-all listener's slot ([`Stack::listen_catch_all`]), if any.
    catch_all: Option<u32>,
    /// A warning about unfinished checksums was logged ([`Stack::handle_transmit`]).
    warned_csum_partial: bool,
    /// Buffers of sent packets, given back by the device ([`Stack::recycle_buffer`]).
    pool: lowtide_wire::pool::BufPool,
    /// Routes with metrics (`ip route ... mtu/advmss/initcwnd ...`) and the path
    /// MTUs learned from ICMP (`stack/icmp.rs`; Linux's route exceptions).
    routes: crate::route::RouteTable,
    frag: crate::tcp::page_frag::PageFrag,
    /// What finished connections left for the next ones, Fast Open cookies among
    /// it (`tcp/metrics.rs`).
    tcp_metrics: tcp::metrics::TcpMetrics,
    /// Active Fast Open's blackhole pause.
    tfo_blackhole: tcp::fastopen::Blackhole,
    /// Orphans and TIME-WAIT sockets now ([`Stack::death_row`]).
    death_row: tcp::DeathRow,
    /// Stack-wide TCP memory under `tcp_mem` ([`Stack::tcp_memory`]).
    tcp_mem: tcp::mem::TcpMem,
    /// Sum of the TCP sockets' `sk_wmem_queued`, brought up to date after each
    /// event on a socket ([`Stack::wmem_queued`]).
    wmem_queued: u64,
    /// UDP sockets (`stack/udp.rs`).
    udp: udp::UdpTable,
    /// ICMP rate limits (`stack/icmp_out.rs`).
    icmp_limits: icmp_out::IcmpLimits,
    /// IPv4 and IPv6 reassembly's queues (stack/defrag.rs, stack/frag6.rs).
    defrag: defrag::Defrag,
    defrag6: defrag::Defrag,
    /// `ip_idents` for IPv4 identifications and IPv6 fragment ids (stack/ip_output.rs).
    idents: ip_output::IpIdents,
    /// The headers of a SYN being received, for listeners that save them.
    syn_headers: tcp::saved_syn::SynHeaders,
}

impl Stack {
    /// A stack with the given configuration, seeded for its random choices (initial
    /// sequence numbers, ephemeral ports, IPv4 ids).
    pub fn new(cfg: Config, seed: u64) -> Stack {
        let mut rng = Rng::new(seed);
        let ip_id = rng.next_u32() as u16;
        // Without a secret from the caller, one from the seed: deterministic runs.
        let mut keyed = Rng::new(seed ^ 0x6528_6056_6528_6056);
        let secrets = crate::secure::Secrets::new(keyed.key(), || keyed.next_u32());
        let flow_key = secrets.flow_key();
        // Its own stream, so the stack's choices (ISNs, ports) stay as they were.
        let challenge = tcp::ratelimit::ChallengeLimit::new(seed ^ 0x5961_5961_5961_5961);
        Stack {
            cfg,
            rng,
            addrs: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            conns: tcp::ehash::ConnTable::new(secrets.ehash_key()),
            listeners: FxHashMap::default(),
            listen_seq: 0,
            device_name: "eth0".to_string(),
            off_device: false,
            bhash: FxHashMap::default(),
            timers: BinaryHeap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            mib: Counters::default(),
            ip_id,
            challenge,
            secrets,
            tx_orphan: false,
            tx_orphan_frags: false,
            tx_apart: false,
            rx_tos: 0,
            rx_flowlabel: None,
            flow_key,
            rx_segs: 1,
            rx_md5_header: [0; lowtide_wire::tcp::TCP_HEADER_LEN],
            netstamp: 0,
            catch_all: None,
            warned_csum_partial: false,
            pool: lowtide_wire::pool::BufPool::new(),
            routes: Default::default(),
            frag: Default::default(),
            tcp_metrics: Default::default(),
            tfo_blackhole: Default::default(),
            death_row: Default::default(),
            tcp_mem: Default::default(),
            wmem_queued: 0,
            udp: Default::default(),
            icmp_limits: Default::default(),
            defrag: Default::default(),
            defrag6: Default::default(),
            idents: ip_output::IpIdents::new(seed ^ 0x1d1d_1d1d_1d1d_1d1d),
            syn_headers: Default::default(),
        }
    }

    /// Adds a local address: packets to it are accepted, sockets may bind to it.
    pub fn add_address(&mut self, addr: IpAddr) {
        if !self.addrs.contains(&addr) {
            self.addrs.push(addr);
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Stack-wide counters (nstat names).
    pub fn counters(&self) -> &Counters {
        &self.mib
    }

    // ---- sans-IO entry points -------------------------------------------------------

    /// Handles one received IP packet (possibly a GRO super-packet). Malformed
    /// packets are dropped and counted; nothing here panics on hostile input.
    pub fn handle_packet(&mut self, now: Instant, packet: &[u8], csum: RxChecksum) {
        self.rcv_packet(now, packet, csum, None);
    }

    /// The next packet for the device, if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        self.next_for_device(now)
    }

    /// The device has finished with a packet from [`Stack::poll_transmit`] (TX
    /// completion). A throttled socket may send again.
    pub fn handle_tx_complete(&mut self, now: Instant, token: TxToken) {
        let Some(slot) = self.live_slot(token.index, token.generation) else {
            return;
        };
        self.with_tcb(now, slot, |tcb, ctx| tcb.on_tx_complete(ctx, &token));
    }

    /// The device (its queue) dropped a packet from [`Stack::poll_transmit`] instead
    /// of sending it, as a full qdisc returns `NET_XMIT_DROP`: a completion that is not
    /// a network loss. TCP sends the data again soon, without cutting its congestion
    /// window or backing off (see `Tcb::on_tx_dropped`).
    pub fn handle_tx_dropped(&mut self, now: Instant, token: TxToken) {
        let Some(slot) = self.live_slot(token.index, token.generation) else {
            return;
        };
        self.with_tcb(now, slot, |tcb, ctx| tcb.on_tx_dropped(ctx, &token));
    }

    /// When [`Stack::handle_timeout`] should next be called, if ever.
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        let defrag = [self.defrag.next_expiry(), self.defrag6.next_expiry()]
            .into_iter()
            .flatten()
            .min();
        while let Some(Reverse((at, index, generation))) = self.timers.peek().copied() {
            if self.is_current_timer(at, index, generation) {
                return Some(defrag.map_or(at, |d| d.min(at)));
            }
            self.timers.pop();
        }
        defrag
    }

    fn is_current_timer(&self, at: Instant, index: u32, generation: u32) -> bool {
        self.slots
            .get(index as usize)
            .is_some_and(|s| s.generation == generation && s.armed == Some(at))
    }

    /// Runs every timer due at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.defrag_timeout(now);
        while let Some(Reverse((at, index, generation))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            if !self.is_current_timer(at, index, generation) {
                continue;
            }
            self.slots[index as usize].armed = None;
            if self.timewait_expired(now, index) {
                continue;
            }
            let request = matches!(&self.slots[index as usize].sock,
                Some(Sock::Tcp(t)) if t.is_request());
            match request {
                true => self.request_timer(now, index),
                false => self.with_tcb(now, index, |tcb, ctx| tcb.on_timer(ctx)),
            }
        }
    }

    /// Keys the stack's unpredictable choices with 32 secret bytes, which a real
    /// deployment takes from the OS random source (`getrandom`): initial sequence
    /// numbers (RFC 6528), timestamp offsets, ephemeral ports (RFC 6056), and every
    /// other random draw. Call it before opening connections.
    pub fn set_secret(&mut self, key: [u8; 32]) {
        let mut keyed = Rng::from_key(key);
        self.secrets = crate::secure::Secrets::new(keyed.key(), || keyed.next_u32());
        self.conns.rekey(self.secrets.ehash_key());
        self.flow_key = self.secrets.flow_key();
        self.rng = Rng::from_key(keyed.key());
        self.challenge = tcp::ratelimit::ChallengeLimit::new(keyed.next_u64());
        self.ip_id = keyed.next_u32() as u16;
    }

    /// The next readiness event, if any.
    pub fn poll_event(&mut self) -> Option<SocketEvent> {
        self.events.pop_front()
    }

    // ---- internals ------------------------------------------------------------------

    fn alloc(&mut self, sock: Sock) -> SocketHandle {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    sock: None,
                    armed: None,
                    orphan: false,
                    counted: (false, false),
                    wmem_counted: 0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        if matches!(sock, Sock::Tcp(_) | Sock::Listener(_)) {
            self.tcp_mem.sockets += 1; // tcp_init_sock, sk_clone_lock
        }
        if matches!(&sock, Sock::Tcp(t) if t.netstamp_wanted()) {
            self.netstamp += 1; // sk_clone_lock, sock_enable_timestamp
        }
        self.bhash_account(&sock, true);
        let slot = &mut self.slots[index as usize];
        slot.generation = slot.generation.wrapping_add(1);
        slot.sock = Some(sock);
        slot.armed = None;
        slot.orphan = false;
        if let Some(Sock::Tcp(t)) = &mut slot.sock {
            t.handle = SocketHandle {
                index,
                generation: slot.generation,
            };
        }
        SocketHandle {
            index,
            generation: slot.generation,
        }
    }

    fn free_slot(&mut self, now: Instant, index: u32) {
        if let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock {
            // tcp_v4_destroy_sock, before the out-of-order queue goes.
            t.fastopen_active_disable_ofo_check();
            self.fastopen_active_blackhole(now, index);
        }
        let slot = &mut self.slots[index as usize];
        let sock = slot.sock.take();
        if let Some(sk) = &sock {
            self.bhash_account(sk, false);
        }
        if let Some(Sock::TimeWait(tw)) = &sock {
            if self.conns.get(&tw.tuple) == Some(index) {
                self.conns.remove(&tw.tuple);
            }
        }
        if matches!(sock, Some(Sock::Listener(_))) {
            self.tcp_mem.sockets -= 1;
        }
        if let Some(Sock::Tcp(mut t)) = sock {
            // tcp_v4_destroy_sock: the socket's pages go back.
            self.tcp_mem.sockets -= 1;
            // __sk_destruct: sock_disable_timestamp(sk, SK_FLAGS_TIMESTAMP).
            self.netstamp -= t.netstamp_wanted() as u32;
            t.mem_reclaim(&self.cfg, &mut self.tcp_mem, now, &mut self.mib, true);
            // A closed socket's tuple may serve a newer connection by now.
            if self.conns.get(&t.tuple) == Some(index) {
                self.conns.remove(&t.tuple);
            }
            if let Some(parent) = t.parent {
                if let Some(Sock::Listener(l)) = &mut self.slots[parent as usize].sock {
                    l.forget_child(index, t.req.young);
                }
            }
        }
        let slot = &mut self.slots[index as usize];
        slot.sock = None;
        slot.armed = None;
        slot.orphan = false;
        self.wmem_queued -= std::mem::take(&mut slot.wmem_counted);
        self.count_death_row(index);
        self.free.push(index);
    }

    /// Brings [`Stack::death_row`] up to date with the slot's socket: an orphan
    /// until it is done or in TIME-WAIT (`inet_csk_destroy_sock` uncounts it), a
    /// TIME-WAIT socket until it closes.
    fn count_death_row(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        let state = match &slot.sock {
            Some(Sock::Tcp(t)) => Some(t.state),
            Some(Sock::TimeWait(_)) => Some(TcpState::TimeWait),
            _ => None,
        };
        let tw = state == Some(TcpState::TimeWait);
        let live = state.is_some_and(|s| !matches!(s, TcpState::TimeWait | TcpState::Closed));
        let now = (slot.orphan && live, tw);
        let was = std::mem::replace(&mut slot.counted, now);
        let d = &mut self.death_row;
        d.orphans = d.orphans + now.0 as u32 - was.0 as u32;
        d.time_wait = d.time_wait + now.1 as u32 - was.1 as u32;
    }

    /// Orphans and TIME-WAIT sockets the stack holds now (`tcp_orphan_count`,
    /// `sockstat`'s "orphan" and "tw").
    pub fn death_row(&self) -> tcp::DeathRow {
        self.death_row
    }

    fn live_slot(&self, index: u32, generation: u32) -> Option<u32> {
        let s = self.slots.get(index as usize)?;
        (s.generation == generation && matches!(s.sock, Some(Sock::Tcp(_)))).then_some(index)
    }

    /// A handle the application may use: live and not closed.
    fn handle_slot(&self, h: SocketHandle) -> Result<u32, SocketError> {
        match self.slots.get(h.index as usize) {
            Some(s)
                if s.generation == h.generation
                    && matches!(s.sock, Some(Sock::Tcp(_) | Sock::Listener(_)))
                    && !s.orphan =>
            {
                Ok(h.index)
            }
            _ => Err(SocketError::BadHandle),
        }
    }

    fn user_slot(&self, h: SocketHandle) -> Result<u32, SocketError> {
        let i = self.handle_slot(h)?;
        match self.slots[i as usize].sock {
            Some(Sock::Tcp(_)) => Ok(i),
            _ => Err(SocketError::InvalidInput),
        }
    }

    fn slot_sock(&self, h: SocketHandle) -> Result<&Sock, SocketError> {
        let i = self.handle_slot(h)?;
        Ok(self.slots[i as usize].sock.as_ref().expect("checked live"))
    }

    fn tcb(&self, h: SocketHandle) -> Result<&Tcb, SocketError> {
        match self.slot_sock(h)? {
            Sock::Tcp(t) => Ok(t),
            _ => Err(SocketError::InvalidInput),
        }
    }

    fn tcb_mut(&mut self, h: SocketHandle) -> Result<&mut Tcb, SocketError> {
        let i = self.user_slot(h)?;
        match &mut self.slots[i as usize].sock {
            Some(Sock::Tcp(t)) => Ok(t),
            _ => Err(SocketError::InvalidInput),
        }
    }

    fn listener_mut(&mut self, h: SocketHandle) -> Result<&mut Listener, SocketError> {
        let i = self.handle_slot(h)?;
        match &mut self.slots[i as usize].sock {
            Some(Sock::Listener(l)) => Ok(l),
            _ => Err(SocketError::InvalidInput),
        }
    }

    /// Runs `f` on the connection in `index` with a context, then does the
    /// bookkeeping every connection event needs: timer re-arm, accept queue, freeing.
    fn with_tcb<R>(
        &mut self,
        now: Instant,
        index: u32,
        f: impl FnOnce(&mut Tcb, &mut Ctx) -> R,
    ) -> R {
        let slot = &mut self.slots[index as usize];
        let Some(Sock::Tcp(tcb)) = &mut slot.sock else {
            unreachable!("with_tcb on a non-TCP slot");
        };
        let mut ctx = ctx!(self, now);
        ctx.tx_delay_us = tcb.tx_delay;
        let r = f(tcb, &mut ctx);
        self.after_tcb(now, index);
        r
    }

    fn after_tcb(&mut self, now: Instant, index: u32) {
        let slot = &mut self.slots[index as usize];
        if let Some(Sock::Tcp(tcb)) = &mut slot.sock {
            // Pages for what was charged without asking; back what was freed.
            tcb.mem_sync(&self.cfg, &mut self.tcp_mem, now, &mut self.mib);
            let q = std::mem::replace(&mut slot.wmem_counted, tcb.wmem_queued);
            self.wmem_queued = self.wmem_queued + tcb.wmem_queued - q;
        }
        self.count_death_row(index);
        self.hash_timewait(index);
        let slot = &mut self.slots[index as usize];
        let generation = slot.generation;
        let Some(Sock::Tcp(tcb)) = &mut slot.sock else {
            return;
        };
        let t = &tcb.tfo;
        if t.released.is_some() || t.cache_update.is_some() || t.blackhole || t.active_worked {
            self.fastopen_released(now, index);
            self.fastopen_active_done(now, index);
        }
        let slot = &mut self.slots[index as usize];
        let Some(Sock::Tcp(tcb)) = &mut slot.sock else {
            return;
        };
        if tcb.state == TcpState::Closed {
            if slot.orphan || tcb.parent.is_some() && !tcb.accepted_ready {
                self.free_slot(now, index);
                return;
            }
            // tcp_set_state(TCP_CLOSE) -> unhash: the tuple is free at once; the
            // application's handle keeps the error to read.
            let tuple = tcb.tuple;
            if self.conns.get(&tuple) == Some(index) {
                self.conns.remove(&tuple);
            }
        }
        if tcb.accepted_ready && tcb.parent.is_some() && !tcb.in_accept_queue {
            tcb.in_accept_queue = true;
            let parent = tcb.parent.unwrap_or_default();
            let was_pending = (!tcb.tfo.syn_fastopen_child).then_some(tcb.req.young);
            self.child_established(parent, index, was_pending);
        }
        let slot = &mut self.slots[index as usize];
        let Some(Sock::Tcp(tcb)) = &mut slot.sock else {
            return;
        };
        tcb.sync_timers(now);
        if let Some(d) = tcb.next_deadline() {
            if slot.armed.is_none_or(|a| d < a) {
                slot.armed = Some(d);
                self.timers.push(Reverse((d, index, generation)));
            }
        }
    }

    /// `tcp_v4_rcv`: checksum, demultiplex, hand the segment to its socket.
    fn tcp_v4_rcv(&mut self, now: Instant, ip: &IpRepr, seg: &[u8], verify: bool) {
        if verify && !checksum::verify_tcp(ip.src, ip.dst, seg) {
            self.mib.inc(Mib::TcpInErrs);
            self.mib.inc(Mib::TcpInCsumErrors);
            trace!(src = %ip.src, "drop: bad TCP checksum");
            self.csum_error_drop(ip, seg);
            return self.check_csum_partial(ip, seg);
        }
        if let Some((th, hlen)) = self.parse_tcp(seg) {
            self.tcp_rcv(now, ip, &th, Payload::Flat(&seg[hlen..]));
        }
    }

    /// The TCP header at the start of `seg` and its length; a bad one is counted.
    pub(crate) fn parse_tcp(&mut self, seg: &[u8]) -> Option<(TcpRepr, usize)> {
        match TcpRepr::parse(seg) {
            Ok(x) => {
                if x.0.options.md5sig.is_some() {
                    self.rx_md5_header
                        .copy_from_slice(&seg[..lowtide_wire::tcp::TCP_HEADER_LEN]);
                }
                Some(x)
            }
            Err(e) => {
                self.mib.inc(Mib::TcpInErrs);
                if e == WireError::Malformed {
                    self.mib.inc(Mib::TcpExtTCPBadOptions);
                }
                trace!(error = %e, "drop: bad TCP header");
                None
            }
        }
    }

    /// The rest of `tcp_v4_rcv`: a parsed segment to its socket, its listener, or a
    /// reset. Its TOS stays at hand meanwhile for a reset that answers it.
    pub(crate) fn tcp_rcv(&mut self, now: Instant, ip: &IpRepr, th: &TcpRepr, payload: Payload) {
        self.rx_tos = ip.tos;
        self.tcp_rcv_segment(now, ip, th, payload);
        self.rx_tos = 0;
    }

    fn tcp_rcv_segment(&mut self, now: Instant, ip: &IpRepr, th: &TcpRepr, payload: Payload) {
        // tcp_v4_rcv counts the skb: a GRO packet as its segments, a TUN device's
        // packet (never GSO, RxAlloc::Tun) as one.
        let segs = tcp::drops::rx_gso_segs(&self.cfg, ip.src.is_ipv6(), payload.len());
        self.mib.add(Mib::TcpInSegs, segs as u64);
        self.rx_segs = segs;
        let tuple = FourTuple {
            local: SocketAddr::new(ip.dst, th.dst_port),
            remote: SocketAddr::new(ip.src, th.src_port),
        };
        // A closed socket is no longer here (`after_tcb` unhashes it as tcp_done
        // does): its peer's segments find the listener or a reset.
        if let Some(index) = self.ehash_lookup(&tuple) {
            if let Some(Sock::TimeWait(_)) = self.slots[index as usize].sock {
                return self.timewait_rcv(now, index, ip, th, payload);
            }
            self.note_listener(now, index);
            if self.min_ttl_drop(index, ip) || !self.inbound_hash(index, ip, th, &payload) {
                return self.sk_drops_skbadd(index); // discard_and_relse
            }
            let owed = self.with_tcb(now, index, |tcb, ctx| {
                tcb.rcv_segment(ctx, ip, th, payload, segs);
                (tcb.parent, std::mem::take(&mut tcb.req.listener_drops))
            });
            return self.listener_drops(owed);
        }
        if let Some(l) = self.find_listener(tuple).or(self.catch_all) {
            if self.min_ttl_drop(l, ip) || !self.inbound_hash(l, ip, th, &payload) {
                return self.sk_drops_skbadd(l); // discard_and_relse
            }
            let mut flat = Vec::new();
            let payload = payload.contiguous(&mut flat);
            return self.listen_rcv(now, l, tuple, ip, th, payload, None);
        }
        let mut flat = Vec::new();
        let payload = payload.contiguous(&mut flat);
        self.send_reset_for(now, None, (tuple, ip), th, payload);
    }

    /// Tells a child in SYN-RECV what `tcp_check_req` reads of its listener: whether
    /// the accept queue is full, `TCP_DEFER_ACCEPT`, and whether the listener would
    /// check an ACK as a cookie (tcp/check_req.rs); and a
    /// request (not a Fast Open child, which is a full socket with keys of its
    /// own) the listener's TCP-MD5 key for its peer as it is now: Linux checks a
    /// request's segments (`tcp_inbound_hash` with `req->rsk_listener`) and signs
    /// its SYN-ACKs and ACKs (`req_md5_lookup`, `tcp_v4_reqsk_send_ack`) with the
    /// listener's keys, and `tcp_v4_syn_recv_sock` copies the child's from them.
    fn note_listener(&mut self, now: Instant, index: u32) {
        let parent = match &self.slots[index as usize].sock {
            Some(Sock::Tcp(t)) if t.state == TcpState::SynRecv => t.parent,
            _ => None,
        };
        let Some(Some(Sock::Listener(l))) = parent.map(|p| &self.slots[p as usize].sock) else {
            return;
        };
        let (full, defer) = (l.accept_queue_full(), l.opts.defer_accept);
        let cookies = l.checks_cookies(now, self.cfg.tcp_syncookies);
        let queue = (l.pending, l.young, l.backlog);
        let keys = l.opts.md5.clone();
        if let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock {
            t.req.acceptq_full = full;
            t.req.cookie_check = cookies;
            t.req.defer_accept = defer;
            (t.req.qlen, t.req.young_qlen, t.req.max_ack_backlog) = queue;
            if !t.tfo.syn_fastopen_child {
                t.md5 = keys.child_copy(t.tuple.remote.ip());
            }
        }
    }

    /// A request's SYN-ACK timer (`reqsk_timer_handler`), with what it reads of the
    /// listener; its first timeout makes the request old (`queue->young`).
    fn request_timer(&mut self, now: Instant, index: u32) {
        self.note_listener(now, index);
        let before = match &self.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => t.icsk.retransmits,
            _ => return,
        };
        self.with_tcb(now, index, |tcb, ctx| tcb.on_timer(ctx));
        let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock else {
            return; // expired: free_slot settled the queue
        };
        if t.icsk.retransmits == before || !std::mem::take(&mut t.req.young) {
            return;
        }
        if let Some(Some(Sock::Listener(l))) = t.parent.map(|p| &mut self.slots[p as usize].sock) {
            l.young = l.young.saturating_sub(1);
        }
    }

    /// [RFC 9293 3.10.7.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.10.7.1): a
    /// segment for no connection, or one a listener `sk` refuses, is answered with
    /// a reset (`tcp_v4_send_reset`), signed or withheld as TCP-MD5 asks
    /// ([`Stack::reset_md5_key`]).
    fn send_reset_for(
        &mut self,
        now: Instant,
        sk: Option<u32>,
        (tuple, ip): (FourTuple, &IpRepr),
        th: &TcpRepr,
        payload: &[u8],
    ) {
        if th.flags.contains(TcpFlags::RST) {
            return;
        }
        let Some(key) = self.reset_md5_key(sk, ip, th, payload) else {
            return;
        };
        // tcp_v6_send_reset: a listener reflects the segment's label if its
        // np->repflow says so; without a socket, if flowlabel_reflect's bit 2 does.
        let reflect = match sk.map(|l| &self.slots[l as usize].sock) {
            Some(Some(Sock::Listener(l))) => l.opts.repflow.unwrap_or(false),
            _ => self.cfg.ipv6_flowlabel_reflect & tcp::flowlabel::FLOWLABEL_REFLECT_TCP_RESET != 0,
        };
        let fl = tcp::flowlabel::FlowLabel {
            label: if reflect {
                self.rx_flowlabel.unwrap_or(0)
            } else {
                0
            },
            ..Default::default()
        };
        let mut ctx = ctx!(self, now);
        tcp::reply::send_reset(&mut ctx, (tuple, fl), th, payload.len(), key.as_ref());
    }
}
