//! Linux's constants for the socket API (x86-64 and aarch64 values, which agree).
#![allow(missing_docs)]

/// `AF_INET`.
pub const AF_INET: i32 = 2;
/// `AF_INET6`.
pub const AF_INET6: i32 = 10;
pub const SOCK_STREAM: i32 = 1;
/// `SOCK_TYPE_MASK`: the type bits of `socket(2)`'s `type`.
pub const SOCK_TYPE_MASK: i32 = 0xf;
/// `SOCK_MAX`: one past the last socket type (`SOCK_PACKET`).
pub const SOCK_MAX: i32 = 11;
/// `IPPROTO_MAX`: one past the last protocol number `inet_create` takes.
pub const IPPROTO_MAX: i32 = 263;
pub const SOCK_NONBLOCK: i32 = 0o4000;
pub const SOCK_CLOEXEC: i32 = 0o2000000;
pub const IPPROTO_IP: i32 = 0;
pub const IPPROTO_TCP: i32 = 6;
/// `IPPROTO_IPV6` (`SOL_IPV6`).
pub const IPPROTO_IPV6: i32 = 41;
/// `IPV6_V6ONLY`.
pub const IPV6_V6ONLY: i32 = 26;

pub const SOL_SOCKET: i32 = 1;
pub const SOL_TCP: i32 = 6;
pub const SO_REUSEADDR: i32 = 2;
pub const SO_TYPE: i32 = 3;
pub const SO_ERROR: i32 = 4;
pub const SO_SNDBUF: i32 = 7;
pub const SO_RCVBUF: i32 = 8;
/// `SO_RCVLOWAT`.
pub const SO_RCVLOWAT: i32 = 18;
/// `SO_SNDLOWAT`: readable only (always 1).
pub const SO_SNDLOWAT: i32 = 19;
pub const SO_KEEPALIVE: i32 = 9;
pub const SO_OOBINLINE: i32 = 10;
pub const SO_LINGER: i32 = 13;
pub const SO_REUSEPORT: i32 = 15;
pub const SO_MAX_PACING_RATE: i32 = 47;
pub const SO_MEMINFO: i32 = 55;
pub const SO_MARK: i32 = 36;
pub const SO_ZEROCOPY: i32 = 60;
/// `SO_PRIORITY`: `sk_priority`.
pub const SO_PRIORITY: i32 = 12;
/// `SO_TXREHASH`: `sk_txrehash`, whether timeouts pick a new transmit hash.
pub const SO_TXREHASH: i32 = 74;
/// `SO_ACCEPTCONN` (getsockopt only): 1 on a listening socket.
pub const SO_ACCEPTCONN: i32 = 30;
/// `SO_SNDBUFFORCE`: `SO_SNDBUF` past `net.core.wmem_max` (`CAP_NET_ADMIN`).
pub const SO_SNDBUFFORCE: i32 = 32;
/// `SO_RCVBUFFORCE`: `SO_RCVBUF` past `net.core.rmem_max` (`CAP_NET_ADMIN`).
pub const SO_RCVBUFFORCE: i32 = 33;
/// `SO_PROTOCOL` (getsockopt only): `sk_protocol`.
pub const SO_PROTOCOL: i32 = 38;
/// `SO_DOMAIN` (getsockopt only): `sk_family`.
pub const SO_DOMAIN: i32 = 39;
/// `SO_RCVTIMEO` (`SO_RCVTIMEO_OLD`): a `struct timeval`, `sk_rcvtimeo`.
pub const SO_RCVTIMEO: i32 = 20;
/// `SO_SNDTIMEO` (`SO_SNDTIMEO_OLD`): a `struct timeval`, `sk_sndtimeo`.
pub const SO_SNDTIMEO: i32 = 21;
/// `SO_RCVTIMEO_NEW`: `SO_RCVTIMEO` with a `struct __kernel_sock_timeval`.
pub const SO_RCVTIMEO_NEW: i32 = 66;
/// `SO_SNDTIMEO_NEW`: `SO_SNDTIMEO` with a `struct __kernel_sock_timeval`.
pub const SO_SNDTIMEO_NEW: i32 = 67;
/// `SO_BINDTODEVICE`: the socket's device by name (`sk_bound_dev_if`).
pub const SO_BINDTODEVICE: i32 = 25;
/// `SO_BINDTOIFINDEX`: the socket's device by interface index (Linux 5.1+).
pub const SO_BINDTOIFINDEX: i32 = 62;
/// `IFNAMSIZ`: a device name's room, its NUL included.
pub const IFNAMSIZ: usize = 16;
/// `SO_PEEK_OFF`: `sk_peek_off`, where `MSG_PEEK` starts (negative: off).
pub const SO_PEEK_OFF: i32 = 42;
/// `SO_TIMESTAMPING` (`SO_TIMESTAMPING_OLD` on x86_64): `SOF_TIMESTAMPING_*` flags.
pub const SO_TIMESTAMPING: i32 = 37;
/// `SCM_TIMESTAMPING`: the cmsg of a timestamp (`struct scm_timestamping`).
pub const SCM_TIMESTAMPING: i32 = SO_TIMESTAMPING;
/// `SCM_TIMESTAMPING_OPT_STATS`: the cmsg of `SOF_TIMESTAMPING_OPT_STATS`'s
/// netlink attributes.
pub const SCM_TIMESTAMPING_OPT_STATS: i32 = 54;
/// `SO_TIMESTAMPING_NEW`: `SO_TIMESTAMPING` with 64-bit time cmsgs.
pub const SO_TIMESTAMPING_NEW: i32 = 65;
/// `SCM_TIMESTAMPING_NEW` (`struct scm_timestamping64`).
pub const SCM_TIMESTAMPING_NEW: i32 = SO_TIMESTAMPING_NEW;
/// `SO_TIMESTAMP` (`SO_TIMESTAMP_OLD` on x86_64): reads carry their arrival time.
pub const SO_TIMESTAMP: i32 = 29;
/// `SCM_TIMESTAMP`: `struct timeval`.
pub const SCM_TIMESTAMP: i32 = SO_TIMESTAMP;
/// `SO_TIMESTAMPNS` (`SO_TIMESTAMPNS_OLD` on x86_64): ... as a `struct timespec`.
pub const SO_TIMESTAMPNS: i32 = 35;
/// `SCM_TIMESTAMPNS`: `struct timespec`.
pub const SCM_TIMESTAMPNS: i32 = SO_TIMESTAMPNS;
/// `SO_TIMESTAMP_NEW`: `SO_TIMESTAMP` with 64-bit time (`struct __kernel_sock_timeval`).
pub const SO_TIMESTAMP_NEW: i32 = 63;
/// `SCM_TIMESTAMP_NEW`.
pub const SCM_TIMESTAMP_NEW: i32 = SO_TIMESTAMP_NEW;
/// `SO_TIMESTAMPNS_NEW`: `SO_TIMESTAMPNS` with 64-bit time (`struct __kernel_timespec`).
pub const SO_TIMESTAMPNS_NEW: i32 = 64;
/// `SCM_TIMESTAMPNS_NEW`.
pub const SCM_TIMESTAMPNS_NEW: i32 = SO_TIMESTAMPNS_NEW;
pub const SOL_IP: i32 = 0;
/// `IP_TOS`: the TOS byte of the socket's IPv4 packets.
pub const IP_TOS: i32 = 1;
/// `IP_TTL`: the TTL of the socket's IPv4 packets (-1: `net.ipv4.ip_default_ttl`).
pub const IP_TTL: i32 = 2;
/// `IP_MINTTL`: IPv4 segments arriving with a lower TTL are dropped.
pub const IP_MINTTL: i32 = 21;
/// `IP_MTU_DISCOVER`: `IP_PMTUDISC_*`, DF and path MTU discovery.
pub const IP_MTU_DISCOVER: i32 = 10;
pub const IP_RECVERR: i32 = 11;
/// `IP_MTU` (getsockopt only): the route's MTU of a connected socket.
pub const IP_MTU: i32 = 14;
/// `IP_FREEBIND`: `bind(2)` to an address the host does not have.
pub const IP_FREEBIND: i32 = 15;
pub const IP_PMTUDISC_DONT: i32 = crate::tcp::pmtu::IP_PMTUDISC_DONT as i32;
pub const IP_PMTUDISC_WANT: i32 = crate::tcp::pmtu::IP_PMTUDISC_WANT as i32;
pub const IP_PMTUDISC_DO: i32 = crate::tcp::pmtu::IP_PMTUDISC_DO as i32;
pub const IP_PMTUDISC_PROBE: i32 = crate::tcp::pmtu::IP_PMTUDISC_PROBE as i32;
pub const IP_PMTUDISC_INTERFACE: i32 = crate::tcp::pmtu::IP_PMTUDISC_INTERFACE as i32;
pub const IP_PMTUDISC_OMIT: i32 = crate::tcp::pmtu::IP_PMTUDISC_OMIT as i32;
pub const SOL_IPV6: i32 = 41;
pub const IPV6_RECVERR: i32 = 25;
/// `IPV6_MTU` (getsockopt): the route's MTU of a connected socket.
pub const IPV6_MTU: i32 = 24;
/// `IPV6_MTU_DISCOVER`: `IPV6_PMTUDISC_*` (the values of `IP_PMTUDISC_*`).
pub const IPV6_MTU_DISCOVER: i32 = 23;
/// `IPV6_TCLASS`: the traffic class of an AF_INET6 socket's IPv6 packets.
pub const IPV6_TCLASS: i32 = 67;
/// `IPV6_AUTOFLOWLABEL`: IPv6 flow labels from the flow's hash, on or off.
pub const IPV6_AUTOFLOWLABEL: i32 = 70;
/// `IPV6_UNICAST_HOPS`: the hop limit of an AF_INET6 socket's IPv6 packets (-1:
/// the route's, `net.ipv6.conf.all.hop_limit`).
pub const IPV6_UNICAST_HOPS: i32 = 16;
/// `IPV6_MINHOPCOUNT`: IPv6 segments arriving with a lower hop limit are dropped.
pub const IPV6_MINHOPCOUNT: i32 = 73;

