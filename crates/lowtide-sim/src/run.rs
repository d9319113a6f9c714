//! Running a scenario and turning the final state into [`RunResults`].

use crate::intervals::{EndFigures, EndStream, EndSummary};
use crate::scenario::{
    DeviceQueue, DeviceQueueResult, Drops, FlowResult, LinkResult, RunResults, Scenario, SimError,
    Wakeups, Workload,
};
use crate::verdict::{FlowOutcome, Goal, Liveness, Verdict};
use crate::world::{World, HOST_A, HOST_B};
use core::time::Duration;
use lowtide::Instant;

/// Runs `sc` and reports.
pub(crate) fn run(sc: &Scenario) -> Result<RunResults, SimError> {
    let wall = std::time::Instant::now();
    let mut w = World::new(sc)?;
    w.setup(sc)?;
    let limit = match sc.workload {
        Workload::Bulk { .. } => None,
        Workload::Bytes { time_limit_ns, .. } => Some(Instant(time_limit_ns)),
    };
    let _ = w.run_loop(limit);
    w.sample_intervals(w.now);
    w.sample_memory(w.now);
    w.sample_timeseries(Instant(w.now.as_nanos() + 1));
    for flow in &mut w.flows {
        flow.sender.snapshot(&w.hosts[HOST_A].stack, w.now);
    }
    let verdict = verdict(sc, &w);
    let mut results = report(sc, &w, verdict);
    if let Some(p) = w.pcap.take() {
        p.finish().map_err(SimError::Pcap)?;
    }
    results.sim_wall_s = wall.elapsed().as_secs_f64();
    Ok(results)
}

/// Each flow's outcome for the [`Verdict`], at the end of the run.
fn outcomes(sc: &Scenario, w: &World) -> Vec<FlowOutcome> {
    let end = w.now;
    w.flows
        .iter()
        .map(|f| {
            let v = &f.receiver.verifier;
            let last = match f.sender.connected_at {
                Some(c) if v.received() > 0 => c.max(f.receiver.last_byte_at),
                Some(c) => c,
                None => f.sender.started_at,
            };
            FlowOutcome {
                flow: f.sender.flow,
                connected: f.sender.connected_at.is_some(),
                error: f.sender.error.or(f.receiver.error),
                delivered: v.received(),
                goal: match sc.workload {
                    Workload::Bytes { bytes, .. } => Goal::Bytes(bytes),
                    Workload::Bulk { .. } => Goal::Timed,
                },
                complete: matches!(sc.workload, Workload::Bytes { .. }) && v.complete_and_intact(),
                first_error_offset: v.first_error(),
                idle: Duration::from_nanos(end.saturating_since(last).as_nanos() as u64),
                sender_lag: sender_lag(w, f.sender.local_port),
            }
        })
        .collect()
}

/// How long the oldest packet for host A's socket on `port` has waited for the CPU
/// model at the end of the run (zero without a model or with nothing waiting).
fn sender_lag(w: &World, port: u16) -> Duration {
    let oldest = w.cpu.as_ref().and_then(|c| c.backlog.oldest_to_port(port));
    let end = w.now.as_nanos();
    Duration::from_nanos(oldest.map_or(0, |t| end.saturating_sub(t)))
}

/// The run's verdict: every flow connected and delivered its bytes intact.
fn verdict(sc: &Scenario, w: &World) -> Verdict {
    let live = match sc.workload {
        Workload::Bulk { duration_ns } => Liveness::bulk(Duration::from_nanos(duration_ns)),
        Workload::Bytes { time_limit_ns, .. } => Liveness {
            stall_after: Duration::from_nanos(time_limit_ns),
        },
    };
    Verdict::judge(&outcomes(sc, w), &live)
}

