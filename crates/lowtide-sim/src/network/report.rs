//! What a network run gives: per flow goodput, RTT, retransmissions (and a probe's
//! delays), per queue backlog, sojourn time, drops, CE marks, utilization and Jain's
//! index of the flows crossing it, the checks' outcomes and the verdict.

use super::check::{CheckResult, Figure, Owner};
use super::engine::{NetFlow, Network};
use super::series::{FlowSeries, QueueSeries};
use super::topology::{FlowDef, Topology};
use crate::nic::QueueStats;
use crate::run::jain;
use crate::verdict::{FlowOutcome, Goal, Liveness, Verdict};
use lowtide::Instant;
use serde::Serialize;
use std::time::Duration;

/// One flow's figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FlowReport {
    /// `NAME` or `NAME#i`.
    pub name: String,
    /// Sending host.
    pub from: String,
    /// Receiving host.
    pub to: String,
    /// The congestion control it ran (`TCP_CONGESTION`, else the host's).
    pub cc: String,
    /// Bytes read and verified by the receiver over its time (start to stop, end
    /// of run, or last byte of a fixed-size transfer), Mbit/s.
    pub goodput_mbps: f64,
    /// Bytes read and verified.
    pub bytes: u64,
    /// Mean of the sender's RTT samples (ms).
    pub rtt_ms: f64,
    /// The sender's smallest RTT sample (`tcpi_min_rtt`, ms).
    pub min_rtt_ms: f64,
    /// Segments retransmitted (`tcpi_total_retrans`).
    pub retrans: u64,
    /// Mean of the sender's `snd_cwnd` (segments) at the points of the run's
    /// series (`run.series_interval`) while its socket lived, up to the end of
    /// its measured time; `None` without series or samples.
    pub cwnd: Option<f64>,
    /// A probe's mean one-way message delay, write to read (ms).
    pub delay_ms: Option<f64>,
    /// Its 99th percentile (ms).
    pub delay_p99_ms: Option<f64>,
    /// Its largest (ms).
    pub delay_max_ms: Option<f64>,
    /// A request/response flow's completed transactions.
    pub transactions: Option<u64>,
    /// Its transactions per second over its time (netperf TCP_RR's rate).
    pub tps: Option<f64>,
    /// Its mean transaction latency, request written to response read (ms).
    pub latency_ms: Option<f64>,
    /// The latency's median (ms).
    pub latency_p50_ms: Option<f64>,
    /// Its 90th percentile (ms).
    pub latency_p90_ms: Option<f64>,
    /// Its 99th percentile (ms).
    pub latency_p99_ms: Option<f64>,
    /// Its largest (ms).
    pub latency_max_ms: Option<f64>,
}

/// One egress queue's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueReport {
    /// `SRC->DST`.
    pub name: String,
    /// The qdisc (`tc` name).
    pub qdisc: &'static str,
    /// Flows whose data cross it.
    pub flows: usize,
    /// Time-mean backlog (bytes).
    pub backlog_bytes: f64,
    /// Most packets queued at once.
    pub backlog_max_packets: u64,
    /// Mean sojourn time (ms): enqueue to the start of transmission.
    pub sojourn_ms: f64,
    /// Longest sojourn time (ms).
    pub sojourn_max_ms: f64,
    /// Packets the qdisc dropped.
    pub drops: u64,
    /// Packets it marked CE.
    pub ce_marks: u64,
    /// Share of the link's time spent transmitting (wire bytes over rate).
    pub utilization: f64,
    /// Jain's index of the goodputs of the flows crossing it, probes and
    /// request/response flows aside (two or more).
    pub jain: Option<f64>,
}

/// A network run's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct NetResults {
    /// Virtual time run (s).
    pub duration_s: f64,
    /// Every flow connected and delivered its bytes intact.
    pub bytes_verified: bool,
    /// Why not, if not.
    pub failure: Option<String>,
    /// The per-flow verdict.
    pub verdict: Verdict,
    /// Per flow.
    pub flows: Vec<FlowReport>,
    /// Per egress queue (two per link).
    pub queues: Vec<QueueReport>,
    /// The file's checks.
    pub checks: Vec<CheckResult>,
    /// The queues' time series (`run.series_interval`), of the queues a flow's
    /// data crosses.
    pub series: Vec<QueueSeries>,
    /// The flows' time series on the same grid: bytes read, goodput, cwnd.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flow_series: Vec<FlowSeries>,
    /// Segments routers dropped for an expired TTL or no route.
    pub router_drops: u64,
    /// Events processed.
    pub sim_events: u64,
    /// Wire segments serialized on every link direction.
    pub sim_packets: u64,
    /// Wall-clock time of the run (s).
    pub sim_wall_s: f64,
}