pub const TCP_NODELAY: i32 = 1;
pub const TCP_MAXSEG: i32 = 2;
pub const TCP_CORK: i32 = 3;
/// `TCP_LINGER2`: an orphan's FIN-WAIT-2 lifetime in seconds (-1: reset).
pub const TCP_LINGER2: i32 = 8;
/// `TCP_SYNCNT`: SYN retransmissions before a connect gives up.
pub const TCP_SYNCNT: i32 = 7;
/// `TCP_THIN_LINEAR_TIMEOUTS`: linear RTOs while the stream is thin.
pub const TCP_THIN_LINEAR_TIMEOUTS: i32 = 16;
/// `TCP_THIN_DUPACK`: accepted (0 or 1) and ignored since Linux 4.15.
pub const TCP_THIN_DUPACK: i32 = 17;
/// `TCP_DEFER_ACCEPT`: seconds a listener's request waits for data after the
/// handshake's bare ACK.
pub const TCP_DEFER_ACCEPT: i32 = 9;
/// `TCP_QUICKACK`: 0 delays ACKs for replies to carry (pingpong mode), 1 ACKs now.
pub const TCP_QUICKACK: i32 = 12;
/// `TCP_WINDOW_CLAMP`: the largest window to advertise.
pub const TCP_WINDOW_CLAMP: i32 = 10;
/// `TCP_TIMESTAMP`: the TSval clock with the socket's offset (set: `TCP_REPAIR` only).
pub const TCP_TIMESTAMP: i32 = 24;
/// `TCP_SAVE_SYN`: a listener keeps its SYNs' headers for its children.
pub const TCP_SAVE_SYN: i32 = 27;
/// `TCP_SAVED_SYN` (getsockopt only): the SYN's IP and TCP headers, once.
pub const TCP_SAVED_SYN: i32 = 28;
/// `TCP_TX_DELAY`: microseconds added to each packet's departure time.
pub const TCP_TX_DELAY: i32 = 37;
pub const TCP_KEEPIDLE: i32 = 4;
pub const TCP_KEEPINTVL: i32 = 5;
pub const TCP_KEEPCNT: i32 = 6;
pub const TCP_INFO: i32 = 11;
pub const TCP_CONGESTION: i32 = 13;
/// `TCP_ULP`: attach an upper layer protocol by name (posix/ulp.rs).
pub const TCP_ULP: i32 = 31;
pub const TCP_USER_TIMEOUT: i32 = 18;
/// `TCP_RTO_MAX_MS` (Linux 6.15+): the socket's largest RTO, milliseconds.
pub const TCP_RTO_MAX_MS: i32 = 44;
/// `TCP_RTO_MIN_US` (Linux 6.15+): the socket's smallest RTO, microseconds.
pub const TCP_RTO_MIN_US: i32 = 45;
pub const TCP_NOTSENT_LOWAT: i32 = 25;
pub const TCP_CC_INFO: i32 = 26;
/// `TCP_INQ`: report the bytes left to read in a `TCP_CM_INQ` cmsg on `recvmsg`.
pub const TCP_INQ: i32 = 36;
/// `TCP_CM_INQ`: the cmsg type of that report (`TCP_INQ`'s value).
pub const TCP_CM_INQ: i32 = TCP_INQ;
pub const TCP_FASTOPEN: i32 = 23;
pub const TCP_FASTOPEN_CONNECT: i32 = 30;
pub const TCP_FASTOPEN_KEY: i32 = 33;
pub const TCP_FASTOPEN_NO_COOKIE: i32 = 34;
/// `TCP_MD5SIG`: add or delete a TCP-MD5 key (`struct tcp_md5sig`, RFC 2385).
pub const TCP_MD5SIG: i32 = 14;
/// `TCP_MD5SIG_EXT`: the same with `tcpm_flags` (a prefix, a device) honoured.
pub const TCP_MD5SIG_EXT: i32 = 32;
/// `sizeof(struct tcp_md5sig)`: a `sockaddr_storage`, flags, prefix length, key
/// length, interface index and 80 key bytes.
pub const TCP_MD5SIG_LEN: usize = 216;
/// `TCPI_OPT_SYN_DATA`: `tcpi_options` bit of data acknowledged in a SYN.
pub const TCPI_OPT_SYN_DATA: u8 = 32;
/// `TCPI_OPT_TFO_CHILD`: `tcpi_options` bit of a passive Fast Open child.
pub const TCPI_OPT_TFO_CHILD: u8 = 128;

