//! Types of the socket API that [`crate::Stack`] offers: handles, events, errors.

use crate::tcp::rtx::data::PatternPayload;
use serde::Serialize;

/// A socket (listener or connection) owned by a [`crate::Stack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketHandle {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl SocketHandle {
    /// A small integer naming the socket, stable while it lives (like a file descriptor).
    pub fn index(self) -> u32 {
        self.index
    }
}

impl core::fmt::Display for SocketHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "sk{}", self.index)
    }
}

/// A readiness change, delivered by [`crate::Stack::poll_event`] (edge-triggered, like
/// `EPOLLET`: each is delivered once per change, so a caller can count wakeups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketEvent {
    /// The socket.
    pub socket: SocketHandle,
    /// What changed.
    pub kind: EventKind,
}

/// What a [`SocketEvent`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// An active open completed (ESTABLISHED); the socket is writable.
    Connected,
    /// A listener has a connection to accept (`EPOLLIN` on a listener).
    Acceptable,
    /// New data can be read (`EPOLLIN`).
    Readable,
    /// Send space opened after a write could not take everything (`EPOLLOUT`,
    /// `sk_write_space`).
    Writable,
    /// The peer closed its side; reads return end of stream after the data
    /// (`EPOLLRDHUP`).
    ReadHangUp,
    /// The connection failed or was reset (`EPOLLERR`); the error is returned by the
    /// next operation and by [`crate::Stack::socket_error`].
    Error(SocketError),
    /// An entry arrived on the socket's error queue (`sk_error_report`, `EPOLLERR`):
    /// a `MSG_ZEROCOPY` completion; read it with [`crate::SocketMut::recv_errqueue`].
    ErrQueue,
    /// Both directions are finished and the connection reached CLOSED or TIME-WAIT
    /// (`EPOLLHUP`).
    HangUp,
    /// The connection changed state with nothing new to report (`sk_state_change`):
    /// the peer acknowledged the FIN of a socket not closed (FIN-WAIT-2). Pollers
    /// look again; an edge-triggered epoll item reports what it finds.
    StateChange,
}

/// Errors of socket operations, named after the errno Linux returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SocketError {
    /// `EAGAIN`: nothing can be done now; wait for an event.
    WouldBlock,
    /// `EBADF`: the handle does not name a live socket.
    BadHandle,
    /// `ENOTCONN`: the socket is not connected.
    NotConnected,
    /// `EINVAL`: the operation does not fit the socket's state or the arguments.
    InvalidInput,
    /// `EPIPE`: writing after shutdown or after the connection ended.
    BrokenPipe,
    /// `ECONNREFUSED`: the peer answered the SYN with a reset.
    ConnectionRefused,
    /// `ECONNRESET`: the peer reset the connection.
    ConnectionReset,
    /// `ETIMEDOUT`: retransmissions exhausted.
    TimedOut,
    /// `EADDRINUSE`: the local address and port are taken.
    AddrInUse,
    /// `EADDRNOTAVAIL`: no such local address, or no ephemeral port left.
    AddrNotAvailable,
    /// `EHOSTUNREACH`: an ICMP host unreachable (or administratively prohibited)
    /// answered the SYN.
    HostUnreachable,
    /// `ENETUNREACH`: an ICMP network unreachable answered the SYN.
    NetworkUnreachable,
    /// `ENOBUFS`: no memory for the request (a `MSG_ZEROCOPY` send past
    /// `net.core.optmem_max`).
    NoBufferSpace,
    /// `EPERM`: not allowed (`TCP_CONGESTION` on a connection whose route locks
    /// its congestion control).
    PermissionDenied,
    /// `EMSGSIZE`: a datagram larger than the path MTU that may not be fragmented
    /// (`IP_PMTUDISC_DO`, `IPV6_DONTFRAG`, ...) or than IP's 16-bit length.
    MessageTooLong,
    /// `EPROTO`: an ICMP parameter problem (or an ICMPv6 error of unknown type)
    /// answered the SYN.
    ProtocolError,
    /// `EACCES`: an ICMPv6 destination unreachable for policy (administratively
    /// prohibited, source address failed ingress policy, reject route) answered
    /// the SYN.
    AccessDenied,
    /// `ENOPROTOOPT`: an ICMP protocol unreachable answered the SYN.
    ProtocolUnavailable,
    /// `EOPNOTSUPP`: an ICMP "source route failed" answered the SYN.
    NotSupported,
    /// `EHOSTDOWN`: an ICMP "destination host unknown" answered the SYN.
    HostDown,
    /// `ENONET`: an ICMP "source host isolated" answered the SYN.
    NoNetwork,
    /// `ENOENT`: no such entry (a `TCP_MD5SIG` key to delete, `tcp_md5_do_del`).
    NotFound,
    /// `ENODEV`: the socket is bound to a device the host does not have
    /// (`ip_route_connect` with `sk_bound_dev_if`, stack/netdev.rs).
    NoDevice,
    /// `ENOMEM`: no room for the socket's option memory (a `TCP_MD5SIG` key past
    /// `net.core.optmem_max`, `sock_kmalloc`).
    NoMemory,
}

