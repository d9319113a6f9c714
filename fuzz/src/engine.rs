//! The engine: a [`Stack`] (the victim, 10.0.0.2) driven into one TCP state by a
//! scripted peer (10.0.0.1), then fed arbitrary segments, timer expiries and socket
//! calls.
//!
//! Input layout:
//! - byte 0: the starting state ([`Start`], `byte % 11`) and, in its high bits, the
//!   victim's configuration (SACK, timestamps, window scaling off, the list
//!   retransmit queue);
//! - byte 1: the congestion control (`% 3`: reno, cubic, bbr) and the options of the
//!   peer's SYN (timestamps, SACK-permitted, window scale, MSS);
//! - both together (`byte 0 ^ byte 1`, `Ecn`): the victim's `net.ipv4.tcp_ecn` (0
//!   to 5: classic ECN and Accurate ECN) and what the peer's SYN or SYN-ACK asks
//!   (nothing, ECE and CWR, or AccECN's AE, CWR and ECE);
//! - then 12-byte records (`Record`): a segment, a jump in time, a socket call, or a
//!   burst of a hostile shape (issue 27: tiny segments with gaps filling the window,
//!   overlapping segments each starting lower than the last, a flood of SYNs from
//!   other ports).
//!
//! A segment's sequence and acknowledgment numbers are offsets from the connection's
//! real ones (the victim's last ACK or the peer's own next sequence; the victim's
//! highest sequence sent), so short inputs reach deep states: SACK recovery, zero
//! windows, FIN handling, PAWS.

use crate::Bytes;
use lowtide::mib::Mib;
use lowtide::tcp::md5::{Md5Cmd, Md5Key};
use lowtide::tcp::skbuff::{alloc_truesize, SKB_MAX_ORDER0};
use lowtide::{Config, Instant, RxChecksum, Shutdown, SocketHandle, Stack};
use lowtide_wire::checksum;
use lowtide_wire::ip::{IpRepr, PROTO_TCP};
use lowtide_wire::tcp::{SackBlock, TcpFlags, TcpOptions, TcpRepr};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const VICTIM: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_PORT: u16 = 40_000;
const VICTIM_PORT: u16 = 80;
const PEER_ISN: u32 = 0xfffe_0000;
/// Most records read from one input (keeps a case short).
const MAX_RECORDS: usize = 400;
/// Most timer expiries handled per time jump.
const MAX_TIMERS: usize = 2_000;
/// The listener's backlog (`listen(fd, 16)`).
const BACKLOG: usize = 16;
/// The first source port of a SYN flood (below `PEER_PORT`, so no flood SYN is the
/// scripted peer's).
const FLOOD_PORT: u16 = 1_024;

/// The state the victim's connection is driven to before the fuzzed records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A listener; the records start with no connection.
    Listen,
    /// The victim sent a SYN.
    SynSent,
    /// The peer sent a SYN, the victim a SYN-ACK.
    SynRecv,
    /// Passive open, with data in flight both ways.
    EstablishedPassive,
    /// Active open, with data in flight from the victim.
    EstablishedActive,
    /// The victim closed with data unacknowledged.
    FinWait1,
    /// The victim closed and the peer acknowledged the FIN.
    FinWait2,
    /// The peer closed.
    CloseWait,
    /// The peer closed, then the victim.
    LastAck,
    /// Both closed at once, the victim's FIN not acknowledged.
    Closing,
    /// Both closed, everything acknowledged.
    TimeWait,
}

const STARTS: [Start; 11] = [
    Start::Listen,
    Start::SynSent,
    Start::SynRecv,
    Start::EstablishedPassive,
    Start::EstablishedActive,
    Start::FinWait1,
    Start::FinWait2,
    Start::CloseWait,
    Start::LastAck,
    Start::Closing,
    Start::TimeWait,
];

/// ECN from the first two bytes: the victim's `net.ipv4.tcp_ecn` and the ECN flags
/// of the peer's SYN (passive opens) or SYN-ACK (active ones).
#[derive(Debug, Clone, Copy)]
struct Ecn {
    /// `net.ipv4.tcp_ecn`, 0 to 5.
    sysctl: u8,
    /// The peer's handshake flags: none, classic (RFC 3168), or AccECN (RFC 9768).
    peer: u16,
}

impl Ecn {
    fn of(cfg_byte: u8, opt_byte: u8) -> Ecn {
        let x = cfg_byte ^ opt_byte;
        let (ece, cwr, ae) = (TcpFlags::ECE.0, TcpFlags::CWR.0, TcpFlags::AE.0);
        Ecn {
            sysctl: x % 6,
            peer: [0, ece | cwr, ae | cwr | ece][(x / 6 % 3) as usize],
        }
    }
}

