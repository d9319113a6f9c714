//! `--timeseries FILE` on the real-path commands (`lowtide transfer`, `lowtide
//! iperf3`): the simulator's columns (`lowtide_sim::timeseries`, `ss -ti` names),
//! sampled from lowtide's stack on the runtime's clock, written by
//! [`crate::timeseries::write`].
//!
//! A grid point records the state at the first loop turn at or after it (the
//! runtime's loop turns at least every 100 ms, so a point is at most that late). On
//! the real path a flow's `dev_queue_bytes` is its `sk_wmem_alloc`: the bytes handed to
//! the device and not yet completed, which is what TCP Small Queues counts; the host
//! row's is the emulated link's queue backlog.

use clap::Args;
use lowtide::{Instant, SocketHandle};
use lowtide_sim::timeseries::{FlowSample, Grid, HostSample, Timeseries};
use lowtide_tun::runtime::Runtime;
use std::path::PathBuf;
use std::time::Duration;

/// The flags.
#[derive(Args, Debug, Clone)]
pub struct TimeseriesArgs {
    /// Writes a time series of the run to FILE: per flow and interval, ss -ti's
    /// figures (cwnd, ssthresh, rtt, pacing_rate, unacked, in_flight, notsent,
    /// wmem_queued, dev_queue_bytes = sk_wmem_alloc, delivered, bytes_acked, retrans,
    /// ca_state); CSV, or JSON lines if FILE ends in .jsonl. Host-wide rows go to
    /// FILE's stem + "-host" with the same extension.
    #[arg(long, value_name = "FILE")]
    pub timeseries: Option<PathBuf>,
    /// Interval of the time series.
    #[arg(long, default_value = "100ms", value_parser = crate::units::parse_duration)]
    pub timeseries_interval: Duration,
}

impl TimeseriesArgs {
    /// A recorder if `--timeseries` was given; `start` is time zero.
    pub fn recorder(&self, start: Instant) -> Option<Recorder> {
        self.timeseries.as_ref()?;
        Some(Recorder::new(self.timeseries_interval, start))
    }

    /// Writes what `rec` recorded, if anything was asked for.
    pub fn write(&self, rec: Option<&Recorder>) -> Result<(), String> {
        match (&self.timeseries, rec) {
            (Some(p), Some(r)) => crate::timeseries::write(p, &r.ts),
            _ => Ok(()),
        }
    }

    /// Checks the flags (usage errors).
    pub fn validate(&self) -> Result<(), String> {
        if self.timeseries_interval.is_zero() {
            return Err("--timeseries-interval must be positive".into());
        }
        crate::outputs::check_files([("--timeseries", self.timeseries.as_deref())])
    }
}

/// Samples a runtime's stack on a grid.
#[derive(Debug, Clone)]
pub struct Recorder {
    grid: Grid,
    start: Instant,
    ts: Timeseries,
}

impl Recorder {
    /// A recorder with points every `interval` from `start`.
    pub fn new(interval: Duration, start: Instant) -> Recorder {
        Recorder {
            grid: Grid::new(interval.as_nanos() as u64),
            start,
            ts: Timeseries {
                interval_us: interval.as_nanos() as f64 / 1e3,
                ..Timeseries::default()
            },
        }
    }

    /// Records every grid point up to now with the state of `flows` now (the host's
    /// delivered bytes: the flows' bytes acknowledged plus bytes received).
    pub fn observe(&mut self, rt: &Runtime, flows: &[SocketHandle]) {
        let now = rt.now();
        let t = now.saturating_since(self.start).as_nanos() as u64;
        let points: Vec<u64> = self.grid.take_due(t + 1).collect();
        if points.is_empty() {
            return;
        }
        let stack = rt.stack_ref();
        let infos: Vec<_> = (flows.iter().enumerate())
            .filter_map(|(i, &h)| stack.info(now, h).ok().map(|x| (i as u32, x)))
            .collect();
        let mem = stack.tcp_memory();
        let delivered = (infos.iter())
            .map(|(_, i)| i.bytes_acked + i.bytes_received)
            .sum();
        for p in points {
            let time_us = p / 1000;
            self.ts.host.push(HostSample {
                time_us,
                tcp_mem_pages: mem.pages,
                wmem_queued: mem.wmem_queued,
                dev_queue_bytes: rt.egress_queue_bytes(),
                wakeups: infos.iter().map(|(_, i)| i.wakeups).sum(),
                delivered_bytes: delivered,
                cpu: None,
            });
            for (flow, i) in &infos {
                // Below the socket: its bytes not yet completed by the device
                // (sk_wmem_alloc). The receiver is the kernel's: not sampled here.
                let dev = i.wmem_alloc;
                self.ts
                    .flows
                    .push(FlowSample::from_info(time_us, *flow, i, dev, None));
            }
        }
    }
}