impl core::fmt::Display for SocketError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            SocketError::WouldBlock => "operation would block (EAGAIN)",
            SocketError::BadHandle => "bad socket handle (EBADF)",
            SocketError::NotConnected => "socket not connected (ENOTCONN)",
            SocketError::InvalidInput => "invalid argument (EINVAL)",
            SocketError::BrokenPipe => "broken pipe (EPIPE)",
            SocketError::ConnectionRefused => "connection refused (ECONNREFUSED)",
            SocketError::ConnectionReset => "connection reset by peer (ECONNRESET)",
            SocketError::TimedOut => "connection timed out (ETIMEDOUT)",
            SocketError::AddrInUse => "address in use (EADDRINUSE)",
            SocketError::AddrNotAvailable => "address not available (EADDRNOTAVAIL)",
            SocketError::HostUnreachable => "no route to host (EHOSTUNREACH)",
            SocketError::NetworkUnreachable => "network is unreachable (ENETUNREACH)",
            SocketError::NoBufferSpace => "no buffer space available (ENOBUFS)",
            SocketError::PermissionDenied => "operation not permitted (EPERM)",
            SocketError::MessageTooLong => "message too long (EMSGSIZE)",
            SocketError::ProtocolError => "protocol error (EPROTO)",
            SocketError::AccessDenied => "permission denied (EACCES)",
            SocketError::ProtocolUnavailable => "protocol not available (ENOPROTOOPT)",
            SocketError::NotSupported => "operation not supported (EOPNOTSUPP)",
            SocketError::HostDown => "host is down (EHOSTDOWN)",
            SocketError::NoNetwork => "machine is not on the network (ENONET)",
            SocketError::NotFound => "no such entry (ENOENT)",
            SocketError::NoDevice => "no such device (ENODEV)",
            SocketError::NoMemory => "cannot allocate memory (ENOMEM)",
        };
        f.write_str(s)
    }
}

impl std::error::Error for SocketError {}

/// Each error and the errno Linux returns for it.
const ERRNOS: [(SocketError, i32); 24] = {
    use crate::posix::consts::errno::*;
    [
        (SocketError::WouldBlock, EAGAIN),
        (SocketError::BadHandle, EBADF),
        (SocketError::NotConnected, ENOTCONN),
        (SocketError::InvalidInput, EINVAL),
        (SocketError::BrokenPipe, EPIPE),
        (SocketError::ConnectionRefused, ECONNREFUSED),
        (SocketError::ConnectionReset, ECONNRESET),
        (SocketError::TimedOut, ETIMEDOUT),
        (SocketError::AddrInUse, EADDRINUSE),
        (SocketError::AddrNotAvailable, EADDRNOTAVAIL),
        (SocketError::HostUnreachable, EHOSTUNREACH),
        (SocketError::NetworkUnreachable, ENETUNREACH),
        (SocketError::NoBufferSpace, ENOBUFS),
        (SocketError::PermissionDenied, EPERM),
        (SocketError::MessageTooLong, EMSGSIZE),
        (SocketError::ProtocolError, EPROTO),
        (SocketError::AccessDenied, EACCES),
        (SocketError::ProtocolUnavailable, ENOPROTOOPT),
        (SocketError::NotSupported, EOPNOTSUPP),
        (SocketError::HostDown, EHOSTDOWN),
        (SocketError::NoNetwork, ENONET),
        (SocketError::NotFound, ENOENT),
        (SocketError::NoDevice, ENODEV),
        (SocketError::NoMemory, ENOMEM),
    ]
};

