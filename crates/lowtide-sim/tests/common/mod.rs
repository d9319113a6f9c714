//! Shared helpers of the scenario tests.
#![allow(dead_code)]

use lowtide::Config;
use lowtide_sim::{LinkConfig, RunResults, Scenario, Workload};

/// A link direction with the given rate and one-way delay.
pub fn link(rate_bps: u64, delay_us: u64) -> LinkConfig {
    LinkConfig {
        rate_bps,
        delay_ns: delay_us * 1_000,
        ..LinkConfig::default()
    }
}

/// `flows` fixed-size transfers of `bytes` over a 100 Mbit/s, 2 ms RTT link.
pub fn transfer(seed: u64, flows: u32, bytes: u64) -> Scenario {
    Scenario {
        seed,
        flows,
        workload: Workload::Bytes {
            bytes,
            time_limit_ns: 600_000_000_000,
        },
        link_ab: link(100_000_000, 1_000),
        link_ba: link(100_000_000, 1_000),
        ..Scenario::default()
    }
}

/// `flows` bulk flows for `duration_ns` over a link of `rate_bps` and `rtt_us`.
pub fn bulk_for(flows: u32, rate_bps: u64, rtt_us: u64, duration_ns: u64) -> Scenario {
    Scenario {
        flows,
        workload: Workload::Bulk { duration_ns },
        link_ab: link(rate_bps, rtt_us / 2),
        link_ba: link(rate_bps, rtt_us / 2),
        ..Scenario::default()
    }
}

/// A config with sysctls applied.
pub fn config(sysctls: &[&str]) -> Config {
    let mut c = Config::default();
    for s in sysctls {
        c.set_assignment(s).expect("valid sysctl");
    }
    c
}

/// Runs and insists that every byte arrived intact.
pub fn run_verified(sc: &Scenario) -> RunResults {
    let r = sc.run().expect("scenario runs");
    assert!(
        r.bytes_verified,
        "not verified: {:?}\nscenario: {sc:?}",
        r.failure
    );
    if let Workload::Bytes { bytes, .. } = sc.workload {
        for f in &r.per_flow {
            assert_eq!(f.bytes_delivered, bytes, "flow {}", f.flow);
        }
    }
    r
}

/// The results as JSON without the wall-clock field.
pub fn deterministic_json(r: &RunResults) -> String {
    let mut v = serde_json::to_value(r).expect("serializable");
    v.as_object_mut().expect("object").remove("sim_wall_s");
    v.to_string()
}
