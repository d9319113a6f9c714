//! Stack configuration under Linux's sysctl names (`net.ipv4.tcp_*`, `net.core.*`).
//!
//! Every name here has an effect in the engine; an unknown name or a bad value is an
//! error, never silently ignored.
//!
//! [`Config`] holds every setting; [`Config::set`] hands a name to its group's
//! setter, one file a group as Linux keeps its tables: `tcp.rs` (`net.ipv4.tcp_*`,
//! sysctl_net_ipv4.c), `net_core.rs` (`net.core.*`), `icmp.rs` (`net.ipv4.icmp_*`,
//! `net.ipv6.icmp.*`), `module.rs` (congestion control module parameters),
//! `experimental.rs` (lowtide's own switches); `names.rs` lists every name.

use serde::Serialize;

mod experimental;
mod icmp;
mod ip;
mod module;
mod names;
mod net_core;
mod parse;
mod tcp;

use parse::bad;

/// Why a sysctl could not be set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// No sysctl of that name exists in lowtide.
    UnknownName(String),
    /// The value does not parse or is out of range.
    BadValue {
        /// The sysctl.
        name: String,
        /// The rejected value.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
}

impl core::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ConfigError::UnknownName(n) => write!(f, "unknown sysctl '{n}'"),
            ConfigError::BadValue {
                name,
                value,
                expected,
            } => write!(f, "bad value '{value}' for {name}: expected {expected}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Stack-wide settings. Defaults are Linux 6.x's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    /// `net.ipv4.tcp_wmem`: send buffer min, default, max (bytes).
    pub tcp_wmem: [u32; 3],
    /// `net.ipv4.tcp_rmem`: receive buffer min, default, max (bytes).
    pub tcp_rmem: [u32; 3],
    /// `net.ipv4.tcp_mem`: stack-wide TCP memory in 4 KB pages: below the first
    /// value no socket is refused; above the second the stack is under memory
    /// pressure; above the third no more is granted (tcp/mem.rs). Linux sizes it
    /// from the host's memory (`tcp_init_mem`: a sixteenth of the free buffer
    /// pages, x 3/4, x 1, x 3/2); the default is what that gives on the 24 GB
    /// host the kernel's figures were measured on: 287892 383858 575784 (1.1, 1.5
    /// and 2.2 GB).
    pub tcp_mem: [u64; 3],
    /// `net.ipv4.tcp_sack`: offer and accept SACK (RFC 2018).
    pub tcp_sack: bool,
    /// `net.ipv4.tcp_dsack`: send D-SACK blocks (RFC 2883).
    pub tcp_dsack: bool,
    /// `net.ipv4.tcp_comp_sack_nr`: most ACKs held back while out-of-order data is
    /// held (SACK compression); 0 sends every one.
    pub tcp_comp_sack_nr: u8,
    /// `net.ipv4.tcp_comp_sack_delay_ns`: longest hold of a compressed SACK (ns;
    /// otherwise 5 % of the RTT).
    pub tcp_comp_sack_delay_ns: u64,
    /// `net.ipv4.tcp_comp_sack_slack_ns`: the compression hrtimer's slack
    /// (`hrtimer_start_range_ns`, default 100 us): a soft hrtimer runs once its
    /// range has ended, so the held ACK goes at the delay plus this (tcp/compsack.rs).
    pub tcp_comp_sack_slack_ns: u64,
    /// `net.ipv4.tcp_timestamps`: offer and accept timestamps (RFC 7323).
    pub tcp_timestamps: bool,
    /// `net.ipv4.tcp_window_scaling`: offer and accept window scaling (RFC 7323).
    pub tcp_window_scaling: bool,
    /// `net.ipv4.tcp_moderate_rcvbuf`: receive buffer autotuning.
    pub tcp_moderate_rcvbuf: bool,
    /// `net.ipv4.tcp_slow_start_after_idle`: restart from the initial window after an
    /// idle period longer than the RTO (RFC 7661's predecessor, RFC 2861).
    pub tcp_slow_start_after_idle: bool,
    /// `net.ipv4.tcp_syn_retries`: SYN retransmissions before giving up.
    pub tcp_syn_retries: u8,
    /// `net.ipv4.tcp_synack_retries`: SYN-ACK retransmissions before giving up.
    pub tcp_synack_retries: u8,
    /// `net.ipv4.tcp_syn_linear_timeouts` (Linux 6.5): a SYN's first this many
    /// retransmission timeouts do not back off (one initial RTO apart), and SYN-SENT
    /// gets as many retransmissions more before giving up.
    pub tcp_syn_linear_timeouts: u8,
    /// `net.ipv4.tcp_thin_linear_timeouts`: a thin stream (fewer than 4 packets in
    /// flight) keeps its RTO through its first `TCP_THIN_LINEAR_RETRIES` timeouts
    /// instead of doubling it (also `TCP_THIN_LINEAR_TIMEOUTS` per socket).
    pub tcp_thin_linear_timeouts: bool,
    /// `net.ipv4.tcp_retries2`: RTO retransmissions of data before aborting.
    pub tcp_retries2: u8,
    /// `net.ipv4.tcp_fin_timeout`: seconds in FIN-WAIT-2 after close.
    pub tcp_fin_timeout: u32,
    /// `net.ipv4.tcp_keepalive_time`: seconds of silence before the first
    /// keepalive probe of an `SO_KEEPALIVE` socket.
    pub tcp_keepalive_time: u32,
    /// `net.ipv4.tcp_keepalive_intvl`: seconds between keepalive probes.
    pub tcp_keepalive_intvl: u32,
    /// `net.ipv4.tcp_keepalive_probes`: unanswered probes before the reset.
    pub tcp_keepalive_probes: u8,
    /// `net.ipv4.tcp_rto_min_us`: lower bound of the RTO (microseconds).
    pub tcp_rto_min_us: u32,
    /// `net.ipv4.tcp_rto_max_ms` (Linux 6.15+): the RTO's upper bound for new
    /// sockets, 1000 to 120000 ms (120000, `TCP_RTO_MAX`).
    pub tcp_rto_max_ms: u32,
    /// `net.ipv4.tcp_reordering`: initial reordering degree (dupthresh).
    pub tcp_reordering: u32,
    /// `net.ipv4.tcp_max_reordering`: the most a measured reordering degree may
    /// grow to (`tcp_check_sack_reordering`, `tcp_check_reno_reordering`), default
    /// 300. Linux's `proc_dointvec` takes any `int`, read as `u32` (`min_t(u32,
    /// ...)`): a negative value caps nothing.
    pub tcp_max_reordering: u32,
    /// `net.ipv4.tcp_recovery`: bit 0x1 RACK loss detection (default on; without it
    /// RACK still detects losses, as in Linux 6.17+, where RFC 6675 recovery is
    /// gone), 0x2 static RACK reordering window, 0x4 no dupthresh shortcut for RACK.
    pub tcp_recovery: u32,
    /// `net.ipv4.tcp_early_retrans`: 3 or 4 enable tail loss probes (default 3).
    pub tcp_early_retrans: u32,
    /// `net.ipv4.tcp_min_rtt_wlen`: seconds the windowed min-RTT filter remembers a
    /// sample (`tcp_update_rtt_min`), 0 to 86400.
    pub tcp_min_rtt_wlen: u32,
    /// `net.ipv4.tcp_retrans_collapse`: a retransmitted skb shorter than an MSS
    /// takes the one-segment skbs after it (`tcp_retrans_try_collapse`; default on).
    pub tcp_retrans_collapse: bool,
    /// `net.ipv4.tcp_frto`: F-RTO (RFC 5682) spurious RTO detection; 0 off, 1 or 2
    /// on (Linux uses the SACK-enhanced variant for both; default 2).
    pub tcp_frto: u32,
    /// `net.ipv4.tcp_congestion_control`: the default congestion control.
    pub tcp_congestion_control: String,
    /// `net.ipv4.ip_local_port_range`: ephemeral ports (inclusive).
    pub ip_local_port_range: [u16; 2],
    /// `net.ipv4.ip_local_reserved_ports`: ports the ephemeral searches pass over
    /// (`inet_is_local_reserved_port`), as inclusive ranges; empty by default.
    pub ip_local_reserved_ports: Vec<[u16; 2]>,
    /// `net.ipv4.ip_autobind_reuse`: `bind(0)` may, once every port is taken, share
    /// one with `SO_REUSEADDR` sockets (`inet_csk_find_open_port`'s `relax`; 0).
    pub ip_autobind_reuse: bool,
    /// `net.core.somaxconn`: upper bound of a listen backlog.
    pub somaxconn: u32,
    /// `net.core.optmem_max`: a socket's ancillary memory (`sk_omem_alloc`), which
    /// bounds its outstanding `MSG_ZEROCOPY` notifications (Linux 6.8+: 128 KB).
    pub optmem_max: u32,
    /// `net.core.busy_poll` (µs): how long an event loop polls its device before it
    /// sleeps (Linux: busy polling in `poll`/`select`, `sk_busy_loop`). The engine
    /// itself never waits; lowtide's TUN runtime honours it. 0 (Linux's default)
    /// sleeps at once; Documentation/admin-guide/sysctl/net.rst suggests 50.
    pub busy_poll_us: u32,
    /// `net.core.txrehash`: sockets created now may pick a new transmit hash
    /// (`sk_txrehash`, read at socket creation) after an RTO
    /// (`tcp_write_timeout`'s `sk_rethink_txhash`). lowtide has no multipath to
    /// steer; the rehashes are counted (`TcpExtTcpTimeoutRehash`, `tcpi_rehash`).
    pub txrehash: bool,
    /// `net.core.rmem_max`: the most `SO_RCVBUF` sets (`sk_setsockopt`, doubled),
    /// and a floor of the space `tcp_select_initial_window` scales the window for.
    /// Linux's default `SK_RMEM_MAX`, 212992 (256 packets of 832 bytes' truesize).
    pub rmem_max: u32,
    /// `net.core.wmem_max`: the most `SO_SNDBUF` sets (`SK_WMEM_MAX`, 212992).
    /// `SO_SNDBUFFORCE` and `SO_RCVBUFFORCE` pass both caps.
    pub wmem_max: u32,
    /// `net.ipv4.ip_default_ttl` (1..=255, 64): the TTL of IPv4 packets whose
    /// socket has no `IP_TTL` (`ip_select_ttl`, `ip4_dst_hoplimit`), resets and
    /// other replies included.
    pub ip_default_ttl: u8,
    /// `net.ipv6.conf.all.hop_limit` (1..=255, 64): the hop limit of IPv6 packets
    /// whose socket has no `IPV6_UNICAST_HOPS` (`ip6_dst_hoplimit`; lowtide's one
    /// device reads the `all` value).
    pub ipv6_hop_limit: u8,
    /// `net.ipv4.ip_no_pmtu_disc` (0): 0 learns path MTUs from ICMP
    /// "fragmentation needed"; 1 (and 4 on) makes new sockets `IP_PMTUDISC_DONT`
    /// (`inet_create`) and takes every such message as a path MTU of 0, which the
    /// route raises to `route_min_pmtu`, locked; 2 ignores the messages; 3 ignores
    /// them unless their protocol validates ICMP tags strictly, as TCP does, UDP
    /// not (`icmp_unreach`).
    pub ip_no_pmtu_disc: u8,
    /// `net.ipv4.route.min_pmtu` (552, at least 68): an IPv4 path MTU learned below
    /// it is taken as it and locked (`__ip_rt_update_pmtu`).
    pub route_min_pmtu: u32,
    /// `net.ipv4.route.mtu_expires`, seconds (600): how long a learned IPv4 path
    /// MTU holds (`ip_rt_mtu_expires`).
    pub route_mtu_expires: u32,
    /// `net.ipv6.route.mtu_expires`, seconds (600): the same for IPv6
    /// (`ip6_rt_mtu_expires`).
    pub ipv6_route_mtu_expires: u32,
    /// `net.ipv4.ipfrag_high_thresh`, bytes (4 MiB): above it no fragment finds
    /// or makes a reassembly queue (`inet_frag_find`).
    pub ipfrag_high_thresh: u64,
    /// `net.ipv4.ipfrag_low_thresh`, bytes (3 MiB): only bounds `ipfrag_high_thresh`
    /// from below, as in Linux since 4.17 (no evictor reads it).
    pub ipfrag_low_thresh: u64,
    /// `net.ipv4.ipfrag_time`, seconds (30): how long a reassembly queue waits
    /// from its first fragment (`ip_expire`).
    pub ipfrag_time: u32,
    /// `net.ipv4.ipfrag_max_dist` (64): a queue that more fragments from its
    /// source than this overtook starts again (`ip_frag_too_far`); 0 turns it off.
    pub ipfrag_max_dist: u32,
    /// `net.ipv6.ip6frag_high_thresh`, `ip6frag_low_thresh` (4 and 3 MiB) and
    /// `ip6frag_time` (60 s): IPv6 reassembly's, as IPv4's.
    pub ip6frag_high_thresh: u64,
    pub ip6frag_low_thresh: u64,
    pub ip6frag_time: u32,
    /// `net.ipv6.max_hbh_opts_number` and `max_dst_opts_number` (8): the most
    /// options (padding aside) a hop-by-hop or destination options header may
    /// carry; a negative value also drops unknown options silently.
    pub ipv6_max_hbh_opts: i32,
    pub ipv6_max_dst_opts: i32,
    /// `net.ipv6.max_hbh_length` and `max_dst_opts_length` (`INT_MAX`): the longest
    /// such header, bytes.
    pub ipv6_max_hbh_length: i32,
    pub ipv6_max_dst_opts_length: i32,
    /// `net.ipv6.auto_flowlabels` (1): the flow label of what a socket sends over
    /// IPv6 comes from its flow's hash (`ip6_make_flowlabel`): 0 never, 1 unless
    /// the socket opts out (`IPV6_AUTOFLOWLABEL`), 2 only if it opts in, 3 always.
    pub ipv6_auto_flowlabels: u8,
    /// `net.ipv6.flowlabel_state_ranges` (0): an automatic label sets its top bit
    /// (`IPV6_FLOWLABEL_STATELESS_FLAG`, RFC 6437's stateless range).
    pub ipv6_flowlabel_state_ranges: bool,
    /// `net.ipv6.flowlabel_reflect` (0): 1, a connection sends its peer's label
    /// (`np->repflow`); 2, a reset without a full socket sends the label of the
    /// segment it answers; 4, an ICMPv6 echo reply the request's.
    pub ipv6_flowlabel_reflect: u8,
    /// `net.core.default_qdisc`: the device's queueing discipline. Its only effect on
    /// TCP is `fq`'s: sch_fq paces every flow at its `sk_pacing_rate`
    /// (`SK_PACING_FQ`): by the device's own fq where it has one ([`Config::device_fq`]:
    /// the simulator, the packetdrill runner), else emulated by lowtide's EDT pacing, as
    /// `SO_MAX_PACING_RATE` or BBR turn on; the others do not pace.
    pub default_qdisc: String,
    /// What the device in front of the stack does with `default_qdisc` (not a
    /// sysctl: the device's own business). `None`: the device does not model it, so
    /// `fq` is emulated by TCP's own pacing (`SK_PACING_NEEDED`), as above. `Some(true)`:
    /// a real sch_fq (the simulator's) holds each packet until its EDT time
    /// ([`crate::Transmit::tstamp`]) and, as `fq_classify` does, marks the sockets it
    /// sees `SK_PACING_FQ`: TCP stamps departure times and holds nothing itself.
    /// `Some(false)`: the device's qdisc is not fq, whatever `default_qdisc` says.
    pub device_fq: Option<bool>,
    /// The device MTU (not a sysctl: `ip link set mtu`). MSS = MTU - 40 (IPv4) or - 60.
    pub mtu: u32,
    /// Initial congestion window in segments (not a sysctl: `ip route ... initcwnd`).
    pub initcwnd: u32,
    /// How the device allocates received packets' buffers (not a sysctl: the
    /// driver's), which decides what the receive memory is charged and so the
    /// window: a NIC's page fragments (default) or a TUN device's `kmalloc`ed heads.
    pub rx_alloc: crate::tcp::skbuff::RxAlloc,
    /// `net.ipv4.tcp_notsent_lowat`: cap on unsent bytes for sockets without their own
    /// `TCP_NOTSENT_LOWAT` (seed 000); 4294967295 is "no limit".
    pub tcp_notsent_lowat: u32,
    /// `net.ipv4.tcp_limit_output_bytes`: TCP Small Queues' cap on a socket's bytes in
    /// the qdisc and device (seed 002; 4 MiB and applied to paced sockets too since
    /// Linux 6.16, 9ea3bfa61b09 and c4221a8cc3a7; 128 KB in seed 002).
    pub tcp_limit_output_bytes: u32,
    /// `net.ipv4.tcp_autocorking`: `tcp_push` holds back a tail skb smaller than the
    /// size goal while the socket has data in the device queue, for the TX completion
    /// to send it with what the next writes add (Linux 3.14, default on).
    pub tcp_autocorking: bool,
    /// `net.ipv4.tcp_stdurg`: read a received urgent pointer as RFC 1122 has it (it
    /// points at the urgent byte) instead of BSD's way (one past it, Linux's
    /// default, off); `tcp_check_urg`.
    pub tcp_stdurg: bool,
    /// `net.ipv4.tcp_pingpong_thresh` (1-255, default 1): replies sent within `ato`
    /// of a receipt that put a connection in pingpong mode, where delayed ACKs wait
    /// for the reply (`inet_csk_in_pingpong_mode`, read at every use).
    pub tcp_pingpong_thresh: u8,
    /// `net.ipv4.tcp_ecn`: ECN (RFC 3168); 1 asks for it on outgoing connections
    /// and accepts it on incoming ones, 2 (Linux's default) only accepts, 0 neither;
    /// Accurate ECN (RFC 9768): 3 asks for AccECN and accepts AccECN or ECN, 4 asks
    /// for ECN and accepts either, 5 only accepts either (`enum tcp_ecn_mode`).
    pub tcp_ecn: u8,
    /// `net.ipv4.tcp_ecn_option` (0-2, default 2): whether an AccECN connection
    /// sends the AccECN option: 0 never, 1 only while demanded (and as beacons), 2
    /// on every segment once the peer has sent one (tcp/accecn_opt.rs). The peer's
    /// options are read whatever the value.
    pub tcp_ecn_option: u8,
    /// `net.ipv4.tcp_ecn_option_beacon` (0-3, default 3): with `tcp_ecn_option` 1,
    /// an option goes out when none did for 1/n of the smoothed RTT (0: never).
    pub tcp_ecn_option_beacon: u8,
    /// `net.ipv4.tcp_ecn_fallback`: a retransmitted SYN no longer asks for ECN
    /// (default on).
    pub tcp_ecn_fallback: bool,
    /// `net.ipv4.tcp_min_tso_segs`: smallest TSO autosize goal in segments.
    pub tcp_min_tso_segs: u32,
    /// `net.ipv4.tcp_tso_rtt_log`: close peers (min_rtt below 2^log us) get bigger bursts.
    pub tcp_tso_rtt_log: u32,
    /// `net.ipv4.tcp_tso_win_divisor`: `tcp_tso_should_defer` sends if this fraction of
    /// cwnd is open.
    pub tcp_tso_win_divisor: u32,
    /// `net.ipv4.tcp_app_win` (0-31, default 31): `tcp_init_buffer_space` keeps
    /// `maxwin >> tcp_app_win` of the receive window for the application; 0 keeps none
    /// back.
    pub tcp_app_win: u8,
    /// `net.ipv4.tcp_reflect_tos` (default off): a request's SYN-ACK and the child
    /// it makes carry the SYN's TOS / traffic class less its ECN bits
    /// (`tcp_v4_send_synack`, `tcp_v4_syn_recv_sock` and their IPv6 twins).
    pub tcp_reflect_tos: bool,
    /// `net.ipv4.tcp_pacing_ss_ratio`: pacing rate in slow start, percent of cwnd/srtt.
    pub tcp_pacing_ss_ratio: u32,
    /// `net.ipv4.tcp_pacing_ca_ratio`: pacing rate in congestion avoidance, percent.
    pub tcp_pacing_ca_ratio: u32,
    /// `experimental.notsent_wake_hysteresis`: report writable only below lowat/2
    /// (seed 001); false wakes below lowat (seed 000 alone).
    pub notsent_wake_hysteresis: bool,
    /// `experimental.tsq`: TCP Small Queues (seed 002); false lets a socket fill the
    /// device queue, as before the seed.
    pub tsq: bool,
    /// `experimental.tsq_rule`: which TCP Small Queues limit `tsq` applies: `Rate`,
    /// Linux's since 3.12, or `Fixed`, seed 002's own (Linux 3.6).
    pub tsq_rule: TsqRule,
    /// `experimental.size_goal_at`: `Transmit` sizes skbs by the rate at transmit time
    /// (seed 004); `Write` sizes them at write time and sends them whole, as before.
    pub size_goal_at: SizeGoalAt,
    /// `experimental.rtx_queue`: `Tree` keeps sent skbs in an ordered tree (seed 003);
    /// `List` in a list searched from the head, as before the seed. Same results,
    /// different cost; chosen when a connection is created.
    pub rtx_queue: RtxQueueKind,
    /// `net.ipv4.tcp_orphan_retries`: retries before an orphaned (closed) socket's
    /// retransmissions or window probes give up; 0 means 8 while the backed-off RTO
    /// is below 120 s (`tcp_orphan_retries`).
    pub tcp_orphan_retries: u8,
    /// `net.ipv4.tcp_challenge_ack_limit`: challenge ACKs per second, stack-wide
    /// ([RFC 5961 section 7](https://www.rfc-editor.org/rfc/rfc5961#section-7)); `INT_MAX`
    /// (the default since Linux 6.0) is unlimited, leaving the per-socket
    /// `tcp_invalid_ratelimit`.
    pub tcp_challenge_ack_limit: u32,
    /// `net.ipv4.tcp_invalid_ratelimit`: least milliseconds between two duplicate
    /// ACKs a socket sends for out-of-window segments (`tcp_oow_rate_limited`).
    pub tcp_invalid_ratelimit: u32,
    /// `net.ipv4.tcp_shrink_window` (Linux 6.5+, default off): a scaled receive
    /// window may shrink to what the buffer holds (`__tcp_select_window`) instead of
    /// keeping its right edge.
    pub tcp_shrink_window: bool,
    /// `net.ipv4.tcp_workaround_signed_windows` (default off): an unscaled window
    /// offers at most 32767 bytes, for peers that read the field as signed.
    pub tcp_workaround_signed_windows: bool,
    /// `net.ipv4.tcp_min_snd_mss`: the smallest MSS a peer can make us use.
    pub tcp_min_snd_mss: u32,
    /// `net.ipv4.tcp_retries1`: RTOs after which a connection takes its path for a
    /// black hole (`tcp_mtu_probing`) before going on (3).
    pub tcp_retries1: u8,
    /// `net.ipv4.tcp_mtu_probing`: packetization-layer path MTU discovery
    /// (RFC 4821): 0 off, 1 once an ICMP blackhole is detected, 2 always.
    pub tcp_mtu_probing: u8,
    /// `net.ipv4.tcp_base_mss`: the MSS MTU probing starts its search from, and the
    /// one a blackhole falls back to (`TCP_BASE_MSS`, 1024).
    pub tcp_base_mss: u32,
    /// `net.ipv4.tcp_mtu_probe_floor`: the least MSS a blackhole can lower the search
    /// to (`TCP_MIN_SND_MSS`, 48).
    pub tcp_mtu_probe_floor: u32,
    /// `net.ipv4.tcp_probe_threshold`: bytes between the search's bounds under which
    /// probing stops (8).
    pub tcp_probe_threshold: u32,
    /// `net.ipv4.tcp_probe_interval`: seconds before a finished search starts again
    /// (`TCP_PROBE_INTERVAL`, 600).
    pub tcp_probe_interval: u32,
    /// `net.ipv4.tcp_max_orphans`: orphaned (closed, still finishing) sockets the
    /// stack keeps; beyond it a closing or retransmitting orphan is reset
    /// (`tcp_too_many_orphans`, TcpExtTCPAbortOnMemory). Linux sets half its
    /// established hash's size, one entry per 128 KB of RAM rounded up to a power of
    /// two: 131072 on a host with 16-32 GB.
    pub tcp_max_orphans: u32,
    /// `net.ipv4.tcp_max_tw_buckets`: TIME-WAIT sockets the stack keeps; beyond it a
    /// connection closes without one (`inet_twsk_alloc`, TcpExtTCPTimeWaitOverflow).
    /// Linux's default is the same half of the established hash as
    /// `tcp_max_orphans`'.
    pub tcp_max_tw_buckets: u32,
    /// `net.ipv4.tcp_tw_reuse`: may `connect` take over a TIME-WAIT socket's
    /// 4-tuple when it picks the port (`tcp_twsk_unique`)? 0 no, 1 yes, 2 (Linux's
    /// default) only between loopback addresses. A port the socket was bound to
    /// takes over any TIME-WAIT socket that saw timestamps.
    pub tcp_tw_reuse: u8,
    /// `net.ipv4.tcp_tw_reuse_delay`: milliseconds a TIME-WAIT socket waits before
    /// `tcp_tw_reuse` may take it over (1000).
    pub tcp_tw_reuse_delay: u32,
    /// `net.ipv4.tcp_rfc1337`: nonzero makes a TIME-WAIT socket ignore resets
    /// (RFC 1337's TIME-WAIT assassination), 0 (Linux's default) lets them end it.
    pub tcp_rfc1337: u8,
    /// `net.ipv4.tcp_no_metrics_save`: nonzero keeps a finished connection's RTT,
    /// window and reordering out of the metrics cache (`tcp/metrics.rs`); 0, Linux's
    /// default, saves them for the next connection to the same address.
    pub tcp_no_metrics_save: u8,
    /// `net.ipv4.tcp_no_ssthresh_metrics_save`: nonzero (1, Linux's default since
    /// 5.6) neither saves nor uses a cached slow-start threshold.
    pub tcp_no_ssthresh_metrics_save: u8,
    /// `net.ipv4.tcp_syncookies`: 1 sends SYN cookies when a listener's SYN queue
    /// overflows, 2 always, 0 never.
    pub tcp_syncookies: u8,
    /// `net.ipv4.tcp_max_syn_backlog`: with `tcp_syncookies` 0, the last quarter of
    /// a listener's request queue this long is kept for peers the metrics cache
    /// knows (`tcp_peer_is_proven`). Linux sizes it from the established hash
    /// (`max(128, ehash entries / 128)`); 2048 as on this machine.
    pub tcp_max_syn_backlog: u32,
    /// `net.ipv4.tcp_abort_on_overflow`: a handshake's final ACK finding the
    /// listener's accept queue full is dropped (0, Linux's default: the SYN-ACK is
    /// sent again and the next ACK may find room) or answered with a reset
    /// (nonzero; Linux takes any u8).
    pub tcp_abort_on_overflow: u8,
    /// `/sys/module/tcp_cubic/parameters/hystart_detect`: HyStart's detectors,
    /// `HYSTART_ACK_TRAIN` 1 | `HYSTART_DELAY` 2. Read when a CUBIC socket is created
    /// (Linux reads the module parameter at every ACK).
    pub tcp_cubic_hystart_detect: u32,
    /// `/sys/module/tcp_cubic/parameters/hystart`: HyStart on (bool, default on);
    /// read at each ACK, and by `cubictcp_init`.
    pub tcp_cubic_hystart: bool,
    /// `.../hystart_low_window`: HyStart acts from this cwnd on (int, default 16;
    /// Linux compares it unsigned, so a negative value turns HyStart off).
    pub tcp_cubic_hystart_low_window: u32,
    /// `.../hystart_ack_delta_us`: ACKs this close in time belong to one train
    /// (int, default 2000).
    pub tcp_cubic_hystart_ack_delta_us: i32,
    /// `.../fast_convergence`: lower W_max when a loss comes before the window
    /// regained it (int, non-zero on; default 1).
    pub tcp_cubic_fast_convergence: bool,
    /// `.../tcp_friendliness`: never grow slower than Reno would (int, default 1).
    pub tcp_cubic_tcp_friendliness: bool,
    /// `.../initial_ssthresh`: with HyStart off, the ssthresh a connection starts
    /// with (`cubictcp_init`; 0, the default, leaves it infinite).
    pub tcp_cubic_initial_ssthresh: u32,
    /// `/sys/module/tcp_dctcp/parameters/dctcp_shift_g`: DCTCP's EWMA gain
    /// g = 1/2^shift_g (0..=10, default 4); read at each alpha update.
    pub tcp_dctcp_shift_g: u32,
    /// `/sys/module/tcp_dctcp/parameters/dctcp_alpha_on_init`: DCTCP's alpha when a
    /// connection starts, out of 1024 (default 1024: the first mark halves cwnd).
    pub tcp_dctcp_alpha_on_init: u32,
    /// `net.ipv4.tcp_fastopen`: TCP Fast Open's bits (`TFO_CLIENT_ENABLE` 1,
    /// `TFO_SERVER_ENABLE` 2, `TFO_CLIENT_NO_COOKIE` 4, `TFO_SERVER_COOKIE_NOT_REQD`
    /// 0x200, `TFO_SERVER_WO_SOCKOPT1` 0x400; `crate::tcp::fastopen`).
    pub tcp_fastopen: u32,
    /// `net.ipv4.tcp_fastopen_key`: the stack's Fast Open keys (primary, backup);
    /// empty until set or first needed (then drawn at random).
    pub tcp_fastopen_key: crate::tcp::fastopen::FastOpenKeys,
    /// `net.ipv4.tcp_fastopen_blackhole_timeout_sec`: how long active Fast Open
    /// pauses after a suspected middlebox blackhole (doubling on repeats); 0: never.
    pub tcp_fastopen_blackhole_timeout_sec: u32,
    /// `net.ipv4.icmp_ratelimit` (ms): the per-destination interval of the ICMP
    /// messages `icmp_ratemask` selects (`icmpv4_xrlim_allow`); 0: no per-destination
    /// limit.
    pub icmp_ratelimit: u32,
    /// `net.ipv4.icmp_ratemask`: bit `1 << type` set = that ICMP type is rate
    /// limited (default 0x1818: destination unreachable, source quench, time
    /// exceeded, parameter problem; never "fragmentation needed").
    pub icmp_ratemask: u32,
    /// `net.ipv4.icmp_msgs_per_sec` and `net.ipv4.icmp_msgs_burst`: the global
    /// token bucket of rate-limited ICMP and ICMPv6 messages (`icmp_global_allow`).
    pub icmp_msgs_per_sec: u32,
    /// See [`Config::icmp_msgs_per_sec`].
    pub icmp_msgs_burst: u32,
    /// `net.ipv4.icmp_echo_ignore_all`: echo requests go unanswered.
    pub icmp_echo_ignore_all: bool,
    /// `net.ipv4.icmp_echo_ignore_broadcasts`: echo requests to a broadcast or
    /// multicast address go unanswered (RFC 1122 section 3.2.2.6).
    pub icmp_echo_ignore_broadcasts: bool,
    /// `net.ipv6.icmp.ratelimit` (ms): the per-destination interval of rate-limited
    /// ICMPv6 messages (`icmpv6_xrlim_allow`; 100 since upstream commit 0201eedb69b2,
    /// in 6.18 stable too, 1000 before); 0: no per-destination limit.
    pub icmpv6_ratelimit: u32,
    /// `net.ipv6.icmp.echo_ignore_all`: ICMPv6 echo requests go unanswered.
    pub icmpv6_echo_ignore_all: bool,
}

