//! What to simulate ([`Scenario`]) and what came out ([`RunResults`]).

use crate::cpu::{CpuFigures, CpuModel};
use crate::nic::QueueStats;
use crate::payload::PayloadMode;
use crate::qdisc::QdiscSpec;
use crate::sample::MemoryResult;
use crate::timeseries::{Timeseries, TimeseriesConfig};
use lowtide::{Config, Counters};
use lowtide_link::{LinkConfig, LinkStats};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

/// Where a run is, for progress displays ([`ProgressHook`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunProgress {
    /// Virtual time reached (ns).
    pub virtual_ns: u64,
    /// Flows in the run.
    pub flows: u32,
    /// Flows whose connection was established.
    pub flows_connected: u32,
    /// Flows whose both ends finished (fixed-size transfers; 0 in bulk runs until
    /// the end).
    pub flows_done: u32,
    /// Bytes the receivers have read, all flows.
    pub bytes_delivered: u64,
}

/// Called now and then during a run (every 65,536 events) with where it is, for
/// progress displays; it only reads the run's state, so it cannot change the run.
#[derive(Clone)]
pub struct ProgressHook(pub Arc<dyn Fn(&RunProgress) + Send + Sync>);

impl core::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// What the flows do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workload {
    /// Bulk senders (netperf TCP_STREAM) for a simulated time (ns); the run stops
    /// at its end.
    Bulk {
        /// Measured (simulated) duration, ns.
        duration_ns: u64,
    },
    /// Each flow sends this many bytes, shuts down its write side and closes; the
    /// run ends when every flow is done, or fails at `time_limit_ns`.
    Bytes {
        /// Bytes per flow.
        bytes: u64,
        /// Safety cap on simulated time, ns.
        time_limit_ns: u64,
    },
}

