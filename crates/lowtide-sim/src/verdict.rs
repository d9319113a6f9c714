//! The verdict of a run: one place that decides whether a set of flows succeeded, with
//! a reason per failed flow. The simulator's report, the real-path commands
//! (`lowtide transfer`, `lowtide iperf3`) and randomized harnesses all judge with it,
//! so a run never reads "verified" next to "stalled".
//!
//! A run succeeds only when every flow connected and delivered its bytes intact: all
//! of them for a fixed-size transfer (or up to the sender's end of stream), and for a
//! timed (bulk) one at least one byte with no gap longer than the liveness bound
//! before the end, the bound counted in the sender's time: a sender that has not yet
//! processed packets which arrived for it (the simulator's CPU model of host A, whose
//! saturated CPU leaves ACKs waiting in its socket backlog) is given that wait on top
//! ([`FlowOutcome::sender_lag`]).
//!
//! ```
//! use lowtide_sim::verdict::{FlowOutcome, Liveness, Verdict};
//! use std::time::Duration;
//! let never = FlowOutcome { flow: 0, ..FlowOutcome::default() };
//! let v = Verdict::judge(&[never], &Liveness::bulk(Duration::from_secs(10)));
//! assert!(!v.ok);
//! assert_eq!(v.summary(), "1 of 1 flow failed: flow 0: never connected");
//! ```

use lowtide::SocketError;
use serde::Serialize;
use std::time::Duration;

/// What a flow did, as its two applications saw it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowOutcome {
    /// The flow's id.
    pub flow: u32,
    /// The connection reached ESTABLISHED (at either end).
    pub connected: bool,
    /// The first socket error at either end.
    pub error: Option<SocketError>,
    /// Bytes the receiving application read, intact up to `first_error_offset`.
    pub delivered: u64,
    /// What the flow had to do.
    pub goal: Goal,
    /// The goal was reached: a fixed-size transfer ended with its end of stream after
    /// exactly its bytes, a receive-until-close saw the peer's FIN.
    pub complete: bool,
    /// The stream offset of the first wrong, missing or extra byte.
    pub first_error_offset: Option<u64>,
    /// Time from the flow's last progress (its last byte read, else its connection)
    /// to the end of the run.
    pub idle: Duration,
    /// How long the oldest packet for the flow's sender has waited, at the end of the
    /// run, for the sending host to process it (the simulator's CPU model: its socket
    /// backlog; zero where nothing models the sender's CPU). The sender has seen the
    /// path only up to that long ago, so a timed flow's liveness bound is extended by
    /// it.
    pub sender_lag: Duration,
}

/// What a flow has to do to succeed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Goal {
    /// Run for the test's duration, delivering data without stalling.
    #[default]
    Timed,
    /// Deliver exactly this many bytes, then the end of stream.
    Bytes(u64),
    /// Deliver whatever the sender sends until its end of stream.
    UntilClose,
}

/// When a flow without progress counts as stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// A timed flow that delivered nothing for longer than this before the end of the
    /// run is stalled.
    pub stall_after: Duration,
}

impl Liveness {
    /// For a timed run of `duration`: no byte in its last half is a stall.
    pub fn bulk(duration: Duration) -> Liveness {
        Liveness {
            stall_after: duration / 2,
        }
    }
}

/// Why one flow failed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum FlowFailure {
    /// The connection was never established (the SYN or SYN-ACK never got through,
    /// the peer refused, or the run ended first).
    NeverConnected {
        /// The error the connect attempt ended with, if any.
        #[serde(skip)]
        error: Option<SocketError>,
    },
    /// The peer reset the established connection (`ECONNRESET`).
    Reset,
    /// Retransmissions or probes were exhausted (`ETIMEDOUT`).
    TimedOut,
    /// Another socket error.
    Error {
        /// The error.
        #[serde(skip)]
        error: SocketError,
    },
    /// A byte arrived wrong, missing or extra.
    Corrupt {
        /// Stream offset of the first bad byte.
        offset: u64,
    },
    /// The flow stopped making progress: a fixed-size transfer that did not finish, or
    /// a timed one idle beyond the liveness bound (or that delivered nothing).
    Stalled {
        /// Bytes delivered.
        delivered: u64,
        /// Bytes expected (fixed-size transfers).
        expected: Option<u64>,
        /// Seconds without progress at the end of the run.
        idle_s: f64,
    },
}