/// The retransmit queue's structure (seed 003).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum RtxQueueKind {
    /// An ordered tree keyed by sequence (Linux's rb-tree `tcp_rtx_queue`).
    #[default]
    Tree,
    /// A linear list scanned from the head for every lookup (before seed 003).
    List,
}

/// The limit of TCP Small Queues (`experimental.tsq_rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TsqRule {
    /// `tcp_small_queue_check`: `max(2 * truesize, pacing_rate >> 10)` capped by
    /// `tcp_limit_output_bytes`, doubled for retransmissions, a lone skb always sent
    /// (Linux 3.12 on, as in 6.18).
    Rate,
    /// Seed 002's rule (46d3ceabd8d9, Linux 3.6 to 3.11): `tcp_write_xmit` sends no
    /// new data while `sk_wmem_alloc >= tcp_limit_output_bytes` (128 KB then), at
    /// any rate; retransmissions are not limited.
    Fixed,
}

/// When skbs are sized by the pacing rate (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SizeGoalAt {
    /// 64 KB skbs at write time, split at transmit time by `tcp_tso_autosize`.
    Transmit,
    /// Skbs sized by the rate at write time and sent whole (before seed 004).
    Write,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tcp_wmem: [4096, 16384, 4194304],
            // Linux 6.16+ (572be9bf9d0d "tcp: increase tcp_rmem[2] to 32 MB"; this machine).
            tcp_rmem: [4096, 131072, 33_554_432],
            tcp_mem: [287_892, 383_858, 575_784],
            tcp_sack: true,
            tcp_dsack: true,
            tcp_comp_sack_nr: 44,
            tcp_comp_sack_delay_ns: 1_000_000,
            tcp_comp_sack_slack_ns: 100_000,
            tcp_timestamps: true,
            tcp_window_scaling: true,
            tcp_moderate_rcvbuf: true,
            tcp_slow_start_after_idle: true,
            tcp_syn_retries: 6,
            tcp_synack_retries: 5,
            tcp_syn_linear_timeouts: 4,
            tcp_thin_linear_timeouts: false,
            tcp_retries2: 15,
            tcp_fin_timeout: 60,
            tcp_keepalive_time: 7200,
            tcp_keepalive_intvl: 75,
            tcp_keepalive_probes: 9,
            tcp_rto_min_us: 200_000,
            tcp_rto_max_ms: 120_000,
            tcp_reordering: 3,
            tcp_max_reordering: crate::tcp::consts::TCP_MAX_REORDERING,
            tcp_recovery: TCP_RACK_LOSS_DETECTION,
            tcp_early_retrans: 3,
            tcp_frto: 2,
            tcp_retrans_collapse: true,
            tcp_min_rtt_wlen: 300,
            tcp_congestion_control: "cubic".into(),
            ip_local_port_range: [32768, 60999],
            ip_local_reserved_ports: Vec::new(),
            ip_autobind_reuse: false,
            somaxconn: 4096,
            optmem_max: 131_072,
            busy_poll_us: 0,
            txrehash: true,
            rmem_max: 212_992,
            wmem_max: 212_992,
            ip_default_ttl: 64,
            ipv6_hop_limit: 64,
            ip_no_pmtu_disc: 0,
            route_min_pmtu: 552,
            route_mtu_expires: 600,
            ipv6_route_mtu_expires: 600,
            ipfrag_high_thresh: 4 * 1024 * 1024,
            ipfrag_low_thresh: 3 * 1024 * 1024,
            ipfrag_time: 30,
            ipfrag_max_dist: 64,
            ip6frag_high_thresh: 4 * 1024 * 1024,
            ip6frag_low_thresh: 3 * 1024 * 1024,
            ip6frag_time: 60,
            ipv6_max_hbh_opts: 8,
            ipv6_max_dst_opts: 8,
            ipv6_max_hbh_length: i32::MAX,
            ipv6_max_dst_opts_length: i32::MAX,
            ipv6_auto_flowlabels: 1,
            ipv6_flowlabel_state_ranges: false,
            ipv6_flowlabel_reflect: 0,
            default_qdisc: "pfifo_fast".into(),
            device_fq: None,
            mtu: 1500,
            initcwnd: 10,
            rx_alloc: Default::default(),
            tcp_notsent_lowat: u32::MAX,
            tcp_limit_output_bytes: 4 << 20,
            tcp_autocorking: true,
            tcp_stdurg: false,
            tcp_pingpong_thresh: 1,
            tcp_ecn: 2,
            tcp_ecn_option: 2,
            tcp_ecn_option_beacon: 3,
            tcp_ecn_fallback: true,
            tcp_min_tso_segs: 2,
            tcp_tso_rtt_log: 9,
            tcp_tso_win_divisor: 3,
            tcp_app_win: 31,
            tcp_reflect_tos: false,
            tcp_pacing_ss_ratio: 200,
            tcp_pacing_ca_ratio: 120,
            notsent_wake_hysteresis: true,
            tsq: true,
            tsq_rule: TsqRule::Rate,
            size_goal_at: SizeGoalAt::Transmit,
            rtx_queue: RtxQueueKind::Tree,
            tcp_orphan_retries: 0,
            tcp_challenge_ack_limit: i32::MAX as u32,
            tcp_invalid_ratelimit: 500,
            tcp_shrink_window: false,
            tcp_workaround_signed_windows: false,
            tcp_min_snd_mss: 48,
            tcp_retries1: 3,
            tcp_mtu_probing: 0,
            tcp_base_mss: 1024,
            tcp_mtu_probe_floor: 48,
            tcp_probe_threshold: 8,
            tcp_probe_interval: 600,
            tcp_max_orphans: 131_072,
            tcp_max_tw_buckets: 131_072,
            tcp_tw_reuse: 2,
            tcp_tw_reuse_delay: 1000,
            tcp_rfc1337: 0,
            tcp_no_metrics_save: 0,
            tcp_no_ssthresh_metrics_save: 1,
            tcp_syncookies: 1,
            tcp_max_syn_backlog: 2048,
            tcp_abort_on_overflow: 0,
            tcp_cubic_hystart_detect: 3,
            tcp_cubic_hystart: true,
            tcp_cubic_hystart_low_window: 16,
            tcp_cubic_hystart_ack_delta_us: 2000,
            tcp_cubic_fast_convergence: true,
            tcp_cubic_tcp_friendliness: true,
            tcp_cubic_initial_ssthresh: 0,
            tcp_dctcp_shift_g: 4,
            tcp_dctcp_alpha_on_init: 1024,
            tcp_fastopen: crate::tcp::fastopen::TFO_CLIENT_ENABLE,
            tcp_fastopen_key: Default::default(),
            tcp_fastopen_blackhole_timeout_sec: 0,
            icmp_ratelimit: 1000,
            icmp_ratemask: 0x1818,
            icmp_msgs_per_sec: 1000,
            icmp_msgs_burst: 50,
            icmp_echo_ignore_all: false,
            icmp_echo_ignore_broadcasts: true,
            icmpv6_ratelimit: 100,
            icmpv6_echo_ignore_all: false,
        }
    }
}