/// A two-host run: host A (10.0.0.1) runs the senders, host B (10.0.0.2) the
/// receivers (one listener on port 5001 accepting every flow), joined by one
/// full-duplex link.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Seeds everything: stacks, link impairments, payload.
    pub seed: u64,
    /// Number of flows (connections), each from its own ephemeral port.
    pub flows: u32,
    /// What the flows do.
    pub workload: Workload,
    /// The A→B direction (data).
    pub link_ab: LinkConfig,
    /// The B→A direction (ACKs).
    pub link_ba: LinkConfig,
    /// NIC queue limit in packets (`txqueuelen`; a GSO packet counts once).
    pub queue_limit: usize,
    /// Mark ECN-capable packets CE once this many packets wait in a NIC queue
    /// ([`crate::qdisc::fifo::Fifo::with_ecn_mark_at`]); `None`: no marking.
    pub ecn_mark_at: Option<usize>,
    /// The qdisc of the bottleneck, host A's device (A->B); `None`: the one
    /// `net.core.default_qdisc` names, as on host B ([`crate::qdisc`]).
    pub qdisc: Option<QdiscSpec>,
    /// GRO on the receive path of both hosts.
    pub gro: bool,
    /// When a device gives a packet's TX completion back to its stack (what TSQ
    /// waits for).
    pub tx_completion: TxCompletion,
    /// Interrupt coalescing window of the receive path (ns).
    pub rx_usecs_ns: u64,
    /// Flow `i` connects at `i * stagger_ns`, so the SYNs are not all simultaneous.
    pub stagger_ns: u64,
    /// And, if positive, a further uniform `0 ..= start_jitter_ns` drawn per flow from
    /// the seed: random start times, so that repetitions of a lossless run with
    /// other seeds differ as real runs do (the experiments' repetitions).
    pub start_jitter_ns: u64,
    /// The configuration of both stacks.
    pub config: Config,
    /// Write a pcap of the link traffic here.
    pub pcap: Option<PathBuf>,
    /// `TCP_NOTSENT_LOWAT` set on every sending socket as soon as it exists
    /// (`None`: not set, the sysctl `net.ipv4.tcp_notsent_lowat` applies).
    pub notsent_lowat: Option<u32>,
    /// Interval of the memory sampling grid (ns); 0 picks a tenth of the base RTT
    /// within 100 µs..=1 ms ([`crate::sample::auto_interval`]).
    pub sample_interval_ns: u64,
    /// `SO_SNDBUF` set on every sending socket before it connects (Linux doubles
    /// the value, as `setsockopt` does; `None`: autotuned from `tcp_wmem`).
    pub sndbuf: Option<u32>,
    /// `SO_RCVBUF` set on every sending socket before it connects (`None`: its
    /// `sk_rcvbuf` starts at `tcp_rmem[1]`, as on host B). A sender's `sk_rcvbuf`
    /// matters to its socket backlog's limit (`tcp_add_backlog`: `sk_rcvbuf +
    /// sk_sndbuf`), so E4 gives it the sender's own default where host B's buffer is
    /// raised.
    pub sender_rcvbuf: Option<u32>,
    /// Sample a time series (`RunResults::timeseries`).
    pub timeseries: Option<TimeseriesConfig>,
    /// Progress reports during the run.
    pub progress: Option<ProgressHook>,
    /// Interval of iperf3's interval reports (`RunResults::intervals`, ns); 0: none.
    pub report_interval_ns: u64,
    /// A CPU cost model of host A ([`crate::cpu`]); `None`: its work is free.
    pub cpu: Option<CpuModel>,
    /// Verify every TCP checksum on receive. Otherwise the receivers verify them only
    /// when a link direction can corrupt packets (`corrupt` > 0), and trust them
    /// (`CHECKSUM_UNNECESSARY`) when none can, as Linux trusts a CHECKSUM_PARTIAL
    /// skb that crossed veth or loopback: results are the same either way, since an
    /// uncorrupted packet always verifies; only the work differs.
    pub verify_checksums: bool,
    /// How the senders hand their bytes to the sockets: stored (the real data
    /// path) or a pattern the sockets make per segment ([`PayloadMode`]); every
    /// figure is the same either way.
    pub payload: PayloadMode,
    /// A hostile peer attacking host B beside the flows ([`crate::hostile`]).
    pub hostile: Option<crate::hostile::Attack>,
}

/// When a device completes a packet (frees the skb: `sk_wmem_alloc` drops and TSQ's
/// `tcp_wfree` runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TxCompletion {
    /// At the end of the packet's serialization on the wire, as a hardware NIC's TX
    /// reclaim: the packet being sent still counts against TSQ's limit.
    #[default]
    Wire,
    /// When the qdisc hands the packet to the driver, as Linux's virtual devices do
    /// (`tun_net_xmit` and `veth_xmit` call `skb_orphan`): the kernel's own path
    /// through TUN or veth on a test machine.
    Dequeue,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            seed: 1,
            flows: 1,
            workload: Workload::Bulk {
                duration_ns: 10_000_000_000,
            },
            link_ab: LinkConfig::default(),
            link_ba: LinkConfig::default(),
            queue_limit: 1000,
            ecn_mark_at: None,
            qdisc: None,
            gro: true,
            tx_completion: TxCompletion::Wire,
            rx_usecs_ns: 20_000,
            stagger_ns: 1_000,
            start_jitter_ns: 0,
            config: Config::default(),
            pcap: None,
            notsent_lowat: None,
            sample_interval_ns: 0,
            sndbuf: None,
            sender_rcvbuf: None,
            timeseries: None,
            progress: None,
            report_interval_ns: 0,
            cpu: None,
            verify_checksums: false,
            payload: PayloadMode::Stored,
            hostile: None,
        }
    }
}

impl Scenario {
    /// Runs the scenario to completion.
    pub fn run(&self) -> Result<RunResults, SimError> {
        crate::run::run(self)
    }
}