pub const MSG_OOB: i32 = 0x1;
pub const MSG_PEEK: i32 = 0x2;
pub const MSG_CTRUNC: i32 = 0x8;
pub const MSG_TRUNC: i32 = 0x20;
pub const MSG_DONTWAIT: i32 = 0x40;
pub const MSG_EOR: i32 = 0x80;
pub const MSG_WAITALL: i32 = 0x100;
pub const MSG_ERRQUEUE: i32 = 0x2000;
pub const MSG_NOSIGNAL: i32 = 0x4000;
pub const MSG_ZEROCOPY: i32 = 0x4000000;
pub const MSG_MORE: i32 = 0x8000;
pub const MSG_FASTOPEN: i32 = 0x2000_0000;

pub const O_RDWR: i32 = 2;
pub const O_NONBLOCK: i32 = 0o4000;
pub const F_GETFL: i32 = 3;
pub const F_SETFL: i32 = 4;

/// `SIOCINQ` (`FIONREAD`).
pub const SIOCINQ: u64 = 0x541B;
/// `SIOCOUTQ` (`TIOCOUTQ`).
pub const SIOCOUTQ: u64 = 0x5411;
pub const SIOCOUTQNSD: u64 = 0x894B;
/// `SIOCATMARK` (`sockatmark(3)`).
pub const SIOCATMARK: u64 = 0x8905;