/// `TCP_RACK_LOSS_DETECTION`: `tcp_recovery` bit for RACK loss detection (no
/// effect since Linux 6.17: RACK is the only loss detection).
pub const TCP_RACK_LOSS_DETECTION: u32 = 0x1;
/// `TCP_RACK_STATIC_REO_WND`: `tcp_recovery` bit keeping the reordering window at
/// min_rtt/4 (no D-SACK adaptation).
pub const TCP_RACK_STATIC_REO_WND: u32 = 0x2;
/// `TCP_RACK_NO_DUPTHRESH`: `tcp_recovery` bit; RACK keeps its reordering window even
/// after `reordering` segments were SACKed.
pub const TCP_RACK_NO_DUPTHRESH: u32 = 0x4;

/// Queueing disciplines `net.core.default_qdisc` takes (Linux's common ones).
pub const QDISCS: &[&str] = &[
    "pfifo_fast",
    "pfifo",
    "bfifo",
    "fq",
    "fq_codel",
    "sfq",
    "noqueue",
];

/// Congestion control algorithms this build offers.
pub const CONGESTION_CONTROLS: &[&str] = &["reno", "cubic", "bbr", "dctcp"];

impl Config {
    /// Sets a sysctl by its Linux name (`net.ipv4.tcp_wmem`) from its text form.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ConfigError> {
        let known = self.set_ipv4_tcp(name, value)?
            || self.set_core(name, value)?
            || self.set_icmp(name, value)?
            || self.set_ip(name, value)?
            || self.set_module(name, value)?
            || self.set_experimental(name, value)?;
        match known {
            true => Ok(()),
            false => Err(ConfigError::UnknownName(name.into())),
        }
    }

    /// Parses and applies `name=value`.
    pub fn set_assignment(&mut self, assignment: &str) -> Result<(), ConfigError> {
        match assignment.split_once('=') {
            Some((n, v)) => self.set(n.trim(), v),
            None => Err(bad(assignment, "", "name=value")),
        }
    }

    /// The MSS for this MTU and address family, as Linux's `tcp_mtu_to_mss` without
    /// options (the option space is subtracted per connection).
    pub fn mss_for(&self, ipv6: bool) -> u32 {
        let hdr = if ipv6 { 60 } else { 40 };
        self.mtu.saturating_sub(hdr).max(48)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_qdisc_takes_qdisc_names_only() {
        let mut c = Config::default();
        assert_eq!(c.default_qdisc, "pfifo_fast");
        c.set("net.core.default_qdisc", "fq").unwrap();
        assert_eq!(c.default_qdisc, "fq");
        assert!(matches!(
            c.set("net.core.default_qdisc", "fast"),
            Err(ConfigError::BadValue { .. })
        ));
        assert_eq!(c.default_qdisc, "fq");
    }

    #[test]
    fn obsolete_names_are_taken_within_linux_bounds() {
        let mut c = Config::default();
        for (name, ok, refused) in [
            ("net.ipv4.tcp_adv_win_scale", ["-31", "31"], ["32", "-32"]),
            ("net.ipv4.tcp_fack", ["0", "255"], ["-1", "256"]),
            ("net.ipv4.tcp_low_latency", ["-5", "7"], ["x", "2147483648"]),
        ] {
            for v in ok {
                c.set(name, v).unwrap();
            }
            for v in refused {
                assert!(
                    matches!(c.set(name, v), Err(ConfigError::BadValue { .. })),
                    "{name}={v}"
                );
            }
        }
        assert_eq!(c, Config::default(), "read by nothing, so kept nowhere");
    }

    #[test]
    fn set_known_names() {
        let mut c = Config::default();
        c.set("net.ipv4.tcp_wmem", "4096 65536 8388608").unwrap();
        assert_eq!(c.tcp_wmem, [4096, 65536, 8388608]);
        c.set_assignment("net.ipv4.tcp_sack=0").unwrap();
        assert!(!c.tcp_sack);
        for name in Config::NAMES {
            assert!(
                !matches!(c.set(name, "garbage"), Err(ConfigError::UnknownName(_))),
                "{name} is listed but not handled"
            );
        }
    }

    #[test]
    fn busy_poll_is_microseconds_from_zero() {
        let mut c = Config::default();
        assert_eq!(c.busy_poll_us, 0, "Linux's default");
        c.set("net.core.busy_poll", "50").unwrap();
        assert_eq!(c.busy_poll_us, 50);
        assert!(c.set("net.core.busy_poll", "-1").is_err());
        assert!(c.set("net.core.busy_poll", "2147483648").is_err());
    }

    #[test]
    fn cubic_module_parameter() {
        // tcp_cubic.c: hystart_detect defaults to HYSTART_ACK_TRAIN | HYSTART_DELAY.
        let mut c = Config::default();
        assert_eq!(c.tcp_cubic_hystart_detect, 3);
        c.set("module.tcp_cubic.hystart_detect", "2").unwrap();
        assert_eq!(c.tcp_cubic_hystart_detect, 2);
        assert!(c.set("module.tcp_cubic.hystart_detect", "4").is_err());
        // The other writable ones, with Linux's defaults.
        assert!(c.tcp_cubic_hystart && c.tcp_cubic_fast_convergence);
        assert_eq!(c.tcp_cubic_hystart_low_window, 16);
        assert_eq!(c.tcp_cubic_hystart_ack_delta_us, 2000);
        c.set("module.tcp_cubic.hystart", "N").unwrap();
        c.set("module.tcp_cubic.hystart_low_window", "-1").unwrap();
        c.set("module.tcp_cubic.initial_ssthresh", "20").unwrap();
        c.set("module.tcp_cubic.tcp_friendliness", "0").unwrap();
        assert!(!c.tcp_cubic_hystart && !c.tcp_cubic_tcp_friendliness);
        assert_eq!(
            c.tcp_cubic_hystart_low_window,
            u32::MAX,
            "compared unsigned"
        );
        assert_eq!(c.tcp_cubic_initial_ssthresh, 20);
        assert!(c.set("module.tcp_cubic.hystart", "2").is_err());
    }

    #[test]
    fn rtx_queue_switch() {
        let mut c = Config::default();
        assert_eq!(c.rtx_queue, RtxQueueKind::Tree);
        c.set("experimental.rtx_queue", "\"list\"").unwrap();
        assert_eq!(c.rtx_queue, RtxQueueKind::List);
        c.set_assignment("experimental.rtx_queue=tree").unwrap();
        assert_eq!(c.rtx_queue, RtxQueueKind::Tree);
        assert!(c.set("experimental.rtx_queue", "skiplist").is_err());
        assert_eq!(c.rtx_queue, RtxQueueKind::Tree);
    }

    #[test]
    fn rejects_unknown_and_bad() {
        let mut c = Config::default();
        assert!(matches!(
            c.set("net.ipv4.tcp_nonsense", "1"),
            Err(ConfigError::UnknownName(_))
        ));
        assert!(c.set("net.ipv4.tcp_wmem", "1 2").is_err());
        assert!(c.set("net.ipv4.tcp_wmem", "10 5 20").is_err());
        assert!(c.set("net.ipv4.tcp_sack", "yes").is_err());
        assert!(c.set("net.ipv4.ip_local_port_range", "9 3").is_err());
        assert!(c.set("net.ipv4.tcp_congestion_control", "vegas").is_err());
        assert_eq!(c, Config::default());
    }
}
