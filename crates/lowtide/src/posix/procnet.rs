//! `/proc/net/tcp` and `/proc/net/tcp6` as Linux prints them (tcp_ipv4.c
//! `tcp4_seq_show`, tcp_ipv6.c `tcp6_seq_show`), from
//! [`crate::Stack::proc_tcp_entries`].
//!
//! Where lowtide differs: the kernel pointer (`%pK`) prints as zeros (as Linux does
//! for a reader without `CAP_SYSLOG` under `kptr_restrict`), the inode is a number
//! lowtide gives each socket (its handle's index plus 1) rather than a socket
//! inode, the uid is 0, and a full socket's reference count is 1 (a TIME-WAIT
//! sock's 3, as `inet_twsk_hashdance_schedule` sets it).

use super::Host;
use crate::stack::{ProcKind, ProcTcpEntry};
use crate::time::Instant;
use std::fmt::Write;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// `TMPSZ`: each `/proc/net/tcp` line is padded to `TMPSZ - 1` characters.
const TMPSZ: usize = 150;

/// An IPv4 address as `%08X` of its `__be32` read as a native integer.
fn v4_word(a: &SocketAddr) -> u32 {
    match a.ip() {
        IpAddr::V4(v4) => u32::from_ne_bytes(v4.octets()),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(0, |v4| u32::from_ne_bytes(v4.octets())),
    }
}

/// An IPv6 address as four `%08X` of its `s6_addr32` words (IPv4 as mapped).
fn v6_words(a: &SocketAddr) -> String {
    let v6: Ipv6Addr = match a.ip() {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    let o = v6.octets();
    (0..4)
        .map(|i| {
            format!(
                "{:08X}",
                u32::from_ne_bytes([o[4 * i], o[4 * i + 1], o[4 * i + 2], o[4 * i + 3]])
            )
        })
        .collect()
}

/// Everything after the remote address: `get_tcp4_sock`, `get_openreq4` and
/// `get_timewait4_sock` (their IPv6 twins print the same fields).
fn tail(e: &ProcTcpEntry) -> String {
    let st = super::sockopt::linux_state(e.state);
    let head = format!(
        "{st:02X} {:08X}:{:08X} {:02X}:{:08X} {:08X} {:5} {:8}",
        e.tx_queue, e.rx_queue, e.timer, e.timer_when, e.retransmits, 0, e.probes_out
    );
    let ptr = "0000000000000000";
    match e.kind {
        ProcKind::Full => {
            let inode = if e.orphan {
                0
            } else {
                e.handle.index() as u64 + 1
            };
            format!(
                "{head} {inode} 1 {ptr} {} {} {} {} {}",
                e.rto, e.ato, e.quick_pingpong, e.cwnd, e.ssthresh
            )
        }
        // get_openreq4: no tx/rx queue, "0 /* non standard timer */, 0 /* open_requests
        // have no inode */", a refcount of 0.
        ProcKind::Request(_) => format!(
            "{st:02X} {:08X}:{:08X} {:02X}:{:08X} {:08X} {:5} {:8} {} {} {ptr}",
            0, 0, 1, e.timer_when, e.retransmits, 0, 0, 0, 0
        ),
        ProcKind::TimeWait => format!(
            "{st:02X} {:08X}:{:08X} {:02X}:{:08X} {:08X} {:5} {:8} {} {} {ptr}",
            0, 0, 3, e.timer_when, 0, 0, 0, 0, 3
        ),
    }
}

impl Host {
    /// The text of `/proc/net/tcp` (`v6` false: `AF_INET` sockets) or
    /// `/proc/net/tcp6` (`AF_INET6` sockets, IPv4 peers shown IPv4-mapped), as
    /// Linux's `tcp4_seq_show`/`tcp6_seq_show` print them: a header, then a line
    /// per listener, connection (orphans included), request and TIME-WAIT sock.
    pub fn proc_net_tcp(&self, now: Instant, v6: bool) -> String {
        let mut out = String::new();
        if v6 {
            out.push_str(
                "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n",
            );
        } else {
            let h = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";
            let _ = writeln!(out, "{h:<width$}", width = TMPSZ - 1);
        }
        let entries = self.stack.proc_tcp_entries(now);
        let family_v6 = |e: &ProcTcpEntry| match e.kind {
            // A request sock is its listener's family.
            ProcKind::Request(l) => entries
                .iter()
                .find(|x| x.handle == l)
                .map_or(e.family_v6, |x| x.family_v6),
            _ => e.family_v6,
        };
        for (sl, e) in entries.iter().filter(|e| family_v6(e) == v6).enumerate() {
            if v6 {
                let _ = writeln!(
                    out,
                    "{sl:4}: {}:{:04X} {}:{:04X} {}",
                    v6_words(&e.local),
                    e.local.port(),
                    v6_words(&e.remote),
                    e.remote.port(),
                    tail(e)
                );
            } else {
                let line = format!(
                    "{sl:4}: {:08X}:{:04X} {:08X}:{:04X} {}",
                    v4_word(&e.local),
                    e.local.port(),
                    v4_word(&e.remote),
                    e.remote.port(),
                    tail(e)
                );
                let _ = writeln!(out, "{line:<width$}", width = TMPSZ - 1);
            }
        }
        out
    }
}
