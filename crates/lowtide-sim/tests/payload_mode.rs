//! The pattern payload mode (issue 26) changes memory and speed only: the same
//! scenarios in both modes report the same figures, every one of them, and put the
//! same bytes on the wire (scripts/check-determinism.sh --payload pattern runs the
//! determinism set the same way).

mod common;

use common::*;
use lowtide_sim::{PayloadMode, Scenario};

fn bulk(flows: u32, rate_bps: u64, rtt_us: u64, ms: u64) -> Scenario {
    bulk_for(flows, rate_bps, rtt_us, ms * 1_000_000)
}

/// Runs `sc` in both modes; the results (wall time aside) must be equal.
fn same_in_both_modes(name: &str, sc: Scenario) {
    let run = |payload| {
        let r = Scenario {
            payload,
            ..sc.clone()
        }
        .run()
        .expect("scenario runs");
        assert!(r.bytes_verified, "{name} {payload:?}: {:?}", r.failure);
        deterministic_json(&r)
    };
    let (stored, pattern) = (run(PayloadMode::Stored), run(PayloadMode::Pattern));
    assert!(stored == pattern, "{name}: the modes differ");
}

#[test]
fn impaired_paths_report_the_same_figures() {
    let mut sc = bulk(3, 1_000_000_000, 10_000, 400);
    sc.link_ab.loss = 0.01;
    sc.link_ab.reorder = 0.02;
    sc.link_ab.jitter_ns = 200_000;
    sc.link_ab.duplicate = 0.005;
    sc.link_ab.corrupt = 0.003;
    sc.link_ba.loss = 0.005;
    same_in_both_modes("impaired", sc);
}

#[test]
fn retransmission_paths_report_the_same_figures() {
    // Without SACK (collapsed retransmissions), with MTU probing (probes built from
    // several skbs), with BBR and GRO off, and a fixed transfer with bursty loss.
    let mut sc = bulk(2, 200_000_000, 5_000, 400);
    sc.link_ab.loss = 0.02;
    sc.config = config(&["net.ipv4.tcp_sack=0", "net.ipv4.tcp_mtu_probing=2"]);
    same_in_both_modes("no sack, mtu probing", sc);
    let mut sc = bulk(4, 2_000_000_000, 1_000, 200);
    sc.gro = false;
    sc.link_ab.loss = 0.005;
    sc.config = config(&["net.ipv4.tcp_congestion_control=bbr"]);
    same_in_both_modes("bbr", sc);
    let mut sc = transfer(7, 2, 1_500_000);
    sc.link_ab.loss = 0.03;
    sc.link_ab.loss_burst = 3.0;
    sc.link_ba.loss = 0.01;
    sc.notsent_lowat = Some(64 * 1024);
    same_in_both_modes("bytes", sc);
}

#[test]
fn the_wire_carries_the_same_bytes() {
    let dir = std::env::temp_dir();
    let pcap = |payload: PayloadMode| {
        let path = dir.join(format!(
            "lowtide-payload-{payload:?}-{}.pcap",
            std::process::id()
        ));
        let mut sc = bulk(2, 100_000_000, 5_000, 300);
        sc.link_ab.loss = 0.01;
        sc.link_ab.corrupt = 0.005;
        sc.pcap = Some(path.clone());
        sc.payload = payload;
        run_verified(&sc);
        let bytes = std::fs::read(&path).expect("pcap written");
        let _ = std::fs::remove_file(&path);
        bytes
    };
    assert!(pcap(PayloadMode::Stored) == pcap(PayloadMode::Pattern));
}

/// Runs a scenario file's text (`sim run`) in `payload` mode; its results, wall
/// time aside, as JSON.
fn network_json(text: &str, payload: PayloadMode) -> String {
    use lowtide_sim::network::{run, ScenarioFile, Topology};
    let mut t =
        Topology::new(&ScenarioFile::parse(text, false, &[]).expect("parses")).expect("resolves");
    t.payload = payload;
    let r = run(&t).expect("runs");
    assert!(r.bytes_verified, "{payload:?}: {:?}", r.failure);
    assert!(r.checks_pass(), "{payload:?}: {:?}", r.checks);
    let mut v = serde_json::to_value(&r).expect("serializable");
    v.as_object_mut().expect("object").remove("sim_wall_s");
    v.to_string()
}

#[test]
fn scenarios_report_the_same_figures() {
    // Every flow kind (bulk, stopped, fixed-size, probe, request/response, on/off)
    // through a router, over a lossy, reordering, corrupting bottleneck behind fq on
    // the host and fq_codel at the router, BBR and no SACK on one host each. The
    // bulk flows stop at 1.2 s with up to ~330 KB still queued, which a flow at
    // its share of the lossy bottleneck (cwnd 4 to 8) needs up to ~600 ms to
    // deliver: the run leaves them 800 ms, so that the verdict judges delivery,
    // not how much happened to be queued at the stop.
    let text = r#"
        checks = [
            "flow.bulk.retrans > 0",
            "flow.rr.transactions > 10",
            "flow.probe.delay_ms > 0",
            "queue.r->b.drops > 0",
        ]
        [run]
        duration = "2000ms"
        seed = 8
        [hosts.a]
        [hosts.c]
        cc = "bbr"
        sysctls = { "net.ipv4.tcp_sack" = 0 }
        [hosts.b]
        [routers.r]
        [links.a_up]
        between = ["a", "r"]
        rate = "1gbit"
        delay = "1ms"
        queue = "fq"
        [links.c_up]
        between = ["c", "r"]
        rate = "1gbit"
        delay = "2ms"
        [links.down]
        between = ["r", "b"]
        rate = "100mbit"
        delay = "5ms"
        loss = 0.01
        reorder = 0.02
        corrupt = 0.002
        queue = "fq_codel,limit=200"
        reverse = { loss = 0.005, queue = "pfifo_fast" }
        [flows.bulk]
        from = "a"
        to = "b"
        count = 3
        stop = "1200ms"
        [flows.bbr]
        from = "c"
        to = "b"
        [flows.bytes]
        from = "c"
        to = "b"
        bytes = 300000
        start = "100ms"
        [flows.probe]
        from = "a"
        to = "b"
        probe = { size = 3000, interval = "20ms" }
        [flows.rr]
        from = "c"
        to = "b"
        rr = { request = 2000, response = 40000, think = "5ms" }
        [flows.onoff]
        from = "a"
        to = "b"
        on = "200ms"
        off = "100ms"
    "#;
    let stored = network_json(text, PayloadMode::Stored);
    let pattern = network_json(text, PayloadMode::Pattern);
    assert!(stored == pattern, "the modes differ:\n{stored}\n{pattern}");
}