impl core::fmt::Display for FlowFailure {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FlowFailure::NeverConnected { error: None } => write!(f, "never connected"),
            FlowFailure::NeverConnected { error: Some(e) } => {
                write!(f, "never connected ({e})")
            }
            FlowFailure::Reset => write!(f, "reset by the peer (ECONNRESET)"),
            FlowFailure::TimedOut => write!(f, "timed out (ETIMEDOUT)"),
            FlowFailure::Error { error } => write!(f, "socket error: {error}"),
            FlowFailure::Corrupt { offset } => write!(f, "bad stream at offset {offset}"),
            FlowFailure::Stalled {
                delivered,
                expected: Some(e),
                idle_s,
            } => write!(
                f,
                "stalled: time limit reached after {delivered} of {e} bytes \
                 (the last {idle_s:.3} s without progress)"
            ),
            FlowFailure::Stalled {
                delivered, idle_s, ..
            } => write!(
                f,
                "stalled: {delivered} bytes delivered, none in the last {idle_s:.3} s"
            ),
        }
    }
}

/// One failed flow.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedFlow {
    /// The flow's id.
    pub flow: u32,
    /// Why it failed.
    #[serde(flatten)]
    pub failure: FlowFailure,
    /// The reason as text.
    pub detail: String,
}

/// The verdict over all flows of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Every flow connected and delivered its bytes intact.
    pub ok: bool,
    /// Number of flows judged.
    pub flows: u32,
    /// The failed flows, in flow order.
    pub failed: Vec<FailedFlow>,
}

impl Verdict {
    /// Judges each flow: the first failure found in the order corrupt byte,
    /// never connected, socket error, incomplete or stalled.
    pub fn judge(outcomes: &[FlowOutcome], live: &Liveness) -> Verdict {
        let failed: Vec<FailedFlow> = outcomes
            .iter()
            .filter_map(|o| {
                judge_flow(o, live).map(|failure| FailedFlow {
                    flow: o.flow,
                    detail: failure.to_string(),
                    failure,
                })
            })
            .collect();
        Verdict {
            ok: failed.is_empty(),
            flows: outcomes.len() as u32,
            failed,
        }
    }

    /// The failure of flow `flow`, if it failed.
    pub fn failure_of(&self, flow: u32) -> Option<FlowFailure> {
        self.failed
            .iter()
            .find(|f| f.flow == flow)
            .map(|f| f.failure)
    }

    /// One line: "every byte of N flows verified", or how many flows failed and why
    /// (the first few flows by name, then counts per reason).
    pub fn summary(&self) -> String {
        if self.ok {
            return format!("every byte of {} verified", flows(u64::from(self.flows)));
        }
        const NAMED: usize = 3;
        let mut s = format!(
            "{} of {} failed: ",
            self.failed.len(),
            flows(u64::from(self.flows))
        );
        let named: Vec<String> = self
            .failed
            .iter()
            .take(NAMED)
            .map(|f| format!("flow {}: {}", f.flow, f.failure))
            .collect();
        s.push_str(&named.join("; "));
        if self.failed.len() > NAMED {
            let mut counts: Vec<(&'static str, usize)> = Vec::new();
            for f in &self.failed {
                let k = f.failure.kind();
                match counts.iter_mut().find(|c| c.0 == k) {
                    Some(c) => c.1 += 1,
                    None => counts.push((k, 1)),
                }
            }
            let c: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
            s.push_str(&format!("; in all: {}", c.join(", ")));
        }
        s
    }
}

impl FlowFailure {
    /// A short name of the reason ("never connected", "stalled", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            FlowFailure::NeverConnected { .. } => "never connected",
            FlowFailure::Reset => "reset",
            FlowFailure::TimedOut => "timed out",
            FlowFailure::Error { .. } => "socket error",
            FlowFailure::Corrupt { .. } => "corrupt",
            FlowFailure::Stalled { .. } => "stalled",
        }
    }
}

/// "1 flow", "N flows".
pub fn flows(n: u64) -> String {
    match n {
        1 => "1 flow".to_string(),
        n => format!("{n} flows"),
    }
}