impl SocketError {
    /// The errno Linux returns for it (`ee_errno` of an error-queue entry, the
    /// socket layer's [`Errno`](crate::posix::Errno)).
    pub fn errno(self) -> i32 {
        ERRNOS
            .iter()
            .find(|(e, _)| *e == self)
            .map_or(0, |&(_, n)| n)
    }

    /// The error whose errno is `errno` (an ICMP error's `ee_errno` becoming
    /// `sk_err` again, `sock_dequeue_err_skb`), if lowtide has one.
    pub fn from_errno(errno: i32) -> Option<Self> {
        ERRNOS.iter().find(|&&(_, n)| n == errno).map(|&(e, _)| e)
    }
}

/// Which direction [`crate::Stack::shutdown`] closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// `SHUT_RD`.
    Read,
    /// `SHUT_WR`: send FIN after the queued data.
    Write,
    /// `SHUT_RDWR`.
    Both,
}

/// The `send(2)` flags that [`crate::Stack::sendmsg`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendFlags {
    /// `MSG_MORE`: more data follows; the tail is neither marked PSH nor sent as a
    /// sub-MSS segment now (`tcp_push` with `TCP_NAGLE_CORK`).
    pub more: bool,
    /// `MSG_EOR`: the last byte ends a record; later data never shares its skb
    /// (`TCP_SKB_CB(skb)->eor`, `tcp_skb_can_collapse_to`).
    pub eor: bool,
    /// `MSG_ZEROCOPY`: with `SO_ZEROCOPY` on ([`crate::SocketMut::set_zerocopy`]), the
    /// send's completion is reported on the error queue.
    pub zerocopy: bool,
    /// `MSG_OOB`: the last byte is urgent; segments carry URG and the urgent
    /// pointer until the peer acknowledges it (`tcp_mark_urg`), and the send
    /// builds one-MSS skbs.
    pub oob: bool,
    /// The send's place in its `sendmsg(2)` call ([`SendPart`]).
    pub part: SendPart,
}

/// A blocking `sendmsg(2)` is one `tcp_sendmsg_locked`, which may wait for send
/// space (`sk_stream_wait_memory`) and go on copying: a caller that waits between
/// its attempts says which one this is, so that what Linux does once per call
/// happens once: the application-limited check (`tcp_rate_check_app_limited`),
/// the `MSG_ZEROCOPY` notification id (`msg_zerocopy_realloc`, held through the
/// wait), and the `SO_TIMESTAMPING` record of the call's last byte
/// (`tcp_tx_timestamp` at `out:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SendPart {
    /// The whole call: a non-blocking send, or one that does not wait.
    #[default]
    Whole,
    /// A blocking call's first attempt: if not all of it fits, the caller waits
    /// and goes on with [`SendPart::Cont`], or ends the call with
    /// [`crate::Stack::send_end`].
    First,
    /// A later attempt of the same call, after its wait for space.
    Cont,
}

/// The caller's bytes for a Fast Open SYN (`fastopen_req->data`): readable, or
/// a buffer of that length whose copy faults (a NULL pointer): `tcp_send_syn_data`'s
/// `copy_page_from_iter` then copies nothing and the SYN falls back to a cookie
/// request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserBytes<'a> {
    /// Bytes that can be copied.
    Bytes(&'a [u8]),
    /// This many bytes, none readable.
    Fault(usize),
}

impl UserBytes<'_> {
    /// The length the caller gave.
    pub fn len(&self) -> usize {
        match self {
            UserBytes::Bytes(b) => b.len(),
            UserBytes::Fault(n) => *n,
        }
    }

    /// No bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> From<&'a [u8]> for UserBytes<'a> {
    fn from(b: &'a [u8]) -> Self {
        UserBytes::Bytes(b)
    }
}

