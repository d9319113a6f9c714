//! Time series of a run: the sending host and, on request, every flow, sampled on a
//! virtual-time grid (`lowtide sim stream --timeseries`, the experiments' plots).
//!
//! As with the memory sampler ([`crate::sample`]), the state at a grid point is the
//! one the last event before it left: before each event the world records every grid
//! point passed since the previous one. Flow columns carry `ss -ti`'s names where it
//! has one (`cwnd`, `ssthresh`, `rtt`, `pacing_rate`, `unacked`, `notsent`,
//! `delivered`, `retrans`, `bytes_acked`; `wmem_queued` and `sndbuf` are `ss -m`'s `w`
//! and `tb`).

use serde::{Deserialize, Serialize};

/// What to sample and how often.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeseriesConfig {
    /// Grid interval (ns, at least 1).
    pub interval_ns: u64,
    /// Also one row per flow and grid point (else only the host rows).
    pub per_flow: bool,
}

/// Host A (the senders) at one grid point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSample {
    /// Virtual time (µs).
    pub time_us: u64,
    /// Stack-wide TCP memory (4 KB pages, `sockstat` "mem").
    pub tcp_mem_pages: u64,
    /// Sum of `sk_wmem_queued` over the sockets (bytes).
    pub wmem_queued: u64,
    /// Bytes in the NIC queue (IP length).
    pub dev_queue_bytes: u64,
    /// Writable events delivered to the senders so far.
    pub wakeups: u64,
    /// Bytes the receivers have read so far (all flows).
    pub delivered_bytes: u64,
    /// Host A's modeled CPU ([`crate::cpu`]), in runs that model it (E4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuSample>,
}

/// Host A's modeled CPU at one grid point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSample {
    /// CPU time charged so far (ns): packets processed in and sent out.
    pub busy_ns: u64,
    /// Packets received and waiting in the socket backlog for the CPU.
    pub backlog_packets: u64,
    /// How long the oldest of them has waited (µs; 0 with an empty backlog).
    pub backlog_oldest_wait_us: u64,
}

/// One flow's sender at one grid point (`ss -ti` names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowSample {
    /// Virtual time (µs).
    pub time_us: u64,
    /// Flow id.
    pub flow: u32,
    /// `snd_cwnd` (segments).
    pub cwnd: u32,
    /// `snd_ssthresh` (segments).
    pub ssthresh: u32,
    /// Smoothed RTT (`tcpi_rtt`, µs).
    pub rtt_us: u32,
    /// `tcpi_pacing_rate` (bit/s).
    pub pacing_rate_bps: u64,
    /// Segments sent and not cumulatively acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// Segments in flight (`tcp_packets_in_flight`: unacked - sacked - lost + retrans).
    pub in_flight: u32,
    /// Bytes written and not yet sent (`tcpi_notsent_bytes`).
    pub notsent: u64,
    /// `sk_wmem_queued` (bytes).
    pub wmem_queued: u64,
    /// `sk_sndbuf` (bytes, `ss -m`'s `tb`).
    pub sndbuf: u32,
    /// This flow's bytes in the NIC queue.
    pub dev_queue_bytes: u64,
    /// `tcpi_delivered` (segments).
    pub delivered: u64,
    /// `tcpi_bytes_acked`.
    pub bytes_acked: u64,
    /// `tcpi_total_retrans` (segments).
    pub retrans: u32,
    /// `tcpi_ca_state`.
    pub ca_state: String,
    /// `tcpi_snd_wnd`: the peer's window as last received (bytes).
    #[serde(default)]
    pub snd_wnd: u32,
    /// `tcpi_sacked` (segments).
    #[serde(default)]
    pub sacked: u32,
    /// `tcpi_lost` (segments).
    #[serde(default)]
    pub lost: u32,
    /// `tcpi_retrans`: retransmitted segments in flight.
    #[serde(default)]
    pub retrans_out: u32,
    /// `tcpi_rwnd_limited` so far (us).
    #[serde(default)]
    pub rwnd_limited_us: u64,
    /// `tcpi_sndbuf_limited` so far (us).
    #[serde(default)]
    pub sndbuf_limited_us: u64,
    /// The receiver's `sk_rcvbuf` (bytes; 0 when the receiver is not lowtide's).
    #[serde(default)]
    pub rcv_rcvbuf: u32,
    /// The receiver's `sk_rmem_alloc` (bytes; 0 when the receiver is not lowtide's).
    #[serde(default)]
    pub rcv_rmem: u64,
    /// The receiver's `tcpi_rcv_space` (bytes read per RTT, autotuning's measure).
    #[serde(default)]
    pub rcv_space: u32,
    /// The receiver's `tcpi_rcv_ssthresh` (the window it may offer now).
    #[serde(default)]
    pub rcv_ssthresh: u32,
    /// The receiver's `tcpi_rcv_wnd` (the window it last advertised).
    #[serde(default)]
    pub rcv_wnd: u32,
    /// DCTCP's `dctcp_alpha` (`tcp_dctcp_info`, out of 1024), for a DCTCP sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dctcp_alpha: Option<u32>,
}