/// The victim stack, its sockets and what the peer knows of the sequence space.
struct Harness {
    now: Instant,
    st: Stack,
    listener: Option<SocketHandle>,
    conn: Option<SocketHandle>,
    /// The victim's highest sequence sent + 1 (SYN and FIN count).
    snd_nxt: Option<u32>,
    /// The last acknowledgment number the victim sent.
    rcv_ack: Option<u32>,
    /// The peer's next sequence number.
    peer_nxt: u32,
    /// The peer's timestamp clock.
    tsval: u32,
    /// The last TSval the victim sent (the peer echoes it).
    ts_recent: u32,
    syn_opts: TcpOptions,
    peer_port: u16,
    /// The victim has sent a FIN.
    fin_sent: bool,
    /// The acknowledgment number of the last scripted segment.
    last_peer_ack: u32,
    /// The victim's port (80, or its ephemeral port after an active open).
    victim_port: u16,
    /// The ECN flags of the peer's SYN or SYN-ACK.
    syn_ecn: u16,
    /// The IP-ECN field of the peer's next packet (a fuzzed segment's; else 0).
    ip_ecn: u8,
}

/// One fuzz case (panics on a finding).
pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let cfg_byte = b.u8();
    let opt_byte = b.u8();
    let start = STARTS[(cfg_byte % 11) as usize];
    let ecn = Ecn::of(cfg_byte, opt_byte);
    let mut cfg = config(cfg_byte, opt_byte);
    cfg.tcp_ecn = ecn.sysctl;
    let mut h = Harness::new(cfg, syn_options(opt_byte));
    h.syn_ecn = ecn.peer;
    h.setup(start);
    let mut n = 0;
    while !b.is_empty() && n < MAX_RECORDS {
        let r: [u8; 12] = core::array::from_fn(|_| b.u8());
        h.record(&r);
        n += 1;
    }
    h.advance(Duration::from_secs(3600));
}

/// The victim's configuration from the input's first two bytes.
fn config(cfg_byte: u8, opt_byte: u8) -> Config {
    let mut c = Config::default();
    let sel = cfg_byte >> 4;
    c.tcp_sack = sel & 1 == 0;
    c.tcp_timestamps = sel & 2 == 0;
    c.tcp_window_scaling = sel & 4 == 0;
    if sel & 8 != 0 {
        c.rtx_queue = lowtide::config::RtxQueueKind::List;
    }
    let cc = ["reno", "cubic", "bbr"][(opt_byte % 3) as usize];
    c.set("net.ipv4.tcp_congestion_control", cc)
        .expect("known congestion control");
    // Small buffers reach zero windows and memory limits quickly.
    if cfg_byte & 0x08 != 0 {
        c.tcp_rmem = [4096, 8192, 16384];
        c.tcp_wmem = [4096, 8192, 16384];
    }
    c
}

/// The options of the peer's SYN or SYN-ACK.
fn syn_options(opt_byte: u8) -> TcpOptions {
    let sel = opt_byte / 3;
    TcpOptions {
        mss: Some([1460, 536, 88, 9000, 1, 65535][(sel % 6) as usize]),
        wscale: (sel & 0x08 == 0).then_some((sel >> 4) * 2),
        sack_permitted: sel & 0x10 == 0,
        timestamp: (sel & 0x20 == 0).then_some((1, 0)),
        ..TcpOptions::default()
    }
}

impl Harness {
    fn new(cfg: Config, syn_opts: TcpOptions) -> Harness {
        let mut st = Stack::new(cfg, 7);
        st.add_address(IpAddr::V4(VICTIM));
        Harness {
            now: Instant::ZERO,
            st,
            listener: None,
            conn: None,
            snd_nxt: None,
            rcv_ack: None,
            peer_nxt: PEER_ISN,
            tsval: 1,
            ts_recent: 0,
            syn_opts,
            peer_port: PEER_PORT,
            victim_port: VICTIM_PORT,
            fin_sent: false,
            last_peer_ack: 0,
            syn_ecn: 0,
            ip_ecn: 0,
        }
    }