/// What `recv(MSG_OOB)` got ([`crate::Stack::recv_oob`], `tcp_recv_urg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OobRead {
    /// The urgent byte (`MSG_OOB` in `msg_flags`).
    Byte(u8),
    /// A zero-length buffer: the byte is there but not taken (`MSG_OOB |
    /// MSG_TRUNC`; with `peek` false it counts as read all the same).
    Truncated,
    /// The peer closed before any urgent byte came: 0, end of stream.
    End,
}

/// A packet for the device: one IP packet, possibly a GSO super-packet.
///
/// The TCP checksum field holds only the pseudo-header sum (Linux's
/// CHECKSUM_PARTIAL): the device finishes it, per segment, with
/// [`lowtide_wire::gso::segment`] (or in hardware).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// IP header, TCP header and payload; only the headers if the payload is kept
    /// apart in [`Transmit::payload`].
    pub packet: Vec<u8>,
    /// The payload, when it is not in `packet`: empty ([`TxPayload::default`]) for a
    /// packet built whole; a shared slice of the send queue when the stack keeps a
    /// GSO packet's payload apart instead of copying it into `packet`
    /// ([`crate::Stack::set_tx_payload_apart`]), to be copied once into the frames
    /// that carry it ([`lowtide_wire::gso::segment_apart_into`], or
    /// [`Transmit::flatten`]); or, from a socket in pattern mode
    /// ([`crate::SocketMut::set_payload_source`]), the description of bytes the
    /// device makes when it sends the packet ([`crate::Stack::make_tx_payload`],
    /// [`Transmit::flatten`]); or a slice of a zerocopy sender's buffer
    /// ([`crate::Stack::send_zerocopy`]), always apart, whatever the packet's
    /// size: a device that copies it declares so
    /// ([`crate::Stack::set_tx_orphan_frags`]). The IP and TCP length fields and the partial checksum
    /// in `packet` count it.
    pub payload: TxPayload,
    /// Segment size for GSO; 0 if the packet is a single segment.
    pub gso_size: u16,
    /// Number of wire segments the device will make of it.
    pub gso_segs: u16,
    /// `SKB_GSO_TCP_ACCECN`: an AccECN connection's packet (`tcp_ecn_send`), whose
    /// CWR is part of ACE and stays on every segment ([`Transmit::gso`]).
    pub tcp_accecn: bool,
    /// Give this back to [`crate::Stack::handle_tx_complete`] once the device has
    /// finished with the packet (sent or dropped it): TX completion.
    pub token: TxToken,
    /// `skb->tstamp`: the earliest departure time TCP gave the packet (its
    /// `tcp_wstamp_ns` when sent: EDT), for a qdisc that honours it (sch_fq).
    pub tstamp: crate::Instant,
}

impl Transmit {
    /// How the device cuts it: `gso_size`, and `SKB_GSO_TCP_ACCECN`.
    pub fn gso(&self) -> lowtide_wire::gso::Gso {
        lowtide_wire::gso::Gso {
            size: self.gso_size,
            tcp_accecn: self.tcp_accecn,
        }
    }

    /// Length of the whole IP packet, headers and payload.
    pub fn len(&self) -> usize {
        self.packet.len() + self.payload.len()
    }

    /// Never true: a packet has headers.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies a payload kept apart into `packet` (a pattern payload made there),
    /// which then holds the whole packet.
    pub fn flatten(&mut self) {
        match core::mem::take(&mut self.payload) {
            TxPayload::Bytes(b) => self.packet.extend_from_slice(&b),
            TxPayload::Pattern(p) => {
                let at = self.packet.len();
                self.packet.resize(at + p.len(), 0);
                p.fill(&mut self.packet[at..]);
            }
        }
    }
}

/// The payload of a [`Transmit`] that is not in its `packet` (see
/// [`Transmit::payload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxPayload {
    /// Bytes (none for a packet built whole).
    Bytes(bytes::Bytes),
    /// A pattern socket's bytes, for the device to make when it sends the packet.
    Pattern(PatternPayload),
}

impl Default for TxPayload {
    fn default() -> Self {
        TxPayload::Bytes(bytes::Bytes::new())
    }
}

impl TxPayload {
    /// Bytes it holds or stands for.
    pub fn len(&self) -> usize {
        match self {
            TxPayload::Bytes(b) => b.len(),
            TxPayload::Pattern(p) => p.len(),
        }
    }