impl FlowSample {
    /// A sender's row from its `tcp_info` `i`. The flow's bytes in the device queue
    /// and the receiver's `tcp_info` (`None` when the receiver is not lowtide's, so
    /// its buffer reads 0) come from where the caller sees them.
    pub fn from_info(
        time_us: u64,
        flow: u32,
        i: &lowtide::TcpInfo,
        dev_queue_bytes: u64,
        receiver: Option<&lowtide::TcpInfo>,
    ) -> FlowSample {
        FlowSample {
            time_us,
            flow,
            cwnd: i.snd_cwnd,
            ssthresh: i.snd_ssthresh,
            rtt_us: i.rtt,
            pacing_rate_bps: i.pacing_rate.saturating_mul(8),
            unacked: i.unacked,
            in_flight: (i.unacked + i.retrans).saturating_sub(i.sacked + i.lost),
            notsent: i.notsent_bytes,
            wmem_queued: i.wmem_queued,
            sndbuf: i.sndbuf,
            dev_queue_bytes,
            delivered: i.delivered,
            bytes_acked: i.bytes_acked,
            retrans: i.total_retrans,
            ca_state: i.ca_state.to_string(),
            snd_wnd: i.snd_wnd,
            sacked: i.sacked,
            lost: i.lost,
            retrans_out: i.retrans,
            rwnd_limited_us: i.rwnd_limited,
            sndbuf_limited_us: i.sndbuf_limited,
            rcv_rcvbuf: receiver.map_or(0, |r| r.rcvbuf),
            rcv_rmem: receiver.map_or(0, |r| r.rmem_alloc),
            rcv_space: receiver.map_or(0, |r| r.rcv_space),
            rcv_ssthresh: receiver.map_or(0, |r| r.rcv_ssthresh),
            rcv_wnd: receiver.map_or(0, |r| r.rcv_wnd),
            dctcp_alpha: None,
        }
    }
}

/// The collected rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeseries {
    /// Grid interval (µs).
    pub interval_us: f64,
    /// Host rows, one per grid point.
    pub host: Vec<HostSample>,
    /// Flow rows, flows in order within each grid point (empty unless asked for).
    pub flows: Vec<FlowSample>,
}

/// The grid: which points are due.
#[derive(Debug, Clone)]
pub struct Grid {
    interval_ns: u64,
    next_ns: u64,
}

impl Grid {
    /// A grid of `interval_ns` (at least 1) starting at 0.
    pub fn new(interval_ns: u64) -> Grid {
        Grid {
            interval_ns: interval_ns.max(1),
            next_ns: 0,
        }
    }

    /// The spacing of the grid points (ns).
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Grid points before `now_ns` have not been recorded yet.
    #[inline]
    pub fn due(&self, now_ns: u64) -> bool {
        self.next_ns < now_ns
    }

    /// The grid points before `until_ns` not yet recorded (and marks them recorded).
    pub fn take_due(&mut self, until_ns: u64) -> impl Iterator<Item = u64> {
        let (first, step) = (self.next_ns, self.interval_ns);
        let n = match self.due(until_ns) {
            true => (until_ns - 1 - first) / step + 1,
            false => 0,
        };
        self.next_ns += n * step;
        (0..n).map(move |i| first + i * step)
    }
}