    /// Drives the victim to `start` with well-formed segments.
    fn setup(&mut self, start: Start) {
        const ACK: u16 = TcpFlags::ACK.0;
        const FIN_ACK: u16 = TcpFlags::FIN.0 | TcpFlags::ACK.0;
        let active = matches!(start, Start::SynSent | Start::EstablishedActive);
        if active {
            let local = SocketAddr::new(VICTIM.into(), 0);
            let remote = SocketAddr::new(PEER.into(), self.peer_port);
            self.conn = self.st.connect(self.now, local, remote).ok();
            self.flush();
            if start == Start::SynSent {
                return;
            }
            self.peer_syn(TcpFlags::SYN.0 | ACK);
            self.victim_send(30_000);
            return;
        }
        let any = SocketAddr::new(VICTIM.into(), VICTIM_PORT);
        self.listener = self.st.listen(any, BACKLOG as u32).ok();
        if start == Start::Listen {
            return;
        }
        self.peer_syn(TcpFlags::SYN.0);
        if start == Start::SynRecv {
            return;
        }
        self.peer_segment(ACK, 2_000);
        self.conn = self.listener.and_then(|l| self.st.accept(l).ok());
        self.victim_send(30_000);
        match start {
            Start::FinWait1 => self.victim_close(),
            Start::FinWait2 | Start::Closing | Start::TimeWait => {
                self.victim_close();
                // Everything but the FIN, then (FIN-WAIT-2, TIME-WAIT) the FIN too.
                self.peer_ack_all(start != Start::Closing);
                if start != Start::FinWait2 {
                    self.peer_segment_at(FIN_ACK, self.peer_nxt, self.last_peer_ack, 0);
                }
            }
            Start::CloseWait | Start::LastAck => {
                self.peer_segment(FIN_ACK, 0);
                if start == Start::LastAck {
                    self.victim_close();
                }
            }
            _ => {}
        }
    }

    fn peer_syn(&mut self, flags: u16) {
        let opts = self.syn_opts;
        // A classic SYN-ACK says ECE alone (ECE with CWR is no ECN, tcp_ecn_rcv_synack).
        let ecn = match flags & TcpFlags::ACK.0 != 0 && self.syn_ecn & TcpFlags::AE.0 == 0 {
            true => self.syn_ecn & TcpFlags::ECE.0,
            false => self.syn_ecn,
        };
        let flags = flags | ecn;
        // `send` moves `peer_nxt` past the SYN.
        self.segment(
            flags,
            self.peer_nxt,
            self.snd_nxt.unwrap_or(0),
            0,
            opts,
            false,
        );
        self.tick(Duration::from_millis(10));
    }

    /// Acknowledges what the victim sends until it sends nothing new (its FIN only
    /// if `fin`), as a peer with an open window would.
    fn peer_ack_all(&mut self, fin: bool) {
        for _ in 0..200 {
            let nxt = self.snd_nxt.unwrap_or(0);
            let ack = nxt.wrapping_sub((!fin && self.fin_sent) as u32);
            self.peer_segment_at(TcpFlags::ACK.0, self.peer_nxt, ack, 0);
            // Paced senders (BBR) send on their timers.
            self.tick(Duration::from_millis(5));
            if self.snd_nxt == Some(nxt) {
                return;
            }
        }
    }

    /// A segment with `len` payload bytes from the peer's next sequence, acknowledging
    /// everything the victim sent.
    fn peer_segment(&mut self, flags: u16, len: usize) {
        let ack = self.snd_nxt.unwrap_or(0);
        let opts = self.data_options(0, 0, 0);
        let seq = self.peer_nxt;
        self.send(flags, seq, ack, 65_535, opts, &vec![0x5a; len], false);
    }

    fn peer_segment_at(&mut self, flags: u16, seq: u32, ack: u32, len: usize) {
        self.last_peer_ack = ack;
        let opts = self.data_options(0, 0, 0);
        self.send(flags, seq, ack, 65_535, opts, &vec![0x5a; len], false);
    }

    /// Timestamps (if the SYN had them) and `nsack` SACK blocks around `ack`.
    fn data_options(&mut self, nsack: u8, ack: u32, spread: u32) -> TcpOptions {
        let mut o = TcpOptions::default();
        if self.syn_opts.timestamp.is_some() {
            self.tsval = self.tsval.wrapping_add(1);
            o.timestamp = Some((self.tsval, self.ts_recent));
        }
        let n = nsack.min(4);
        for i in 0..n {
            let start = ack.wrapping_add(spread.wrapping_mul(2 * i as u32 + 1));
            o.sack[i as usize] = SackBlock {
                start,
                end: start.wrapping_add(spread.max(1)),
            };
        }
        o.sack_len = n;
        o
    }

    fn segment(&mut self, flags: u16, seq: u32, ack: u32, len: usize, o: TcpOptions, bad: bool) {
        self.send(flags, seq, ack, 65_535, o, &vec![0x5a; len], bad);
    }