/// A run could not be set up or its output not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// The scenario is inconsistent (e.g. zero flows or a zero rate).
    Invalid(String),
    /// The pcap file could not be written.
    Pcap(String),
}

impl core::fmt::Display for SimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SimError::Invalid(s) => write!(f, "invalid scenario: {s}"),
            SimError::Pcap(s) => write!(f, "pcap: {s}"),
        }
    }
}

impl std::error::Error for SimError {}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowResult {
    /// Flow id (0-based, in connect order).
    pub flow: u32,
    /// The sender's ephemeral port (0 if its connect call failed).
    pub local_port: u16,
    /// Bytes delivered in order to the receiving application / measured time.
    pub goodput_bps: f64,
    /// Bytes the receiving application read (and verified).
    pub bytes_delivered: u64,
    /// Bytes the sender's socket saw acknowledged by the end of the measured time
    /// (`tcpi_bytes_acked`): at most `bytes_delivered`, less by what was in flight.
    pub bytes_acked: u64,
    /// Segments the sender retransmitted (tcp_info `total_retrans`).
    pub retrans_segs: u64,
    /// The sender's smoothed RTT at the end (tcp_info, µs).
    pub rtt_us: u64,
    /// Writable events delivered to the sending application.
    pub wakeups: u64,
    /// Mean of the sender's RTT samples (tcp_info, µs).
    pub mean_rtt_us: u64,
    /// The sender's smallest RTT sample (tcp_info `tcpi_min_rtt`, µs; 0 if none).
    pub min_rtt_us: u64,
    /// Times TCP Small Queues throttled the sender (tcp_info).
    pub tsq_throttled: u64,
    /// The sender's pacing rate at the end (tcp_info `tcpi_pacing_rate`, in bit/s).
    pub pacing_rate_bps: u64,
    /// The sender's BBR bottleneck-bandwidth estimate at the end (tcp_info
    /// `bbr_bw`, in bit/s; 0 for other congestion controls).
    pub bbr_bw_bps: u64,
    /// The sender's congestion state at the end (`tcpi_ca_state`).
    pub ca_state: &'static str,
    /// `TCP_NOTSENT_LOWAT` of the sending socket as getsockopt reports it (0: unset).
    pub notsent_lowat: u32,
    /// The flow passed the run's [`crate::verdict::Verdict`]: it connected and
    /// delivered its bytes intact (all of a fixed-size transfer; without a stall in a
    /// timed one).
    pub verified: bool,
    /// Why the flow failed (the verdict's reason), if it did.
    pub failure: Option<String>,
    /// The stream offset of the first wrong, extra or missing byte.
    pub first_error_offset: Option<u64>,
    /// A socket error seen by either end.
    pub socket_error: Option<String>,
    /// RSTs without ACK the receiving host sent to this flow (a listener's answers to
    /// segments no connection matched, e.g. after a failed SYN cookie check).
    pub listener_resets: u32,
}

/// Losses in the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Drops {
    /// Segments lost on the links (both directions).
    pub link_loss: u64,
    /// Packets dropped by full NIC queues (both hosts).
    pub queue: u64,
    /// Packets marked CE instead of dropped (both hosts; [`Scenario::ecn_mark_at`]).
    pub ce_marked: u64,
    /// Connections the receiving host accepted from a flow's port after the flow's
    /// own one (an old duplicate let in by a SYN cookie), closed unread.
    pub stray_connections: u64,
}

/// What sat in the sending host A's device queue, per flow (the `device_queue`
/// figures of an experiment). Averages are over the whole run, from time 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DeviceQueueResult {
    /// Most bytes (IP length) one flow ever had in the queue at once.
    pub peak_bytes_per_flow: u64,
    /// Time average of the flows' bytes in the queue, divided by the number of flows.
    pub mean_bytes_per_flow: f64,
    /// Longest wait of a packet from enqueue to the start of its serialization (µs).
    pub peak_delay_us: f64,
    /// Mean of that wait over the packets sent (a GSO packet counts once; µs).
    pub mean_delay_us: f64,
}