impl Timeseries {
    /// The host rows as CSV (header first).
    pub fn host_csv(&self) -> String {
        let cpu = self.host.iter().any(|r| r.cpu.is_some());
        let mut s = String::from(
            "time_s,tcp_mem_pages,wmem_queued,dev_queue_bytes,wakeups,delivered_bytes",
        );
        if cpu {
            s += ",cpu_busy_ns,cpu_backlog_packets,cpu_backlog_oldest_wait_us";
        }
        s += "\n";
        for r in &self.host {
            s += &format!(
                "{:.6},{},{},{},{},{}",
                r.time_us as f64 / 1e6,
                r.tcp_mem_pages,
                r.wmem_queued,
                r.dev_queue_bytes,
                r.wakeups,
                r.delivered_bytes
            );
            if cpu {
                let c = r.cpu.unwrap_or(CpuSample {
                    busy_ns: 0,
                    backlog_packets: 0,
                    backlog_oldest_wait_us: 0,
                });
                s += &format!(
                    ",{},{},{}",
                    c.busy_ns, c.backlog_packets, c.backlog_oldest_wait_us
                );
            }
            s += "\n";
        }
        s
    }

    /// The flow rows as CSV (header first).
    pub fn flows_csv(&self) -> String {
        flows_csv(&self.flows)
    }
}

/// Flow rows as CSV (header first): `sim stream --timeseries`'s file, and `sim run
/// --timeseries`' flows.csv.
pub fn flows_csv(rows: &[FlowSample]) -> String {
    let mut s = String::from(
        "time_s,flow,cwnd,ssthresh,rtt_us,pacing_rate_bps,unacked,in_flight,notsent,\
             wmem_queued,sndbuf,dev_queue_bytes,delivered,bytes_acked,retrans,ca_state,\
             snd_wnd,sacked,lost,retrans_out,rwnd_limited_us,sndbuf_limited_us,rcv_rcvbuf,rcv_rmem,\
             rcv_space,rcv_ssthresh,rcv_wnd,dctcp_alpha\n",
    );
    for r in rows {
        s += &format!(
                "{:.6},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.time_us as f64 / 1e6,
                r.flow,
                r.cwnd,
                r.ssthresh,
                r.rtt_us,
                r.pacing_rate_bps,
                r.unacked,
                r.in_flight,
                r.notsent,
                r.wmem_queued,
                r.sndbuf,
                r.dev_queue_bytes,
                r.delivered,
                r.bytes_acked,
                r.retrans,
                r.ca_state,
                r.snd_wnd,
                r.sacked,
                r.lost,
                r.retrans_out,
                r.rwnd_limited_us,
                r.sndbuf_limited_us,
                r.rcv_rcvbuf,
                r.rcv_rmem,
                r.rcv_space,
                r.rcv_ssthresh,
                r.rcv_wnd,
                r.dctcp_alpha.map_or(String::new(), |a| a.to_string())
            );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_csv_has_cpu_columns_only_when_the_cpu_is_modeled() {
        let row = |cpu| HostSample {
            time_us: 100_000,
            tcp_mem_pages: 1,
            wmem_queued: 2,
            dev_queue_bytes: 3,
            wakeups: 4,
            delivered_bytes: 5,
            cpu,
        };
        let mut ts = Timeseries {
            host: vec![row(None)],
            ..Timeseries::default()
        };
        assert_eq!(ts.host_csv().lines().nth(1), Some("0.100000,1,2,3,4,5"));
        assert!(!ts.host_csv().contains("cpu_"));
        let cpu = CpuSample {
            busy_ns: 7,
            backlog_packets: 8,
            backlog_oldest_wait_us: 9,
        };
        ts.host = vec![row(Some(cpu))];
        let csv = ts.host_csv();
        assert!(csv.starts_with(
            "time_s,tcp_mem_pages,wmem_queued,dev_queue_bytes,wakeups,delivered_bytes,\
             cpu_busy_ns,cpu_backlog_packets,cpu_backlog_oldest_wait_us\n"
        ));
        assert_eq!(csv.lines().nth(1), Some("0.100000,1,2,3,4,5,7,8,9"));
        // A run without the model serializes as before (determinism references).
        let json = serde_json::to_string(&row(None)).unwrap_or_default();
        assert!(!json.contains("cpu"));
    }

    #[test]
    fn grid_yields_each_point_once() {
        let mut g = Grid::new(10);
        assert_eq!(g.take_due(0).count(), 0);
        assert_eq!(g.take_due(25).collect::<Vec<_>>(), vec![0, 10, 20]);
        assert_eq!(g.take_due(30).count(), 0);
        assert_eq!(g.take_due(31).collect::<Vec<_>>(), vec![30]);
    }
}