impl NetResults {
    /// Whether every check held.
    pub fn checks_pass(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }

    /// The value of a named figure: a flow's, the mean over a group's instances,
    /// or a queue's; `None` if it has none.
    pub fn figure(&self, f: &Figure) -> Option<f64> {
        match f.owner {
            Owner::Flow => {
                let group = format!("{}#", f.name);
                let xs: Vec<f64> = (self.flows.iter())
                    .filter(|r| r.name == f.name || r.name.starts_with(&group))
                    .map(|r| flow_figure(r, &f.figure))
                    .collect::<Option<_>>()?;
                (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
            }
            Owner::Queue => {
                let q = self.queues.iter().find(|q| q.name == f.name)?;
                queue_figure(q, &f.figure)
            }
        }
    }
}

/// Figure `name` ([`super::check::FLOW_FIGURES`]) of one flow; `None` if it has
/// none (a bulk flow's probe delay).
pub fn flow_figure(r: &FlowReport, name: &str) -> Option<f64> {
    Some(match name {
        "goodput_mbps" => r.goodput_mbps,
        "bytes" => r.bytes as f64,
        "rtt_ms" => r.rtt_ms,
        "min_rtt_ms" => r.min_rtt_ms,
        "retrans" => r.retrans as f64,
        "cwnd" => r.cwnd?,
        "delay_ms" => r.delay_ms?,
        "delay_p99_ms" => r.delay_p99_ms?,
        "delay_max_ms" => r.delay_max_ms?,
        "transactions" => r.transactions? as f64,
        "tps" => r.tps?,
        "latency_ms" => r.latency_ms?,
        "latency_p50_ms" => r.latency_p50_ms?,
        "latency_p90_ms" => r.latency_p90_ms?,
        "latency_p99_ms" => r.latency_p99_ms?,
        "latency_max_ms" => r.latency_max_ms?,
        _ => return None,
    })
}

/// Figure `name` ([`super::check::QUEUE_FIGURES`]) of one queue.
pub fn queue_figure(q: &QueueReport, name: &str) -> Option<f64> {
    Some(match name {
        "backlog_bytes" => q.backlog_bytes,
        "backlog_max_packets" => q.backlog_max_packets as f64,
        "sojourn_ms" => q.sojourn_ms,
        "sojourn_max_ms" => q.sojourn_max_ms,
        "drops" => q.drops as f64,
        "ce_marks" => q.ce_marks as f64,
        "utilization" => q.utilization,
        "jain" => q.jain?,
        _ => return None,
    })
}

/// The results of a finished run.
pub(crate) fn report(net: &mut Network, wall: std::time::Instant) -> NetResults {
    let t = net.topo;
    let end = net.now;
    for (f, def) in net.flows.iter_mut().zip(&t.flows) {
        f.sender.snapshot(&net.hosts[def.from].stack, end);
    }
    let verdict = verdict(t, &net.flows, end.as_nanos());
    let sampler = std::mem::replace(&mut net.sampler, super::series::Sampler::new(t));
    let (series, flow_series) = sampler.finish(t);
    let mut flows: Vec<FlowReport> = (net.flows.iter().zip(&t.flows))
        .map(|(f, def)| flow_report(t, def, f, end.as_nanos()))
        .collect();
    set_mean_cwnd(t, &mut flows, &flow_series, end.as_nanos());
    let queues = (0..t.ports.len())
        .map(|p| {
            let port = &net.ports[p];
            let (stats, qdisc): (QueueStats, &'static str) = match &port.queue {
                Some(q) => (q.stats(end), q.kind()),
                None => {
                    let nic = &net.hosts[port.src].nic;
                    (nic.stats(end), nic.kind())
                }
            };
            queue_report(t, p, (stats, qdisc), &port.dir, end.as_nanos(), &flows)
        })
        .collect();
    let mut r = NetResults::assemble(t, end.as_nanos(), verdict, flows, queues);
    r.series = series;
    r.flow_series = flow_series;
    r.router_drops = net.router_drops;
    r.sim_events = net.events;
    r.sim_packets = net.ports.iter().map(|p| p.dir.stats.packets).sum();
    r.sim_wall_s = wall.elapsed().as_secs_f64();
    r
}

/// Each flow's mean cwnd ([`FlowReport::cwnd`]) from its series (`series[i]`
/// is flow `i`'s), up to its stop or the run's end (`end_ns`).
pub fn set_mean_cwnd(t: &Topology, flows: &mut [FlowReport], series: &[FlowSeries], end_ns: u64) {
    for ((r, def), s) in flows.iter_mut().zip(&t.flows).zip(series) {
        let until = def.stop_ns.unwrap_or(end_ns).min(end_ns);
        r.cwnd = s.mean_cwnd(until as f64 / 1e9);
    }
}

impl NetResults {
    /// A run's results from its parts, the checks evaluated on them; the counters
    /// of the engine that ran it (`sim_*`, `router_drops`, `series`) left at zero
    /// for the caller.
    pub fn assemble(
        t: &Topology,
        end_ns: u64,
        verdict: Verdict,
        flows: Vec<FlowReport>,
        queues: Vec<QueueReport>,
    ) -> NetResults {
        let mut r = NetResults {
            duration_s: end_ns as f64 / 1e9,
            bytes_verified: verdict.ok,
            failure: (!verdict.ok).then(|| verdict.summary()),
            verdict,
            flows,
            queues,
            checks: Vec::new(),
            series: Vec::new(),
            flow_series: Vec::new(),
            router_drops: 0,
            sim_events: 0,
            sim_packets: 0,
            sim_wall_s: 0.0,
        };
        r.checks = t.checks.iter().map(|c| c.eval(|f| r.figure(f))).collect();
        r
    }
}

/// Every flow connected and delivered intact: all its bytes (fixed-size), its
/// whole stream up to the stop (stopped bulk), or without stalling (bulk, probe).
fn verdict(t: &Topology, flows: &[NetFlow], end: u64) -> Verdict {
    let outcomes: Vec<FlowOutcome> = (flows.iter().zip(&t.flows).enumerate())
        .map(|(i, (f, def))| {
            let v = &f.receiver.verifier;
            let last = match f.sender.connected_at {
                Some(c) if v.received() > 0 => c.max(f.receiver.last_byte_at),
                Some(c) => c,
                None => f.sender.started_at,
            };
            // An on/off flow is not idle while it is off.
            let last = last.max(Instant(f.off_since.unwrap_or(0)));
            let responses = f.rr.as_ref().and_then(|r| r.responses.first_error());
            let (goal, complete) = match (def.bytes, def.stop_ns) {
                (Some(n), _) => (Goal::Bytes(n), v.complete_and_intact()),
                (None, Some(_)) => (
                    Goal::UntilClose,
                    v.eof() && v.first_error().is_none() && v.received() == f.sender.written,
                ),
                (None, None) => (Goal::Timed, false),
            };
            FlowOutcome {
                flow: i as u32,
                connected: f.sender.connected_at.is_some(),
                error: f.sender.error.or(f.receiver.error),
                delivered: v.received(),
                goal,
                complete,
                first_error_offset: v.first_error().or(responses),
                idle: Duration::from_nanos(end.saturating_sub(last.as_nanos())),
                // The network engine models no sender CPU.
                sender_lag: Duration::ZERO,
            }
        })
        .collect();
    let live = Liveness::bulk(Duration::from_nanos(t.duration_ns));
    Verdict::judge(&outcomes, &live)
}

fn flow_report(t: &Topology, def: &FlowDef, f: &NetFlow, end: u64) -> FlowReport {
    let v = &f.receiver.verifier;
    // A fixed-size or stopped flow's time runs to its last byte (what it wrote
    // before its stop includes its send buffer), a running one's to the end.
    let stop = match (def.bytes, def.stop_ns) {
        (None, None) => end,
        _ => f.receiver.last_byte_at.as_nanos(),
    };
    let secs = stop.saturating_sub(def.start_ns) as f64 / 1e9;
    let (delay_ms, delay_p99_ms, delay_max_ms) = delay_figures(f.delays.clone());
    let info = &f.sender.info;
    let host_cc = match &t.nodes[def.from].kind {
        super::topology::NodeKind::Host { config, .. } => config.tcp_congestion_control.clone(),
        super::topology::NodeKind::Router => String::new(),
    };
    let mut r = FlowReport {
        name: def.name.clone(),
        from: t.nodes[def.from].name.clone(),
        to: t.nodes[def.to].name.clone(),
        cc: def.cc.clone().unwrap_or(host_cc),
        goodput_mbps: if secs > 0.0 {
            v.received() as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        },
        bytes: v.received(),
        rtt_ms: info.mean_rtt_us as f64 / 1e3,
        min_rtt_ms: info.min_rtt_us as f64 / 1e3,
        retrans: info.retrans_segs,
        delay_ms,
        delay_p99_ms,
        delay_max_ms,
        ..FlowReport::default()
    };
    if let Some(rr) = &f.rr {
        r.set_transactions(&rr.latencies, secs);
    }
    r
}

impl FlowReport {
    /// A request/response flow's figures from its transactions' latencies (ns)
    /// over its `secs`: how many, per second, and the latency percentiles
    /// ([`latency_figures`]).
    pub fn set_transactions(&mut self, latencies: &[u64], secs: f64) {
        let n = latencies.len();
        self.transactions = Some(n as u64);
        self.tps = Some(n as f64 / secs).filter(|x| x.is_finite());
        [
            self.latency_ms,
            self.latency_p50_ms,
            self.latency_p90_ms,
            self.latency_p99_ms,
            self.latency_max_ms,
        ] = latency_figures(latencies.to_vec());
    }
}

/// A request/response flow's (mean, median, 90th, 99th percentile, largest)
/// latency in ms from its transactions' latencies in ns (netperf's MEAN_LATENCY,
/// P50_LATENCY, P90_LATENCY, P99_LATENCY, MAX_LATENCY); all `None` without any.
pub fn latency_figures(mut d: Vec<u64>) -> [Option<f64>; 5] {
    d.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    // The nearest rank: the smallest value with at least p % of them at or below.
    let pct = |p: usize| match d.len() {
        0 => None,
        n => Some(ms(d[(n * p).div_ceil(100).clamp(1, n) - 1])),
    };
    [
        (!d.is_empty()).then(|| ms(d.iter().sum::<u64>()) / d.len() as f64),
        pct(50),
        pct(90),
        pct(99),
        d.last().map(|&x| ms(x)),
    ]
}

/// A probe's (mean, 99th percentile, largest) delay in ms from its messages'
/// delays in ns; all `None` without any.
pub fn delay_figures(mut d: Vec<u64>) -> (Option<f64>, Option<f64>, Option<f64>) {
    d.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    (
        (!d.is_empty()).then(|| ms(d.iter().sum::<u64>()) / d.len() as f64),
        (!d.is_empty()).then(|| ms(d[(d.len() * 99 / 100).min(d.len() - 1)])),
        d.last().map(|&x| ms(x)),
    )
}

/// Port `p`'s queue figures from its qdisc's statistics and its link's counters at
/// the end (`end_ns`), with Jain's index of `flows` that cross it.
pub(crate) fn queue_report(
    t: &Topology,
    p: usize,
    (stats, qdisc): (QueueStats, &'static str),
    link: &lowtide_link::LinkDir,
    end_ns: u64,
    flows: &[FlowReport],
) -> QueueReport {
    let crossing = t.flows.iter().filter(|def| def.path.contains(&p)).count();
    // Fairness among the flows that want the bandwidth: probes and
    // request/response flows take what they need.
    let shares: Vec<f64> = (t.flows.iter().zip(flows))
        .filter(|(def, _)| def.path.contains(&p) && def.probe.is_none() && def.rr.is_none())
        .map(|(_, r)| r.goodput_mbps)
        .collect();
    let rate = link.config().rate_bps as f64;
    let busy_s = link.stats.wire_bytes as f64 * 8.0 / rate;
    let secs = end_ns as f64 / 1e9;
    QueueReport {
        name: t.ports[p].name.clone(),
        qdisc,
        flows: crossing,
        backlog_bytes: stats.mean_bytes,
        backlog_max_packets: stats.peak_packets,
        sojourn_ms: stats.mean_delay_us / 1e3,
        sojourn_max_ms: stats.max_delay_us / 1e3,
        drops: stats.drops,
        ce_marks: stats.ce_marked,
        utilization: if secs > 0.0 {
            (busy_s / secs).min(1.0)
        } else {
            0.0
        },
        jain: (shares.len() >= 2).then(|| jain(&shares)),
    }
}