fn report(sc: &Scenario, w: &World, verdict: Verdict) -> RunResults {
    let end = w.now;
    let per_flow: Vec<FlowResult> = w
        .flows
        .iter()
        .map(|f| flow_result(sc, f, end, &verdict))
        .collect();
    let duration_ns = match sc.workload {
        Workload::Bulk { duration_ns } => duration_ns,
        Workload::Bytes { .. } => w
            .flows
            .iter()
            .map(|f| f.receiver.last_byte_at.as_nanos())
            .max()
            .unwrap_or(0),
    };
    let duration_s = duration_ns as f64 / 1e9;
    let bytes: u64 = per_flow.iter().map(|f| f.bytes_delivered).sum();
    let intervals = match &w.intervals {
        Some(s) => {
            let stack = &w.hosts[HOST_A].stack;
            let last: Vec<_> = w.flows.iter().map(|f| f.sender.point(stack, end)).collect();
            crate::intervals::build(s, duration_ns, &last)
        }
        None => Vec::new(),
    };
    let end_summary = end_summary(sc, w, &per_flow, duration_ns);
    let wakeups = wakeups(&per_flow, bytes, duration_ns);
    let jain_index = jain_index(w, &per_flow);
    let drops = Drops {
        link_loss: w.links.iter().map(|l| l.stats.lost).sum(),
        queue: w.hosts.iter().map(|h| h.nic.stats(end).drops).sum(),
        ce_marked: w.hosts.iter().map(|h| h.nic.stats(end).ce_marked).sum(),
        stray_connections: w.stray_connections,
    };
    RunResults {
        flows: sc.flows,
        duration_s,
        goodput_bps: rate(bytes, duration_ns),
        bytes_verified: verdict.ok,
        per_flow,
        failure: (!verdict.ok).then(|| verdict.summary()),
        verdict,
        counters: w.hosts[HOST_A].stack.counters().clone(),
        counters_receiver: w.hosts[HOST_B].stack.counters().clone(),
        sim_wall_s: 0.0,
        sim_packets: w.links.iter().map(|l| l.stats.packets).sum(),
        sim_events: w.events,
        drops,
        memory: w.memory.result(sc.flows),
        wakeups,
        jain_index,
        device_queue: device_queue(w, sc.flows, end),
        nic_queues: ["A", "B"]
            .iter()
            .zip(&w.hosts)
            .map(|(&host, h)| DeviceQueue {
                host,
                stats: h.nic.stats(end),
                qdisc: h.nic.kind(),
                xstats: h.nic.xstats(),
            })
            .collect(),
        links: ["A->B", "B->A"]
            .iter()
            .zip(&w.links)
            .map(|(&dir, l)| LinkResult {
                dir,
                stats: l.stats,
            })
            .collect(),
        timeseries: w.ts_grid.as_ref().map(|_| w.timeseries.clone()),
        intervals,
        end: end_summary,
        cpu: w.cpu.as_ref().map(|c| c.result(duration_ns)),
        hostile: w.hostile.as_ref().map(|p| p.finish()),
        device_delay_histogram: w.hosts[HOST_A].nic.delay_histogram().to_vec(),
        device_size_histogram: w.hosts[HOST_A].nic.size_histogram().to_vec(),
    }
}

fn wakeups(per_flow: &[FlowResult], bytes: u64, duration_ns: u64) -> Wakeups {
    let total: u64 = per_flow.iter().map(|f| f.wakeups).sum();
    let per = |x: f64| if x > 0.0 { total as f64 / x } else { 0.0 };
    Wakeups {
        total,
        per_mb: per(bytes as f64 / 1e6),
        per_s: per(duration_ns as f64 / 1e9),
    }
}

/// Host A's device queue per flow, over the whole run (`0..end`).
fn device_queue(w: &World, flows: u32, end: Instant) -> DeviceQueueResult {
    let s = w.hosts[HOST_A].nic.stats(end);
    DeviceQueueResult {
        peak_bytes_per_flow: s.peak_flow_bytes,
        mean_bytes_per_flow: s.mean_flow_bytes / flows.max(1) as f64,
        peak_delay_us: s.max_delay_us,
        mean_delay_us: s.mean_delay_us,
    }
}