    /// True if it holds or stands for no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes: the ones held (shared), or a pattern's made into a new buffer.
    pub fn to_bytes(&self) -> bytes::Bytes {
        match self {
            TxPayload::Bytes(b) => b.clone(),
            TxPayload::Pattern(p) => p.to_bytes(),
        }
    }
}

/// Identifies a sent packet for its TX completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TxToken {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    pub(crate) truesize: u32,
    /// Stream offset of the packet's first payload byte.
    pub(crate) seq: u64,
    /// Sequence space the packet carried (payload, plus one for a FIN); 0 for SYNs
    /// and bare ACKs.
    pub(crate) len: u32,
    /// Segments this packet added to `prr_out` (`tcp_write_xmit` and
    /// `tcp_xmit_retransmit_queue` count what they send while
    /// `tcp_in_cwnd_reduction`), and the reduction's `high_seq` it counted in: a
    /// local drop takes them back, as Linux never counts an skb that
    /// `tcp_transmit_skb` failed to send.
    pub(crate) prr: (u32, u64),
    /// Which `__tcp_retransmit_skb` caller sent the packet, if one did: what a local
    /// drop of it takes back (`TxRetrans`).
    pub(crate) rtx: TxRetrans,
    /// The sending skb's fast clone this packet is (`skb_fclone_busy` until its
    /// completion), 0 if none: a control segment, or a device that orphans.
    pub(crate) fclone: u32,
    /// The `MSG_ZEROCOPY` notification id of the zerocopy data the packet carries,
    /// while the device holds it (tcp/errqueue.rs).
    pub(crate) zc: Option<u32>,
}

/// How a packet was a retransmission. Linux learns at once that `tcp_transmit_skb`
/// failed (a qdisc's `NET_XMIT_DROP`) and then counts none of what follows a sent
/// retransmission: no `TCPCB_RETRANS` or `retrans_out` (`tcp_retransmit_skb`), no
/// MIB, `prr_out` or timer restart (`tcp_xmit_retransmit_queue`), no backoff
/// (`tcp_retransmit_timer`), no probe state (`tcp_send_loss_probe`). lowtide hears of
/// the drop later, so the token says what to take back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) enum TxRetrans {
    /// Not a retransmission: new data, a resend after a local drop, control.
    #[default]
    None,
    /// `tcp_xmit_retransmit_queue`'s `tcp_retransmit_skb`, counted in `mib`
    /// (`TCPFastRetrans`, `TCPSlowStartRetrans` in Loss).
    Queue {
        /// The MIB the walk counted the segments in.
        mib: crate::Mib,
    },
    /// The same for the head, whose retransmission restarted the retransmit timer
    /// (`rearm_timer`); `timer` is the timer as it was before the walk.
    QueueHead {
        /// The MIB the walk counted the segments in.
        mib: crate::Mib,
        /// `icsk_pending` and its deadline before the walk.
        timer: Option<(crate::tcp::inet_connection_sock::Pending, crate::Instant)>,
    },
    /// `tcp_retransmit_timer`'s retransmission of the head.
    Timer {
        /// `icsk_rto` before this timeout doubled it: a failed retransmission
        /// does not back off.
        rto: core::time::Duration,
    },
    /// The same when the peer's window is zero, where the timer does not look at
    /// the result ("receiver dastardly shrinks window").
    TimerZeroWindow,
    /// `tcp_send_loss_probe`'s `__tcp_retransmit_skb` of the last skb.
    LossProbe,
}

impl TxToken {
    /// The sending socket's identity (its slot and generation): what a qdisc that
    /// sorts by socket (sch_fq's `skb->sk`) keys on; `None` for a packet of no
    /// socket (a reset for no connection, TIME-WAIT's ACKs).
    pub fn socket(&self) -> Option<u64> {
        (self.index != u32::MAX).then_some(((self.generation as u64) << 32) | self.index as u64)
    }
}

/// Whether the caller already verified the checksums of a received packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxChecksum {
    /// Verify IP and TCP checksums (software path).
    Verify,
    /// The device verified them (`CHECKSUM_UNNECESSARY`, e.g. after GRO).
    Unnecessary,
}
