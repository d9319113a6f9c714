//! Constants Linux's TCP keeps in its headers, in one place, each under its Linux
//! name: include/net/tcp.h first, then the few TCP takes from include/linux/tcp.h,
//! include/uapi/linux/tcp.h, include/net/sock.h, include/linux/skbuff.h,
//! include/linux/netdevice.h and include/uapi/linux/in.h.
//!
//! Constants of one algorithm stay beside it, as Linux keeps them in its .c file or
//! they have one reader: CUBIC's and BBR's in cong/, SYN cookies' in syncookies.rs,
//! the ECN flags in ecn.rs, the keepalive bounds (`MAX_TCP_KEEP*`) in keepalive.rs,
//! `TCP_INFINITE_SSTHRESH` as [`super::cong::INFINITE_SSTHRESH`].

use core::time::Duration;

// ---- include/net/tcp.h ----------------------------------------------------------

/// `MAX_TCP_HEADER`: `L1_CACHE_ALIGN(128 + MAX_HEADER)`, the header room of every TCP
/// skb. 256 on x86_64 when no IP tunnel is built in (`MAX_HEADER` = `LL_MAX_HEADER`),
/// as on this project's reference kernel (Linux 6.18: `ss -m` shows `w869` for one
/// 37-byte skb); kernels with tunnels built in have `MAX_HEADER` + 48, hence 320.
pub const MAX_TCP_HEADER: u32 = 256;
/// `MAX_TCP_WINDOW`: the largest unscaled window offered to a peer that may read the
/// field as signed (`tcp_workaround_signed_windows`); also the largest `TCP_MAXSEG`.
pub const MAX_TCP_WINDOW: u32 = 32767;
/// `TCP_MIN_MSS`: the smallest MSS (`TCP_MAXSEG`, `rcv_mss` guesses, quick-ACK sizes).
pub const TCP_MIN_MSS: u32 = 88;
/// `TCP_FASTRETRANS_THRESH`.
pub const TCP_FASTRETRANS_THRESH: u8 = 3;
/// `TCP_MAX_QUICKACKS`.
pub const TCP_MAX_QUICKACKS: u32 = 16;
/// `TCP_MAX_WSCALE` ([RFC 7323 section 2.3](https://www.rfc-editor.org/rfc/rfc7323#section-2.3)).
pub const TCP_MAX_WSCALE: i32 = 14;
/// `TCP_TIMEWAIT_LEN`.
pub const TCP_TIMEWAIT_LEN: Duration = Duration::from_secs(60);
/// `TCP_DELACK_MAX` (HZ/5): the longest delay in pingpong mode or after a push,
/// and the route's `icsk_delack_max` default.
pub const TCP_DELACK_MAX: Duration = Duration::from_millis(200);
/// `TCP_ATO_MIN` (HZ/25): the smallest ACK timeout.
pub const TCP_ATO_MIN: Duration = Duration::from_millis(40);
/// `TCP_DELACK_MIN`.
pub const TCP_DELACK_MIN: Duration = Duration::from_millis(40);
/// `TCP_THIN_LINEAR_RETRIES`: timeouts a thin stream's RTO stays linear for.
pub const TCP_THIN_LINEAR_RETRIES: u8 = 6;
/// `TCP_RTO_MAX`.
pub const TCP_RTO_MAX: Duration = Duration::from_secs(120);
/// `TCP_RTO_MIN`: the RTO base of `tcp_model_timeout` for synchronized states.
pub const TCP_RTO_MIN: Duration = Duration::from_millis(200);
/// `TCP_TIMEOUT_MIN` (2 jiffies at HZ=1000): slack added to the reorder timer, the
/// shortest timer a clamp to the user timeout leaves, and how soon a SYN goes again
/// after an unacceptable ACK in SYN-SENT.
pub const TCP_TIMEOUT_MIN: Duration = Duration::from_millis(2);
/// `TCP_TIMEOUT_INIT`: the RTO before any RTT sample
/// ([RFC 6298 section 2.1](https://www.rfc-editor.org/rfc/rfc6298#section-2.1)).
pub const TCP_TIMEOUT_INIT: Duration = Duration::from_secs(1);
/// `TCP_TIMEOUT_FALLBACK`: the RTO when the handshake gave no RTT sample
/// (RFC 6298 section 5.7).
pub const TCP_TIMEOUT_FALLBACK: Duration = Duration::from_secs(3);
/// `TCP_RESOURCE_PROBE_INTERVAL`: the retry after a local drop (HZ / 2).
pub const TCP_RESOURCE_PROBE_INTERVAL: Duration = Duration::from_millis(500);
/// `TCP_PAWS_WRAP` (`INT_MAX / USEC_PER_SEC`, Linux 6.7+; it was 24 days before
/// microsecond timestamps): a `ts_recent` stored this many seconds ago is no longer
/// trusted by PAWS.
pub const TCP_PAWS_WRAP_SECS: u64 = i32::MAX as u64 / 1_000_000;
/// `TCP_PAWS_MSL`: a reset is let through PAWS once `ts_recent` is this many
/// seconds old (`tcp_paws_reject`).
pub const TCP_PAWS_MSL_SECS: u64 = 60;
/// `TCP_PAWS_WINDOW`: the replay window of PAWS, in timestamp ticks.
pub const TCP_PAWS_WINDOW: i32 = 1;
/// `TCPOLEN_TSTAMP_ALIGNED`: the timestamp option's room in every segment.
pub const TCPOLEN_TSTAMP_ALIGNED: u32 = 12;
/// `TCP_INIT_CWND`: the initial congestion window, in segments.
pub const TCP_INIT_CWND: u32 = 10;
/// `TCP_MIN_RCVMSS`: the floor of the first `rcv_mss` guess.
pub const TCP_MIN_RCVMSS: u32 = 536;
/// `TCP_RMEM_TO_WIN_SCALE`: `scaling_ratio` is in 1/256ths.
pub const TCP_RMEM_TO_WIN_SCALE: u32 = 8;
/// `TCP_DEFAULT_SCALING_RATIO`: 50 %, until a segment is measured.
pub const TCP_DEFAULT_SCALING_RATIO: u8 = 1 << (TCP_RMEM_TO_WIN_SCALE - 1);
/// `TCP_RACK_RECOVERY_THRESH`: recoveries a grown reordering window persists for.
pub const TCP_RACK_RECOVERY_THRESH: u8 = 16;
/// `TCP_MAX_REORDERING`: the `tcp_max_reordering` default.
pub const TCP_MAX_REORDERING: u32 = 300;

