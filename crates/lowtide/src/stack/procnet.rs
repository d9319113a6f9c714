//! What `/proc/net/tcp` and `/proc/net/tcp6` show of each socket (tcp_ipv4.c
//! `get_tcp4_sock`, `get_openreq4`, `get_timewait4_sock`; tcp_ipv6.c
//! `get_tcp6_sock` and friends): the stack lists its sockets with the fields those
//! functions read, and the socket layer formats them
//! ([`crate::posix::Host::proc_net_tcp`]).

use super::{Sock, Stack};
use crate::socket::SocketHandle;
use crate::tcp::sock::Pending;
use crate::tcp::TcpState;
use crate::time::Instant;
use core::time::Duration;
use std::net::SocketAddr;

/// `USER_HZ`: `jiffies_to_clock_t` counts hundredths of a second.
const USER_HZ: u64 = 100;

/// How Linux keeps the socket, which decides the line's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcKind {
    /// A full socket (`get_tcp4_sock`): a listener or a connection.
    Full,
    /// A request sock in SYN-RECV (`get_openreq4`), of the listener given.
    Request(SocketHandle),
    /// A TIME-WAIT sock (`get_timewait4_sock`), also what an orphan in FIN-WAIT-2
    /// becomes (`tcp_time_wait(sk, TCP_FIN_WAIT2, ...)`).
    TimeWait,
}

/// One line of `/proc/net/tcp(6)`, before formatting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcTcpEntry {
    /// The socket.
    pub handle: SocketHandle,
    /// Its layout.
    pub kind: ProcKind,
    /// Local address (a listener's may be the wildcard).
    pub local: SocketAddr,
    /// Remote address (the unspecified address, port 0, for a listener).
    pub remote: SocketAddr,
    /// `sk_state` (a TIME-WAIT sock's `tw_substate`).
    pub state: TcpState,
    /// `write_seq - snd_una` (`tx_queue`).
    pub tx_queue: u32,
    /// `rcv_nxt - copied_seq`, or a listener's `sk_ack_backlog` (`rx_queue`).
    pub rx_queue: u32,
    /// `timer_active`: 0 none, 1 retransmit/RACK/loss probe, 2 keepalive (`sk_timer`),
    /// 3 TIME-WAIT, 4 zero-window probe.
    pub timer: u8,
    /// `jiffies_delta_to_clock_t(timer_expires - jiffies)`: hundredths of a second
    /// until the timer, never below 0.
    pub timer_when: u64,
    /// `icsk_retransmits` (a request sock's `num_timeout`).
    pub retransmits: u32,
    /// `icsk_probes_out`.
    pub probes_out: u32,
    /// `jiffies_to_clock_t(icsk_rto)`.
    pub rto: u64,
    /// `jiffies_to_clock_t(icsk_ack.ato)`.
    pub ato: u64,
    /// `(icsk_ack.quick << 1) | inet_csk_in_pingpong_mode(sk)`.
    pub quick_pingpong: u32,
    /// `tcp_snd_cwnd`.
    pub cwnd: u32,
    /// A listener's `fastopenq.max_qlen`; else -1 in the initial slow start
    /// (`tcp_in_initial_slowstart`), else `snd_ssthresh`.
    pub ssthresh: i64,
    /// The application closed the socket (no inode, one reference less).
    pub orphan: bool,
    /// An `AF_INET6` socket (`sk_family`): listed in `/proc/net/tcp6`.
    pub family_v6: bool,
}

fn clock_t(d: Duration) -> u64 {
    (d.as_millis() as u64) * USER_HZ / 1000
}

fn until(now: Instant, at: Instant) -> u64 {
    clock_t(at.saturating_since(now))
}

