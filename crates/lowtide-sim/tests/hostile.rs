//! The simulator's hostile peer (issue 27, `sim stream --hostile`, the soak's hostile
//! runs): each attack takes place against host B beside verified flows, B's memory
//! stays within its bound, and the soak's check fails a run whose victim broke it.

mod common;

use common::*;
use lowtide::Mib;
use lowtide_sim::hostile::{Attack, HostileResult};
use lowtide_sim::soak::SoakCase;
use lowtide_sim::Scenario;

/// Two 2 MB flows over 100 Mbit/s, 2 ms, with `attack` beside them.
fn attacked(attack: Attack, sysctls: &[&str]) -> (Scenario, HostileResult, lowtide::Counters) {
    let sc = Scenario {
        hostile: Some(attack),
        config: config(sysctls),
        ..transfer(3, 2, 2_000_000)
    };
    let r = run_verified(&sc);
    let h = r.hostile.clone().expect("a hostile result");
    assert_eq!(h.violation, None, "{h:?}");
    assert_eq!(h.not_run, None, "{h:?}");
    (sc, h, r.counters_receiver)
}

/// 1-byte segments with 1-byte gaps over the window: the attacked connection's
/// buffer follows its memory up to `tcp_rmem[2]` (as Linux's `tcp_clamp_window`
/// raises it) and no further; the rest is pruned or dropped. The peer's 20,000
/// segments charge 18 MB, so both ceilings here are reached.
#[test]
fn ofo_fill_is_held_to_the_buffer_beside_verified_flows() {
    for rmem in ["4096 131072 6291456", "4096 1048576 8388608"] {
        let (_, h, b) = attacked(Attack::OfoFill, &[&format!("net.ipv4.tcp_rmem={rmem}")]);
        assert_eq!(h.handshakes, 1);
        assert!(h.packets > 20_000 / 2, "{h:?}");
        assert!(
            h.peak_rmem > h.rcvbuf as u64 / 2,
            "the buffer was filled: {h:?}"
        );
        assert!(b.get(Mib::TcpExtPruneCalled) > 0, "{rmem}");
        assert!(b.get(Mib::TcpExtTCPOFODrop) > 0, "{rmem}");
    }
}

/// Segments each one byte lower before a large out-of-order run: bounded too.
#[test]
fn prepend_runs_stay_within_the_buffer() {
    for variant in ["", "net.ipv4.tcp_sack=0"] {
        let sysctls: Vec<&str> = [variant].into_iter().filter(|s| !s.is_empty()).collect();
        let (_, h, b) = attacked(Attack::Prepend, &sysctls);
        assert!(h.packets > 5_000, "{h:?}");
        assert!(h.peak_rmem > 0 && h.rcvbuf > 0, "{h:?}");
        assert!(b.get(Mib::TcpExtTCPOFOQueue) > 0);
    }
}

/// Spoofed SYNs overflow the SYN queue: B answers with cookies, holds no more than
/// its flows, backlog + 1 requests and the silent handshakes, and the flows connect.
#[test]
fn conn_flood_leaves_the_syn_queue_bounded() {
    let (sc, h, b) = attacked(Attack::ConnFlood, &[]);
    assert_eq!(h.handshakes, 64, "every silent handshake completed: {h:?}");
    assert!(b.get(Mib::TcpExtSyncookiesSent) > 1_000, "{:?}", b);
    let bound = sc.flows as u64 + 128 + 1 + 64;
    assert!(h.peak_connections <= bound, "{h:?}");
    assert!(h.peak_connections > 128, "the SYN queue was full: {h:?}");
}

/// The soak's check names a victim that broke its bound, and an attack that did not
/// take place; a hostile run that holds passes.
#[test]
fn the_soak_check_fails_a_broken_bound_with_its_reason() {
    let run = (0..200)
        .find(|&i| SoakCase::generate(1, i).hostile == Some(Attack::OfoFill))
        .expect("an ofo-fill run among the first 200");
    let case = SoakCase::generate(1, run);
    let r = case.scenario().unwrap().run().unwrap();
    let out = case.check(&r);
    assert!(out.ok, "{:?}", out.reasons);
    let mut broken = r.clone();
    if let Some(h) = broken.hostile.as_mut() {
        h.violation = Some("sk_rmem_alloc 9999999".into());
    }
    let out = case.check(&broken);
    assert!(!out.ok);
    assert!(
        out.reasons
            .iter()
            .any(|x| x.starts_with("victim under ofo-fill: sk_rmem_alloc 9999999")),
        "{:?}",
        out.reasons
    );
    let mut idle = r.clone();
    if let Some(h) = idle.hostile.as_mut() {
        h.not_run = Some("no SYN-ACK came".into());
    }
    assert!(!case.check(&idle).ok);
    let mut missing = r;
    missing.hostile = None;
    assert!(!case.check(&missing).ok);
    assert!(
        case.repro().contains("--hostile=ofo-fill"),
        "{}",
        case.repro()
    );
}