pub const SHUT_RD: i32 = 0;
pub const SHUT_WR: i32 = 1;
pub const SHUT_RDWR: i32 = 2;
/// `sk_shutdown`'s bits (`include/net/sock.h`).
pub const RCV_SHUTDOWN: u8 = 1;
/// See [`RCV_SHUTDOWN`].
pub const SEND_SHUTDOWN: u8 = 2;

pub const POLLIN: u32 = 0x1;
pub const POLLPRI: u32 = 0x2;
pub const POLLOUT: u32 = 0x4;
pub const POLLERR: u32 = 0x8;
pub const POLLHUP: u32 = 0x10;
pub const POLLNVAL: u32 = 0x20;
pub const POLLRDNORM: u32 = 0x40;
pub const POLLWRNORM: u32 = 0x100;
pub const POLLRDHUP: u32 = 0x2000;
pub const EPOLLET: u32 = 1 << 31;
pub const EPOLLONESHOT: u32 = 1 << 30;
/// Wake only one of the epoll instances waiting on the file (Linux 4.5).
pub const EPOLLEXCLUSIVE: u32 = 1 << 28;
/// Keeps the system awake while the event is pending (needs CAP_BLOCK_SUSPEND).
pub const EPOLLWAKEUP: u32 = 1 << 29;
/// An item's flags that are not events (fs/eventpoll.c `EP_PRIVATE_BITS`): never
/// reported, and all a disarmed `EPOLLONESHOT` item keeps.
pub const EP_PRIVATE_BITS: u32 = EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;
/// The events an `EPOLLEXCLUSIVE` item may ask for (fs/eventpoll.c).
pub const EPOLLEXCLUSIVE_OK_BITS: u32 =
    POLLIN | POLLOUT | POLLERR | POLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;