impl Stack {
    /// Every socket `/proc/net/tcp(6)` lists: listeners, connections from SYN-RECV
    /// on (orphans included) and TIME-WAIT socks, in slot order. CLOSED ones are
    /// unhashed in Linux and not listed.
    pub fn proc_tcp_entries(&self, now: Instant) -> Vec<ProcTcpEntry> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let handle = SocketHandle {
                index: i as u32,
                generation: slot.generation,
            };
            match &slot.sock {
                Some(Sock::Listener(l)) => out.push(ProcTcpEntry {
                    handle,
                    kind: ProcKind::Full,
                    local: l.local,
                    remote: SocketAddr::new(unspecified(l.local), 0),
                    state: TcpState::Listen,
                    tx_queue: 0,
                    rx_queue: l.accept_queue.len() as u32,
                    timer: 0,
                    timer_when: 0,
                    retransmits: 0,
                    probes_out: 0,
                    rto: clock_t(crate::tcp::consts::TCP_TIMEOUT_INIT),
                    ato: 0,
                    quick_pingpong: 0,
                    cwnd: self.cfg.initcwnd,
                    ssthresh: l.fastopen.max_qlen as i64,
                    orphan: slot.orphan,
                    family_v6: l.opts.family_v6 || l.local.is_ipv6(),
                }),
                Some(Sock::Tcp(t)) if t.state != TcpState::Closed => {
                    let parent = t.parent.filter(|_| t.state == TcpState::SynRecv);
                    let kind = match parent {
                        // A Fast Open child is a full socket from its SYN on.
                        Some(p) if t.tfo.rsk.is_none() => ProcKind::Request(SocketHandle {
                            index: p,
                            generation: self.slots[p as usize].generation,
                        }),
                        _ => ProcKind::Full,
                    };
                    // An orphan's FIN-WAIT-2 beyond 60 s waits on its keepalive timer.
                    let keepalive = t.keepalive_at.or(t.tw_at);
                    let (timer, at) = match (kind, t.icsk.pending, keepalive) {
                        (ProcKind::Request(_), Some((_, at)), _) => (1, Some(at)),
                        (_, Some((Pending::Probe0, at)), _) => (4, Some(at)),
                        (_, Some((_, at)), _) => (1, Some(at)),
                        (_, None, Some(at)) => (2, Some(at)),
                        _ => (0, None),
                    };
                    let cw = &t.cw;
                    out.push(ProcTcpEntry {
                        handle,
                        kind,
                        local: t.tuple.local,
                        remote: t.tuple.remote,
                        state: t.state,
                        tx_queue: t.write_seq.saturating_sub(t.snd_una) as u32,
                        rx_queue: t.rcv_nxt.saturating_sub(t.copied_seq) as u32,
                        timer,
                        timer_when: at.map_or(0, |at| until(now, at)),
                        retransmits: t.icsk.retransmits as u32,
                        probes_out: t.icsk.probes_out as u32,
                        rto: clock_t(t.rto_backed_off()),
                        ato: clock_t(t.ack.ato),
                        quick_pingpong: (t.ack.quick << 1) | t.in_pingpong_mode(&self.cfg) as u32,
                        cwnd: cw.snd_cwnd,
                        ssthresh: match cw.snd_ssthresh >= crate::tcp::cong::INFINITE_SSTHRESH {
                            true => -1,
                            false => cw.snd_ssthresh as i64,
                        },
                        orphan: slot.orphan,
                        family_v6: t.family_v6,
                    });
                }
                Some(Sock::TimeWait(tw)) => out.push(ProcTcpEntry {
                    handle,
                    kind: ProcKind::TimeWait,
                    local: tw.tuple.local,
                    remote: tw.tuple.remote,
                    // get_timewait4_sock: tw_substate, the timer 3 (tw_timer).
                    state: tw.substate,
                    tx_queue: 0,
                    rx_queue: 0,
                    timer: 3,
                    timer_when: until(now, tw.expires),
                    retransmits: 0,
                    probes_out: 0,
                    rto: 0,
                    ato: 0,
                    quick_pingpong: 0,
                    cwnd: 0,
                    ssthresh: 0,
                    orphan: true,
                    family_v6: tw.family_v6,
                }),
                _ => {}
            }
        }
        out
    }
}

fn unspecified(a: SocketAddr) -> std::net::IpAddr {
    match a {
        SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
    }
}
