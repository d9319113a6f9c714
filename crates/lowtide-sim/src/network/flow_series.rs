//! `sim run --timeseries DIR`: every flow's sender sampled on a virtual-time grid
//! (`ss -ti`'s figures, the rows `sim stream --timeseries` writes, with DCTCP's
//! alpha), and every CE mark a router's queue made, with what the queue held then.
//!
//! As `sim stream`'s sampler, the state at a grid point is the one the last event
//! before it left: before each event the engine records every grid point passed.

use crate::timeseries::{FlowSample, Grid};
use serde::Serialize;

/// A CE mark a router's queue made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// Virtual time (ns).
    pub time_ns: u64,
    /// The queue (`SRC->DST`).
    pub queue: String,
    /// Packets queued when the marked packet arrived.
    pub backlog_packets: u64,
    /// Bytes queued then.
    pub backlog_bytes: u64,
    /// The marked packet's flow (its id, see [`NetTimeseries::flow_names`]), if it
    /// belongs to one.
    pub flow: Option<u32>,
    /// Bytes of that flow's own packets among those queued then.
    pub flow_backlog_bytes: u64,
}

/// A run's flow rows and marks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NetTimeseries {
    /// Grid interval (µs).
    pub interval_us: f64,
    /// The flows' names, by flow id (the order of the report's flow table).
    pub flow_names: Vec<String>,
    /// One row per grid point and connected flow, flows in order.
    pub flows: Vec<FlowSample>,
    /// Every CE mark of a router's queue, in time order.
    pub marks: Vec<Mark>,
}

impl NetTimeseries {
    /// The flow rows as CSV (`sim stream --timeseries`'s columns; `flow` is the id,
    /// see [`NetTimeseries::flow_names`]).
    pub fn flows_csv(&self) -> String {
        crate::timeseries::flows_csv(&self.flows)
    }

    /// The marks as CSV (header first; `flow` empty for a packet of no flow).
    pub fn marks_csv(&self) -> String {
        let mut s =
            String::from("time_s,queue,backlog_packets,backlog_bytes,flow,flow_backlog_bytes\n");
        for m in &self.marks {
            s += &format!(
                "{:.9},{},{},{},{},{}\n",
                m.time_ns as f64 / 1e9,
                m.queue,
                m.backlog_packets,
                m.backlog_bytes,
                m.flow.map_or(String::new(), |f| f.to_string()),
                m.flow_backlog_bytes
            );
        }
        s
    }

    /// Flow ids and names as CSV.
    pub fn names_csv(&self) -> String {
        let mut s = String::from("flow,name\n");
        for (i, n) in self.flow_names.iter().enumerate() {
            s += &format!("{i},{n}\n");
        }
        s
    }
}

/// Takes the flow rows during a run.
#[derive(Debug, Clone)]
pub(crate) struct FlowSampler {
    pub grid: Grid,
    pub rows: Vec<FlowSample>,
}

impl FlowSampler {
    /// Samples every `interval_ns` (at least 1).
    pub fn new(interval_ns: u64) -> FlowSampler {
        FlowSampler {
            grid: Grid::new(interval_ns),
            rows: Vec::new(),
        }
    }
}