    /// Builds, checksums and delivers one IPv4 + TCP packet from the peer.
    #[allow(clippy::too_many_arguments)]
    fn send(
        &mut self,
        flags: u16,
        seq: u32,
        ack: u32,
        window: u16,
        options: TcpOptions,
        payload: &[u8],
        bad_csum: bool,
    ) {
        let tcp = TcpRepr {
            src_port: self.peer_port,
            dst_port: self.victim_port,
            seq,
            ack,
            flags: TcpFlags(flags),
            window,
            urgent: 0,
            options,
        };
        let hl = tcp.header_len();
        let ip = IpRepr {
            src: PEER.into(),
            dst: VICTIM.into(),
            protocol: PROTO_TCP,
            hop_limit: 64,
            ecn: self.ip_ecn,
            tos: 0,
            header_len: 20,
            payload_len: hl + payload.len(),
        };
        let mut pkt = vec![0u8; 20 + hl + payload.len()];
        ip.emit(&mut pkt, 1);
        tcp.emit(&mut pkt[20..]);
        pkt[20 + hl..].copy_from_slice(payload);
        checksum::fill_tcp(ip.src, ip.dst, &mut pkt[20..]);
        if bad_csum {
            pkt[36] ^= 0x40;
        }
        let syn_fin = (flags & TcpFlags::SYN.0 != 0) as u32 + (flags & TcpFlags::FIN.0 != 0) as u32;
        let end = seq.wrapping_add(payload.len() as u32 + syn_fin);
        if (end.wrapping_sub(self.peer_nxt) as i32) > 0 {
            self.peer_nxt = end;
        }
        if bad_csum || payload.is_empty() || seq & 1 == 0 {
            self.st.handle_packet(self.now, &pkt, RxChecksum::Verify);
        } else {
            // The zero-copy path (a GRO packet's frags, a lent TUN buffer): the
            // payload in two shared buffers, split where the window says.
            let k = window as usize % (payload.len() + 1);
            let frags = [
                bytes::Bytes::copy_from_slice(&payload[..k]),
                bytes::Bytes::copy_from_slice(&payload[k..]),
            ];
            self.st
                .handle_packet_frags(self.now, &pkt[..20 + hl], &frags);
        }
        self.flush();
    }

    /// Takes what the victim sends, tracking its sequence space, and completes it.
    fn flush(&mut self) {
        while let Some(tx) = self.st.poll_transmit(self.now) {
            self.st.handle_tx_complete(self.now, tx.token);
            let _ = lowtide_wire::gso::segment(&tx.packet, tx.gso(), |s| self.observe(&s));
        }
        while self.st.poll_event().is_some() {}
    }

    fn observe(&mut self, pkt: &[u8]) {
        let ip = IpRepr::parse(pkt, true).expect("the victim sends valid IP");
        let seg = &pkt[ip.header_len..ip.header_len + ip.payload_len];
        assert!(
            checksum::verify_tcp(ip.src, ip.dst, seg),
            "the victim sends valid TCP checksums"
        );
        let (t, hl) = TcpRepr::parse(seg).expect("the victim sends valid TCP");
        if t.flags.contains(TcpFlags::RST) {
            return;
        }
        if t.dst_port == self.peer_port {
            self.victim_port = t.src_port;
        }
        let syn_fin =
            t.flags.contains(TcpFlags::SYN) as u32 + t.flags.contains(TcpFlags::FIN) as u32;
        let end = t.seq.wrapping_add((seg.len() - hl) as u32 + syn_fin);
        match self.snd_nxt {
            Some(n) if (end.wrapping_sub(n) as i32) <= 0 => {}
            _ => self.snd_nxt = Some(end),
        }
        if t.flags.contains(TcpFlags::ACK) {
            self.rcv_ack = Some(t.ack);
        }
        self.fin_sent |= t.flags.contains(TcpFlags::FIN);
        if let Some((val, _)) = t.options.timestamp {
            self.ts_recent = val;
        }
    }

    /// Writes `n` bytes on the victim's connection.
    fn victim_send(&mut self, n: usize) {
        if let Some(c) = self.conn {
            let _ = self.st.send(self.now, c, &vec![0xa5; n]);
            self.flush();
        }
    }

    /// `shutdown(SHUT_WR)`: the FIN goes out and the socket stays the caller's, so
    /// its state stays observable (a fuzzed `close` makes it an orphan later).
    fn victim_close(&mut self) {
        if let Some(c) = self.conn {
            let _ = self.st.shutdown(self.now, c, Shutdown::Write);
            self.flush();
        }
    }

