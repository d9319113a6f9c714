//! Networks of hosts, routers and queues (issue 22): a scenario file
//! ([`schema`]) names hosts running lowtide, routers, links between any two nodes
//! with a qdisc on each egress ([`crate::qdisc`], Linux's names and defaults),
//! routes, flows and checks; [`run`] simulates it in virtual time, every flow's
//! bytes verified at its receiver, and reports per flow and per queue
//! ([`NetResults`]) with the checks' outcomes.
//!
//! The two-host world (`sim stream`) is left as it is: this engine runs beside it
//! with the same host model (`SimHost`: stack, NIC qdisc cutting GSO packets,
//! NAPI/GRO receive path) and the same link (`lowtide_link::LinkDir`), and adds
//! routers: each arriving segment is routed, its TTL decreased, and queued on the
//! egress port's qdisc, whose transmitter serializes it at the link's rate.
//!
//! ```
//! use lowtide_sim::network::{run_text, NetResults};
//! let text = r#"
//!     checks = ["flow.f.goodput_mbps > 5"]
//!     [run]
//!     duration = "1s"
//!     [hosts.a]
//!     [hosts.b]
//!     [routers.r]
//!     [links.up]
//!     between = ["a", "r"]
//!     [links.down]
//!     between = ["r", "b"]
//!     rate = "10mbit"
//!     delay = "5ms"
//!     [flows.f]
//!     from = "a"
//!     to = "b"
//! "#;
//! let r: NetResults = run_text(text, false, &[]).unwrap();
//! assert!(r.bytes_verified && r.checks_pass());
//! ```

pub mod check;
mod engine;
pub mod fabric;
pub mod flow_series;
mod port;
pub mod report;
pub mod schema;
pub mod series;
pub mod topology;

pub use check::{Check, CheckResult};
pub use flow_series::NetTimeseries;
pub use report::{FlowReport, NetResults, QueueReport};
pub use schema::ScenarioFile;
pub use series::{FlowSeries, GridRecorder, QueueSeries};
pub use topology::Topology;

/// Runs a resolved scenario.
pub fn run(t: &Topology) -> Result<NetResults, String> {
    let wall = std::time::Instant::now();
    let mut net = engine::Network::new(t)?;
    net.run();
    Ok(report::report(&mut net, wall))
}

/// Runs a resolved scenario with its time series (`sim run --timeseries`): every
/// flow's sender sampled every `interval_ns`, and every CE mark of a router's queue.
pub fn run_with_timeseries(
    t: &Topology,
    interval_ns: u64,
) -> Result<(NetResults, NetTimeseries), String> {
    let wall = std::time::Instant::now();
    let mut net = engine::Network::new(t)?;
    net.flow_sampler = Some(flow_series::FlowSampler::new(interval_ns));
    for p in net.ports.iter_mut().filter(|p| p.queue.is_some()) {
        p.marks = Some(Vec::new());
    }
    net.run();
    let ts = net.take_timeseries();
    Ok((report::report(&mut net, wall), ts))
}

/// Parses (with the file's `[quick]` overrides if `quick`, then `sets`), resolves
/// and runs a scenario file's text.
pub fn run_text(text: &str, quick: bool, sets: &[String]) -> Result<NetResults, String> {
    let file = ScenarioFile::parse(text, quick, sets)?;
    run(&Topology::new(&file)?)
}