pub const EPOLL_CTL_ADD: i32 = 1;
pub const EPOLL_CTL_DEL: i32 = 2;
pub const EPOLL_CTL_MOD: i32 = 3;

/// Linux's errno values.
pub mod errno {
    pub const EPERM: i32 = 1;
    pub const ENOENT: i32 = 2;
    pub const ENXIO: i32 = 6;
    pub const EBADF: i32 = 9;
    pub const EAGAIN: i32 = 11;
    pub const ENOMEM: i32 = 12;
    pub const EACCES: i32 = 13;
    pub const EFAULT: i32 = 14;
    pub const EEXIST: i32 = 17;
    pub const ENODEV: i32 = 19;
    pub const EINVAL: i32 = 22;
    pub const EMFILE: i32 = 24;
    pub const ENOTTY: i32 = 25;
    pub const ESPIPE: i32 = 29;
    pub const EPIPE: i32 = 32;
    pub const EDOM: i32 = 33;
    pub const ENONET: i32 = 64;
    pub const EPROTO: i32 = 71;
    pub const ENOTSOCK: i32 = 88;
    pub const EDESTADDRREQ: i32 = 89;
    pub const EMSGSIZE: i32 = 90;
    pub const ENOPROTOOPT: i32 = 92;
    pub const EPROTONOSUPPORT: i32 = 93;
    pub const ESOCKTNOSUPPORT: i32 = 94;
    pub const EOPNOTSUPP: i32 = 95;
    pub const EAFNOSUPPORT: i32 = 97;
    pub const EADDRINUSE: i32 = 98;
    pub const EADDRNOTAVAIL: i32 = 99;
    pub const ENETUNREACH: i32 = 101;
    pub const ENOBUFS: i32 = 105;
    pub const ECONNABORTED: i32 = 103;
    pub const ECONNRESET: i32 = 104;
    pub const EISCONN: i32 = 106;
    pub const ENOTCONN: i32 = 107;
    pub const ETIMEDOUT: i32 = 110;
    pub const ECONNREFUSED: i32 = 111;
    pub const EHOSTDOWN: i32 = 112;
    pub const EHOSTUNREACH: i32 = 113;
    pub const EALREADY: i32 = 114;
    pub const EINPROGRESS: i32 = 115;
}
