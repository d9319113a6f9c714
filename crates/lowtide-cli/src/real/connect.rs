//! What an active open is doing, said on stderr as it happens (each SYN
//! retransmission), and its failure in Linux's words: `connect(2)`'s errno as
//! `strerror` prints it, `lowtide: connect ADDR: Connection refused`.

use lowtide::posix::Errno;
use lowtide::{SocketError, SocketHandle, TcpState};
use lowtide_tun::runtime::Runtime;
use std::net::SocketAddr;
use std::time::Duration;

/// `strerror(errno)` of a socket error ("Connection refused", "No route to host").
pub fn strerror(e: SocketError) -> String {
    let text = std::io::Error::from_raw_os_error(Errno::from(e).0).to_string();
    // std appends " (os error N)" to libc's text.
    match text.split_once(" (os error") {
        Some((s, _)) => s.to_string(),
        None => text,
    }
}

/// `connect ADDR: strerror`, the message of a failed active open.
pub fn connect_failed(to: SocketAddr, e: SocketError) -> String {
    format!("connect {to}: {}", strerror(e))
}

/// How long a connect waits for a SYN-ACK before ETIMEDOUT: `tcp_model_timeout` of
/// `tcp_syn_retries` from `TCP_TIMEOUT_INIT` (1 s, doubling, each RTO at most
/// `TCP_RTO_MAX`, 120 s): 127 s for Linux's 6.
pub fn syn_timeout(retries: u8) -> Duration {
    (0..=u32::from(retries))
        .map(|i| Duration::from_secs(1u64.checked_shl(i).unwrap_or(u64::MAX).min(120)))
        .sum()
}

/// One active open in progress.
#[derive(Debug)]
pub struct ConnectWatch {
    /// The connection.
    pub handle: SocketHandle,
    /// Its destination.
    pub to: SocketAddr,
    /// SYN retransmissions reported so far.
    reported: u8,
}

impl ConnectWatch {
    /// Watches `handle`'s connect to `to`.
    pub fn new(handle: SocketHandle, to: SocketAddr) -> Self {
        ConnectWatch {
            handle,
            to,
            reported: 0,
        }
    }

    /// Reports new SYN retransmissions (`tcpi_retransmits` in SYN-SENT) with the RTO
    /// that follows; `false` once the connection has left SYN-SENT. There is no fixed
    /// number to count down from: Linux 6.5+ gives up after `tcp_syn_retries` +
    /// `tcp_syn_linear_timeouts` retries or once `tcp_syn_retries` backed-off RTOs
    /// from 1 s have passed, whichever comes first.
    pub fn check(&mut self, rt: &Runtime) -> bool {
        let stack = rt.stack_ref();
        if stack.state(self.handle) != Ok(TcpState::SynSent) {
            return false;
        }
        let Ok(info) = stack.info(rt.now(), self.handle) else {
            return false;
        };
        if info.retransmits > self.reported {
            if self.reported == 0 {
                if let Some(why) = kernel_drops(self.to) {
                    eprintln!("lowtide: connect {}: {why}", self.to);
                }
            }
            self.reported = info.retransmits;
            eprintln!(
                "lowtide: connect {}: no SYN-ACK, retry {} (RTO {} s)",
                self.to,
                info.retransmits,
                info.rto.div_ceil(1_000_000)
            );
        }
        true
    }
}

/// Why the kernel on the device's other side drops SYNs to `to`, if it visibly
/// does: `to` is none of its addresses (binding to it fails) and it does not
/// forward (`net.ipv4.ip_forward` is 0 in this namespace).
fn kernel_drops(to: SocketAddr) -> Option<String> {
    let local = std::net::UdpSocket::bind(SocketAddr::new(to.ip(), 0)).is_ok();
    let forward = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").ok()?;
    (!local && forward.trim() == "0").then(|| {
        format!(
            "{} is not an address of the kernel's side and net.ipv4.ip_forward is 0: \
             the kernel drops these SYNs",
            to.ip()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_words() {
        let to: SocketAddr = "10.7.0.1:5201".parse().unwrap();
        assert_eq!(
            connect_failed(to, SocketError::ConnectionRefused),
            "connect 10.7.0.1:5201: Connection refused"
        );
        assert_eq!(strerror(SocketError::HostUnreachable), "No route to host");
        assert_eq!(
            strerror(SocketError::NetworkUnreachable),
            "Network is unreachable"
        );
        assert_eq!(strerror(SocketError::TimedOut), "Connection timed out");
    }

    #[test]
    fn syn_timeout_as_linux() {
        assert_eq!(syn_timeout(6), Duration::from_secs(127));
        assert_eq!(syn_timeout(1), Duration::from_secs(3));
        assert_eq!(
            syn_timeout(8),
            Duration::from_secs(1 + 2 + 4 + 8 + 16 + 32 + 64 + 120 + 120)
        );
    }
}