    /// Moves time forward by `d`, firing every timer due on the way.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        for _ in 0..MAX_TIMERS {
            match self.st.poll_timeout() {
                Some(t) if t <= end => {
                    self.now = self.now.max(t);
                    self.st.handle_timeout(self.now);
                    self.flush();
                }
                _ => break,
            }
        }
        self.now = self.now.max(end);
    }

    fn tick(&mut self, d: Duration) {
        self.advance(d);
    }

    /// One 12-byte record: `r[0] % 4` is a segment (0, 1), a time jump (2; a hostile
    /// burst if `r[3]`'s top bit is set: a SYN flood if its bit 1 is (a connection
    /// flood with bit 2 too), else a window fill or a prepended run) or a socket
    /// call (3).
    fn record(&mut self, r: &[u8; 12]) {
        match r[0] % 4 {
            0 | 1 => self.fuzz_segment(r),
            2 if r[3] & 0x80 != 0 => self.hostile_burst(r),
            2 => self.advance(Duration::from_micros(
                u16::from_le_bytes([r[1], r[2]]) as u64 * 100,
            )),
            _ => self.socket_call(r),
        }
    }

    /// `r[0] >> 2`: bit 0 seq base (victim's ACK or the peer's next), bits 1-2 the
    /// scale of the offsets (1, 2^8, 2^16 bytes, or raw), bit 3 bad checksum, bits 4-5
    /// the delay before it (0, 100 us, 1 ms, 50 ms); `r[1]` flags; `r[2..4]` seq offset
    /// and `r[4..6]` ack offset (i16); `r[6..8]` window; `r[8]` payload length / 8;
    /// `r[9]` options (bits 0-2 SACK blocks, bit 3 no timestamp, bit 4 MSS, bit 5 a
    /// wild TSecr, bits 6-7 AE and a reserved flag bit); `r[10..12]` SACK spread, and
    /// (`r[10] ^ r[11]`) the packet's IP-ECN field (bits 0-1) and, with the MSS bit,
    /// a TCP-MD5 option of digest `r[10]` repeated (bit 2).
    fn fuzz_segment(&mut self, r: &[u8; 12]) {
        let mode = r[0] >> 2;
        let delay = [0, 100, 1_000, 50_000][((mode >> 4) & 3) as usize];
        self.tick(Duration::from_micros(delay));
        let scale = |v: i16| -> u32 {
            match (mode >> 1) & 3 {
                0 => v as i32 as u32,
                1 => (v as i32 as u32).wrapping_shl(8),
                2 => (v as i32 as u32).wrapping_shl(16),
                _ => (v as u16 as u32).wrapping_mul(0x9e37_79b9),
            }
        };
        let seq_off = scale(i16::from_le_bytes([r[2], r[3]]));
        let ack_off = scale(i16::from_le_bytes([r[4], r[5]]));
        let base = match (mode & 1, self.rcv_ack) {
            (0, Some(a)) => a,
            _ => self.peer_nxt,
        };
        let seq = base.wrapping_add(seq_off);
        let ack = self.snd_nxt.unwrap_or(0).wrapping_add(ack_off);
        let window = u16::from_le_bytes([r[6], r[7]]);
        let len = r[8] as usize * 8;
        let spread = u16::from_le_bytes([r[10], r[11]]) as u32;
        let una = self
            .rcv_ack
            .map_or(ack, |_| ack.wrapping_sub(spread.wrapping_mul(9)));
        let mut o = self.data_options(r[9] & 7, una, spread);
        if r[9] & 8 != 0 {
            o.timestamp = None;
        }
        let x = r[10] ^ r[11];
        if r[9] & 16 != 0 {
            o.mss = Some(spread as u16);
            if x & 4 != 0 {
                o.md5sig = Some([r[10]; 16]);
            }
        }
        if r[9] & 32 != 0 {
            o.timestamp = o
                .timestamp
                .map(|(v, _)| (v, spread.wrapping_mul(0x0101_0101)));
        }
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let flags = u16::from(r[1]) | u16::from(r[9] >> 6) << 8;
        self.ip_ecn = x & 3;
        self.send(flags, seq, ack, window, o, &payload, mode & 8 != 0);
        self.ip_ecn = 0;
    }

    /// A burst of `1 + r[4..6] % 512` data segments of `1 + r[6] % 16` bytes from the
    /// victim's ACK (or the peer's next): with `r[3] & 1` clear, ascending with gaps of
    /// `1 + r[7] % 32` bytes (a window filled with tiny out-of-order segments); set,
    /// each starting `1 + r[7] % 32` lower than the last and overlapping it (a run
    /// prepended to). Oracle: receive memory stays within the buffer plus the segment
    /// just queued (`tcp_try_rmem_schedule`), plus, for each `tcp_prune_queue` that
    /// collapsed (TcpExtTCPRcvCollapsed grew), one fresh one-page skb: `tcp_collapse`
    /// copies a bloated run into `alloc_skb(copy)` buffers, and the last, partly
    /// filled one can be charged more than the small skbs it replaced (Linux's
    /// receive memory passes the buffer by that much too).
    fn hostile_burst(&mut self, r: &[u8; 12]) {
        if r[3] & 2 != 0 {
            return self.syn_flood(r);
        }
        let count = 1 + u16::from_le_bytes([r[4], r[5]]) as u32 % 512;
        let len = 1 + (r[6] % 16) as u32;
        let step = 1 + (r[7] % 32) as u32;
        let base = self.rcv_ack.unwrap_or(self.peer_nxt);
        let ack = self.snd_nxt.unwrap_or(0);
        let before = self.rmem();
        let mut last_collapsed = self.st.counters().get(Mib::TcpExtTCPRcvCollapsed);
        let mut collapse_slack = 0u64;
        for i in 0..count {
            let seq = if r[3] & 1 == 0 {
                base.wrapping_add(1 + i * (len + step))
            } else {
                base.wrapping_add(1 + (count - i) * step)
            };
            let len = if r[3] & 1 == 0 { len } else { len + step };
            let o = self.data_options(0, ack, 0);
            self.segment(TcpFlags::ACK.0, seq, ack, len as usize, o, false);
            let now_collapsed = self.st.counters().get(Mib::TcpExtTCPRcvCollapsed);
            if now_collapsed > last_collapsed {
                collapse_slack += alloc_truesize(SKB_MAX_ORDER0) as u64;
                last_collapsed = now_collapsed;
            }
            if let (Some((rmem, rcvbuf)), Some((rmem0, _))) = (self.rmem(), before) {
                let slack = lowtide::tcp::skbuff::rx_truesize(len) as u64 + collapse_slack;
                assert!(
                    rmem <= (rcvbuf as u64).max(rmem0) + slack,
                    "sk_rmem_alloc {rmem} over sk_rcvbuf {rcvbuf} (was {rmem0})"
                );
            }
        }
    }

    /// `1 + r[4..6] % 512` SYNs from as many other ports of the peer, each with the
    /// scripted SYN's options and its own sequence number: with `r[3] & 4` clear a
    /// spoofed flood's shape (none answers its SYN-ACK), set a connection flood's
    /// (each SYN-ACK gets its final ACK, and the connections stay silent). Oracle:
    /// the connection table grows by at most the SYN queue (`backlog + 1` children in
    /// SYN-RECV, then SYN cookies or drops, `tcp_conn_request`) and, with completed
    /// handshakes, the accept queue (`backlog + 1` more; a final ACK that finds it
    /// full is dropped, `tcp_check_req`'s `listen_overflow`); what the peer knows of
    /// the victim's connection is kept as it was.
    fn syn_flood(&mut self, r: &[u8; 12]) {
        let complete = r[3] & 4 != 0;
        let count = 1 + u16::from_le_bytes([r[4], r[5]]) as usize % 512;
        let before = self.st.connection_count();
        let kept = (self.peer_port, self.peer_nxt, self.snd_nxt, self.rcv_ack);
        let (ts_recent, fin_sent) = (self.ts_recent, self.fin_sent);
        let victim_port = self.victim_port;
        self.victim_port = VICTIM_PORT;
        for i in 0..count {
            self.peer_port = FLOOD_PORT + i as u16;
            let isn = PEER_ISN.wrapping_add((i as u32).wrapping_mul(0x9e37_79b9));
            self.snd_nxt = None;
            self.segment(TcpFlags::SYN.0, isn, 0, 0, self.syn_opts, false);
            let synack = (self.snd_nxt, self.rcv_ack);
            if let (true, (Some(ack), Some(a))) = (complete, synack) {
                if a == isn.wrapping_add(1) {
                    let o = self.data_options(0, ack, 0);
                    self.segment(TcpFlags::ACK.0, a, ack, 0, o, false);
                }
            }
            let now = self.st.connection_count();
            let queues = if complete {
                2 * (BACKLOG + 1)
            } else {
                BACKLOG + 1
            };
            assert!(
                now <= before + queues,
                "{now} connections after {} flood SYNs (from {before}): over the queues",
                i + 1
            );
        }
        (self.peer_port, self.peer_nxt, self.snd_nxt, self.rcv_ack) = kept;
        (self.ts_recent, self.fin_sent, self.victim_port) = (ts_recent, fin_sent, victim_port);
    }

    /// `sk_rmem_alloc` and `sk_rcvbuf` of the victim's connection, if any.
    fn rmem(&self) -> Option<(u64, u32)> {
        let i = self.st.info(self.now, self.conn?).ok()?;
        Some((i.rmem_alloc, i.rcvbuf))
    }

    /// `r[1] % 9`: write `r[2..4]` bytes, read everything, shut down writing, close,
    /// abort, set a tiny receive buffer, a new connection from the peer (another
    /// port), TCP_NOTSENT_LOWAT, or a TCP-MD5 key for the peer (`TCP_MD5SIG`) on the
    /// listener or connection (`r[2] % 81` bytes of `r[4]`; a key of 0 bytes
    /// deletes it), after which the peer's segments, never signed, are dropped.
    fn socket_call(&mut self, r: &[u8; 12]) {
        let n = u16::from_le_bytes([r[2], r[3]]) as usize;
        let Some(c) = self.conn.or_else(|| self.accept()) else {
            return;
        };
        let now = self.now;
        match r[1] % 9 {
            0 => self.victim_send(n),
            1 => {
                let mut buf = [0u8; 4096];
                while matches!(self.st.recv(now, c, &mut buf), Ok(k) if k > 0) {}
            }
            2 => drop(self.st.shutdown(now, c, Shutdown::Write)),
            3 => drop(self.st.close(now, c)),
            4 => drop(self.st.abort(now, c)),
            5 => drop(self.st.socket(c).set_rcvbuf(n as u32)),
            6 => {
                self.peer_port = self.peer_port.wrapping_add(1).max(1);
                self.peer_nxt = PEER_ISN.wrapping_add(n as u32);
                self.snd_nxt = None;
                self.rcv_ack = None;
                self.peer_syn(TcpFlags::SYN.0);
            }
            7 => drop(self.st.socket(c).set_notsent_lowat(now, n as u32)),
            _ => self.set_md5_key(c, r),
        }
        self.flush();
    }

    /// `TCP_MD5SIG` for the peer on the listener (`r[3]` odd) or on `c`.
    fn set_md5_key(&mut self, c: SocketHandle, r: &[u8; 12]) {
        let h = match (r[3] & 1, self.listener) {
            (1, Some(l)) => l,
            _ => c,
        };
        let len = (r[2] % 81) as usize;
        let cmd = match Md5Key::new(PEER.into(), 32, &vec![r[4]; len]) {
            Some(key) if len > 0 => Md5Cmd::Add(key),
            _ => Md5Cmd::Del {
                addr: PEER.into(),
                prefixlen: 32,
                l3index: 0,
                flags: 0,
            },
        };
        let _ = self.st.socket(h).set_md5sig(cmd);
    }

    fn accept(&mut self) -> Option<SocketHandle> {
        self.conn = self.listener.and_then(|l| self.st.accept(l).ok());
        self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lowtide::TcpState;

    /// Both hostile shapes, 512 segments each against the small buffers (the default
    /// grows, as Linux's `tcp_clamp_window` grows it, to 32 MB), reach the memory
    /// limit (so the oracle is tested): pruned, never over.
    #[test]
    fn hostile_bursts_reach_the_memory_limit() {
        for shape in [0x80u8, 0x81] {
            let mut h = Harness::new(config(0x0b, 0x30), syn_options(0x30));
            h.setup(Start::EstablishedPassive);
            let mut r = [0u8; 12];
            (r[0], r[3], r[4], r[5]) = (2, shape, 0xff, 0x01);
            h.record(&r);
            let n = |m| h.st.counters().get(m);
            assert!(n(lowtide::Mib::TcpExtPruneCalled) > 0, "shape {shape:#x}");
            // Ascending: the newest lands last and is dropped; descending: the run
            // the segments overlap into is collapsed.
            let m = if shape & 1 == 0 {
                lowtide::Mib::TcpExtTCPOFODrop
            } else {
                lowtide::Mib::TcpExtTCPRcvCollapsed
            };
            assert!(n(m) > 0, "shape {shape:#x}");
        }
    }

    /// A flood of 511 handshakes, one after another, completed and left silent:
    /// the first `backlog + 1` fill the accept queue, and every SYN after them finds
    /// it full and is dropped (`tcp_conn_request`: `TcpExtListenOverflows`), so no
    /// request is made and the table holds the accept queue's worth.
    #[test]
    fn a_connection_flood_stops_at_the_accept_queue() {
        let mut h = Harness::new(config(0, 0), syn_options(0));
        h.setup(Start::Listen);
        let mut r = [0u8; 12];
        (r[0], r[3], r[4], r[5]) = (2, 0x86, 0xfe, 0x01);
        h.record(&r);
        let n = |m| h.st.counters().get(m);
        assert_eq!(h.st.connection_count(), BACKLOG + 1);
        assert_eq!(n(lowtide::Mib::TcpPassiveOpens), BACKLOG as u64 + 1);
        assert_eq!(
            n(lowtide::Mib::TcpExtListenOverflows),
            511 - BACKLOG as u64 - 1
        );
    }

    /// A flood of 511 SYNs against the listener: SYN-RECV children up to the SYN
    /// queue, then SYN cookies (the default) or drops (`tcp_syncookies` 0).
    #[test]
    fn a_syn_flood_stops_at_the_syn_queue() {
        for cookies in ["1", "0"] {
            let mut cfg = config(0, 0);
            cfg.set("net.ipv4.tcp_syncookies", cookies)
                .expect("known sysctl");
            let mut h = Harness::new(cfg, syn_options(0));
            h.setup(Start::Listen);
            let mut r = [0u8; 12];
            (r[0], r[3], r[4], r[5]) = (2, 0x82, 0xfe, 0x01);
            h.record(&r);
            let n = |m| h.st.counters().get(m);
            assert_eq!(h.st.connection_count(), BACKLOG + 1, "cookies {cookies}");
            match cookies {
                "1" => assert!(n(lowtide::Mib::TcpExtTCPReqQFullDoCookies) > 0),
                _ => assert!(n(lowtide::Mib::TcpExtTCPReqQFullDrop) > 0),
            }
        }
    }

    /// The scripted peer really drives the victim into each starting state, for
    /// every configuration the first byte can select.
    #[test]
    fn the_first_two_bytes_reach_ecn_and_accecn_connections() {
        // Passive ESTABLISHED (start 3): ECN is negotiated when the victim's
        // tcp_ecn accepts it (1 to 5) and the peer's SYN asks (classic or AccECN).
        let mut seen = [false; 3];
        for opt_byte in 0..=255u8 {
            let cfg_byte = 3 + 11 * (opt_byte % 4);
            if STARTS[(cfg_byte % 11) as usize] != Start::EstablishedPassive {
                continue;
            }
            let ecn = Ecn::of(cfg_byte, opt_byte);
            let mut c = config(cfg_byte, opt_byte);
            c.tcp_ecn = ecn.sysctl;
            let mut h = Harness::new(c, syn_options(opt_byte));
            h.syn_ecn = ecn.peer;
            h.setup(Start::EstablishedPassive);
            let info = h.st.info(h.now, h.conn.expect("accepted")).expect("info");
            let on = info.options & 8 != 0;
            assert_eq!(on, ecn.sysctl > 0 && ecn.peer != 0, "{ecn:?}");
            let kind = match ecn.peer {
                0 => 0,
                p if p & TcpFlags::AE.0 != 0 => 2,
                _ => 1,
            };
            seen[kind] |= on || kind == 0;
        }
        assert_eq!(
            seen, [true; 3],
            "none, classic and AccECN peers all reached"
        );
    }

    #[test]
    fn setup_reaches_every_state() {
        let want = [
            TcpState::Listen,
            TcpState::SynSent,
            TcpState::SynRecv,
            TcpState::Established,
            TcpState::Established,
            TcpState::FinWait1,
            TcpState::FinWait2,
            TcpState::CloseWait,
            TcpState::LastAck,
            TcpState::Closing,
            TcpState::TimeWait,
        ];
        for cfg in (0..32u8).map(|i| (i >> 1) << 4 | (i & 1) << 3) {
            for opt_byte in [0u8, 1, 2, 3 * 0x08, 3 * 0x30] {
                for (i, &start) in STARTS.iter().enumerate() {
                    let mut h = Harness::new(config(cfg, opt_byte), syn_options(opt_byte));
                    h.setup(start);
                    let got = match start {
                        Start::Listen => h.listener.and_then(|l| h.st.state(l).ok()),
                        // The child has not been accepted yet: it is the only connection.
                        Start::SynRecv => Some(if h.st.connection_count() == 1 {
                            TcpState::SynRecv
                        } else {
                            TcpState::Closed
                        }),
                        // The application's socket reads CLOSED once the connection
                        // is a timewait socket (tcp_time_wait), as on Linux.
                        Start::TimeWait => h.st.timewait_state(
                            SocketAddr::new(VICTIM.into(), h.victim_port),
                            SocketAddr::new(PEER.into(), h.peer_port),
                        ),
                        _ => h.conn.and_then(|c| h.st.state(c).ok()),
                    };
                    assert_eq!(got, Some(want[i]), "{start:?} cfg {cfg:#x} opt {opt_byte}");
                }
            }
        }
    }
}