/// Writable events delivered to the sending applications (application wakeups).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Wakeups {
    /// Over all flows.
    pub total: u64,
    /// Per 1e6 bytes delivered.
    pub per_mb: f64,
    /// Per second of measured time.
    pub per_s: f64,
}

/// One host's device queue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceQueue {
    /// "A" or "B".
    pub host: &'static str,
    /// The queue's figures.
    #[serde(flatten)]
    pub stats: QueueStats,
    /// The qdisc (omitted for the default pfifo, so that default runs' JSON is
    /// as it was).
    #[serde(skip_serializing_if = "is_pfifo")]
    pub qdisc: &'static str,
    /// The qdisc's own counters by Linux's xstats names (none for a fifo).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub xstats: Vec<(&'static str, u64)>,
}

fn is_pfifo(q: &&'static str) -> bool {
    *q == "pfifo"
}

/// One link direction's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkResult {
    /// "A->B" or "B->A".
    pub dir: &'static str,
    /// What happened on it.
    #[serde(flatten)]
    pub stats: LinkStats,
}

/// The outcome of a run. Everything but `sim_wall_s` is a function of the scenario.
#[derive(Debug, Clone, Serialize)]
pub struct RunResults {
    /// Number of flows.
    pub flows: u32,
    /// Measured simulated time (s): the duration, or until the last byte arrived.
    pub duration_s: f64,
    /// Total goodput (bits/s).
    pub goodput_bps: f64,
    /// Per-flow figures.
    pub per_flow: Vec<FlowResult>,
    /// The verdict passed: every flow connected and delivered its bytes intact (for
    /// fixed transfers completely, for timed ones without stalling).
    pub bytes_verified: bool,
    /// Why the run failed, if it did: the verdict's summary.
    pub failure: Option<String>,
    /// The verdict with the reason of each failed flow.
    pub verdict: crate::verdict::Verdict,
    /// Counters of the sending host A (nstat names).
    pub counters: Counters,
    /// Counters of the receiving host B.
    pub counters_receiver: Counters,
    /// Wall-clock seconds the run took (the only non-deterministic field).
    pub sim_wall_s: f64,
    /// Wire segments put on the links, both directions.
    pub sim_packets: u64,
    /// Events processed.
    pub sim_events: u64,
    /// Losses.
    pub drops: Drops,
    /// Host A's TCP memory, sampled on a virtual-time grid over the whole run.
    pub memory: MemoryResult,
    /// Application wakeups of the senders.
    pub wakeups: Wakeups,
    /// Jain's fairness index over the flows' goodputs: for bulk runs over the last
    /// half of the measuring time, for fixed transfers over their whole goodputs.
    pub jain_index: f64,
    /// Per-flow figures of host A's device queue.
    pub device_queue: DeviceQueueResult,
    /// Both hosts' device queues, whole-queue figures.
    pub nic_queues: Vec<DeviceQueue>,
    /// Per link direction.
    pub links: Vec<LinkResult>,
    /// The time series, if the scenario asked for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeseries: Option<Timeseries>,
    /// iperf3's interval reports (empty unless the scenario asked for them).
    pub intervals: Vec<crate::intervals::JsonInterval>,
    /// iperf3's end summary: both sides' totals per flow and summed.
    pub end: crate::intervals::EndSummary,
    /// Host A's CPU model figures, if the scenario had a model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuFigures>,
    /// The hostile peer's figures and the victim's bound, if the scenario had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostile: Option<crate::hostile::HostileResult>,
    /// Host A's NIC: packets per queueing-delay bucket (`nic::delay_bucket`).
    #[serde(skip)]
    pub device_delay_histogram: Vec<u64>,
    /// Host A's NIC: packets per size bucket (`nic::SIZE_BUCKET` bytes wide).
    #[serde(skip)]
    pub device_size_histogram: Vec<u64>,
}