fn flow_result(
    sc: &Scenario,
    f: &crate::world::Flow,
    end: Instant,
    verdict: &Verdict,
) -> FlowResult {
    let failure = verdict.failure_of(f.sender.flow);
    let v = &f.receiver.verifier;
    let start = f.sender.started_at.as_nanos();
    let stop = match sc.workload {
        Workload::Bulk { duration_ns } => duration_ns,
        Workload::Bytes { .. } => f.receiver.last_byte_at.as_nanos(),
    };
    let _ = end;
    FlowResult {
        flow: f.sender.flow,
        local_port: f.sender.local_port,
        goodput_bps: rate(v.received(), stop.saturating_sub(start)),
        bytes_delivered: v.received(),
        bytes_acked: f.sender.info.bytes_acked,
        retrans_segs: f.sender.info.retrans_segs,
        rtt_us: f.sender.info.rtt_us,
        wakeups: f.sender.wakeups,
        mean_rtt_us: f.sender.info.mean_rtt_us,
        min_rtt_us: f.sender.info.min_rtt_us,
        tsq_throttled: f.sender.info.tsq_throttled,
        pacing_rate_bps: f.sender.info.pacing_rate.saturating_mul(8),
        bbr_bw_bps: f.sender.info.bbr_bw.saturating_mul(8),
        ca_state: f.sender.info.ca_state,
        notsent_lowat: f.sender.info.notsent_lowat,
        verified: failure.is_none(),
        failure: failure.map(|x| x.to_string()),
        first_error_offset: v.first_error(),
        socket_error: f.sender.error.or(f.receiver.error).map(|e| e.to_string()),
        listener_resets: f.listener_resets,
    }
}

/// iperf3's `end`: per flow, what the sender's socket saw acknowledged and what the
/// receiver read, over the same measured time (from the flow's connect call to the
/// end of the run, or to its last byte in a fixed-size transfer); then the sums.
fn end_summary(sc: &Scenario, w: &World, per_flow: &[FlowResult], duration_ns: u64) -> EndSummary {
    let figures = |socket, end_ns: u64, span: u64, bytes, retrans: Option<u64>| EndFigures {
        socket,
        start: 0.0,
        end: end_ns as f64 / 1e9,
        seconds: end_ns as f64 / 1e9,
        bytes,
        bits_per_second: rate(bytes, span),
        retransmits: retrans,
        sender: retrans.is_some(),
    };
    let streams = (w.flows.iter().zip(per_flow))
        .map(|(f, r)| {
            let stop = match sc.workload {
                Workload::Bulk { duration_ns } => duration_ns,
                Workload::Bytes { .. } => f.receiver.last_byte_at.as_nanos(),
            };
            let span = stop.saturating_sub(f.sender.started_at.as_nanos());
            let id = Some(r.flow);
            EndStream {
                sender: figures(id, stop, span, r.bytes_acked, Some(r.retrans_segs)),
                receiver: figures(id, stop, span, r.bytes_delivered, None),
            }
        })
        .collect();
    let sent = per_flow.iter().map(|f| f.bytes_acked).sum();
    let received = per_flow.iter().map(|f| f.bytes_delivered).sum();
    let retrans = per_flow.iter().map(|f| f.retrans_segs).sum();
    EndSummary {
        streams,
        sum_sent: Some(figures(None, duration_ns, duration_ns, sent, Some(retrans))),
        sum_received: Some(figures(None, duration_ns, duration_ns, received, None)),
    }
}

/// Jain's index (sum x)^2 / (n * sum x^2) of the last half's bytes per flow (bulk), or
/// of the whole goodputs (fixed transfers). 1.0 is perfectly fair.
fn jain_index(w: &World, per_flow: &[FlowResult]) -> f64 {
    let xs: Vec<f64> = match &w.half_bytes {
        Some(half) => per_flow
            .iter()
            .zip(half)
            .map(|(f, h)| f.bytes_delivered.saturating_sub(*h) as f64)
            .collect(),
        None => per_flow.iter().map(|f| f.goodput_bps).collect(),
    };
    jain(&xs)
}

/// Jain's fairness index of `xs` (1.0 for an empty or all-zero set).
pub(crate) fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let sq: f64 = xs.iter().map(|x| x * x).sum();
    if sq == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * sq)
}

/// Bits per second for `bytes` in `ns`.
fn rate(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return 0.0;
    }
    bytes as f64 * 8.0 * 1e9 / ns as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn jain_index_values() {
        assert_eq!(super::jain(&[5.0, 5.0, 5.0, 5.0]), 1.0);
        assert!((super::jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((super::jain(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
    }
}