fn judge_flow(o: &FlowOutcome, live: &Liveness) -> Option<FlowFailure> {
    if let Some(offset) = o.first_error_offset {
        return Some(FlowFailure::Corrupt { offset });
    }
    if !o.connected {
        return Some(FlowFailure::NeverConnected { error: o.error });
    }
    if let Some(e) = o.error {
        return Some(match e {
            SocketError::ConnectionReset => FlowFailure::Reset,
            SocketError::TimedOut => FlowFailure::TimedOut,
            error => FlowFailure::Error { error },
        });
    }
    let (stalled, expected) = match o.goal {
        Goal::Bytes(n) => (!o.complete, Some(n)),
        Goal::UntilClose => (!o.complete, None),
        Goal::Timed => {
            let bound = live.stall_after.saturating_add(o.sender_lag);
            (o.delivered == 0 || o.idle > bound, None)
        }
    };
    stalled.then_some(FlowFailure::Stalled {
        delivered: o.delivered,
        expected,
        idle_s: o.idle.as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> Liveness {
        Liveness::bulk(Duration::from_secs(10))
    }

    fn good(flow: u32) -> FlowOutcome {
        FlowOutcome {
            flow,
            connected: true,
            delivered: 1000,
            idle: Duration::from_millis(1),
            ..FlowOutcome::default()
        }
    }

    #[test]
    fn every_reason() {
        let fixed = FlowOutcome {
            goal: Goal::Bytes(2000),
            ..good(5)
        };
        let cases = [
            (good(0), None),
            (
                FlowOutcome {
                    error: Some(SocketError::TimedOut),
                    connected: false,
                    ..good(1)
                },
                Some("never connected (connection timed out (ETIMEDOUT))"),
            ),
            (
                FlowOutcome {
                    error: Some(SocketError::ConnectionReset),
                    ..good(2)
                },
                Some("reset by the peer (ECONNRESET)"),
            ),
            (
                FlowOutcome {
                    first_error_offset: Some(7),
                    ..good(3)
                },
                Some("bad stream at offset 7"),
            ),
            (
                FlowOutcome {
                    idle: Duration::from_secs(6),
                    ..good(4)
                },
                Some("stalled: 1000 bytes delivered, none in the last 6.000 s"),
            ),
            (
                fixed.clone(),
                Some(
                    "stalled: time limit reached after 1000 of 2000 bytes \
                     (the last 0.001 s without progress)",
                ),
            ),
            (
                FlowOutcome {
                    complete: true,
                    delivered: 2000,
                    ..fixed
                },
                None,
            ),
            (
                FlowOutcome {
                    delivered: 0,
                    ..good(6)
                },
                Some("stalled: 0 bytes delivered, none in the last 0.001 s"),
            ),
            (
                FlowOutcome {
                    goal: Goal::UntilClose,
                    ..good(7)
                },
                Some("stalled: 1000 bytes delivered, none in the last 0.001 s"),
            ),
        ];
        for (o, want) in cases {
            let v = Verdict::judge(std::slice::from_ref(&o), &live());
            assert_eq!(v.ok, want.is_none(), "{o:?}");
            assert_eq!(v.failure_of(o.flow).map(|f| f.to_string()).as_deref(), want);
        }
    }

    /// A timed flow idle beyond the bound is stalled unless its sender had not yet
    /// processed packets that old: the bound runs in the sender's time. The lag
    /// never excuses a flow that delivered nothing, nor a fixed-size transfer.
    #[test]
    fn a_lagging_sender_extends_a_timed_flows_bound_by_its_lag() {
        let idle = |idle_s: u64, lag_ms: u64| FlowOutcome {
            idle: Duration::from_secs(idle_s),
            sender_lag: Duration::from_millis(lag_ms),
            ..good(0)
        };
        let stalled = |o: FlowOutcome| !Verdict::judge(&[o], &live()).ok;
        assert!(stalled(idle(6, 0)), "6 s idle against 5 s");
        assert!(stalled(idle(6, 999)), "6 s idle against 5.999 s");
        assert!(!stalled(idle(6, 1000)), "6 s idle against 6 s");
        assert!(!stalled(idle(6, 2440)));
        let nothing = FlowOutcome {
            delivered: 0,
            ..idle(6, 5000)
        };
        assert!(stalled(nothing));
        let fixed = FlowOutcome {
            goal: Goal::Bytes(2000),
            ..idle(6, 5000)
        };
        assert!(stalled(fixed));
        // A bound of Duration::MAX (lowtide iperf3's) takes a lag without overflow.
        let never = Liveness {
            stall_after: Duration::MAX,
        };
        assert!(Verdict::judge(&[idle(6, 1000)], &never).ok);
    }

    #[test]
    fn summary_names_a_few_and_counts_the_rest() {
        let mut flows: Vec<FlowOutcome> = (0..5)
            .map(|i| FlowOutcome {
                flow: i,
                ..FlowOutcome::default()
            })
            .collect();
        flows.push(good(5));
        let v = Verdict::judge(&flows, &live());
        assert_eq!(
            v.summary(),
            "5 of 6 flows failed: flow 0: never connected; flow 1: never connected; \
             flow 2: never connected; in all: 5 never connected"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["failed"][0]["reason"], "never_connected");
        assert_eq!(json["ok"], false);
    }
}