// ---- include/linux/tcp.h and include/uapi/linux/tcp.h --------------------------

/// `TCP_NUM_SACKS`: most SACK blocks one ACK carries, or a receiver remembers.
pub const TCP_NUM_SACKS: usize = 4;
/// `TCP_MSS_DEFAULT`: RFC 1122's 536.
pub const TCP_MSS_DEFAULT: u32 = 536;

// ---- include/net/sock.h, include/linux/skbuff.h, include/linux/netdevice.h -----

/// `SOCK_MIN_RCVBUF`: `2048 + SKB_DATA_ALIGN(sizeof(struct sk_buff))`.
pub const SOCK_MIN_RCVBUF: u32 = 2048 + 256;
/// `SOCK_MIN_SNDBUF`: `2 * TCP_SKB_MIN_TRUESIZE` as the engine uses it.
pub const SOCK_MIN_SNDBUF: u32 = 4608;
/// Fixed memory cost of an skb beyond its payload, for `truesize`: Linux's
/// `SKB_TRUESIZE(MAX_TCP_HEADER)` (`tcp_stream_alloc_skb`), `sizeof(struct sk_buff)`
/// plus `sizeof(struct skb_shared_info)`, each cache-aligned (256 + 320 on x86_64),
/// plus the header room.
pub const SKB_OVERHEAD: u32 = 256 + 320 + MAX_TCP_HEADER;
/// `GSO_LEGACY_MAX_SIZE`: a device's `gso_max_size` and `gso_ipv4_max_size` unless
/// its driver raises them (BIG TCP), as on tun and veth; lowtide's device keeps it.
pub const GSO_LEGACY_MAX_SIZE: u32 = 65536;
/// `GSO_MAX_SEGS`: a device's `gso_max_segs` default, which `sk_setup_caps` copies
/// to `sk_gso_max_segs`.
pub const GSO_MAX_SEGS: u32 = 65535;
/// `sk_gso_max_size` as `sk_setup_caps` sets it (sock.c `sk_dst_gso_max_size`): the
/// route device's `gso_ipv4_max_size` (IPv4 and v4-mapped sockets) or
/// `gso_max_size` (IPv6), both [`GSO_LEGACY_MAX_SIZE`] here, less `MAX_TCP_HEADER +
/// 1`: 65279 bytes. The largest TSO packet: `tcp_xmit_size_goal`,
/// `tcp_tso_autosize` and CUBIC's `hystart_ack_delay` read it.
pub const SK_GSO_MAX_SIZE: u32 = GSO_LEGACY_MAX_SIZE - (MAX_TCP_HEADER + 1);

// ---- include/uapi/linux/in.h (IP_MTU_DISCOVER values, used by tcp/pmtu.rs) -----

/// `IP_PMTUDISC_DONT`: never set DF; ICMP "fragmentation needed" shrinks nothing at
/// once (the route still learns the MTU, which the next `tcp_current_mss` takes).
pub const IP_PMTUDISC_DONT: u8 = 0;
/// `IP_PMTUDISC_WANT`: DF unless the route's MTU is locked; the default
/// (`inet_create` with `net.ipv4.ip_no_pmtu_disc` 0).
pub const IP_PMTUDISC_WANT: u8 = 1;
/// `IP_PMTUDISC_DO`: always DF.
pub const IP_PMTUDISC_DO: u8 = 2;
/// `IP_PMTUDISC_PROBE`: no DF from `ip_dont_fragment` (TCP's `__ip_queue_xmit`).
pub const IP_PMTUDISC_PROBE: u8 = 3;
/// `IP_PMTUDISC_INTERFACE`: the device's MTU only; ICMP MTU reports are refused
/// (`ip_sk_accept_pmtu`).
pub const IP_PMTUDISC_INTERFACE: u8 = 4;
/// `IP_PMTUDISC_OMIT`: as `INTERFACE`, and fragments allowed.
pub const IP_PMTUDISC_OMIT: u8 = 5;

/// `tcp_init_sock`'s `tp->app_limited = ~0U` ("a bubble in the pipe until at least
/// the first ACK"): in Linux's 32-bit sequence space every count of delivered
/// packets is after it, so the first rate sample (`tcp_rate_gen`) ends it.
pub const APP_LIMITED_UNTIL_ACKED: u64 = u32::MAX as u64;
