//! The network engine (issue 22) as stories: a flow through a router behaves as
//! over one link of the same bottleneck; runs are deterministic; a router's
//! fq_codel isolates a sparse flow; ECN marks instead of drops; fixed-size
//! transfers end the run.

use lowtide_sim::network::{run_text, NetResults, QueueReport};
use lowtide_sim::{LinkConfig, Scenario, Workload};

/// a -- r -- b, the bottleneck at the router's egress towards b.
fn through_router(extra: &str) -> String {
    format!(
        r#"
        {extra}
        [run]
        duration = "3s"
        [hosts.a]
        [hosts.b]
        [routers.r]
        [links.up]
        between = ["a", "r"]
        rate = "1gbit"
        [links.down]
        between = ["r", "b"]
        rate = "50mbit"
        delay = "10ms"
        [flows.f]
        from = "a"
        to = "b"
        "#
    )
}

/// The router's queue towards b (`r->b`), the bottleneck of [`through_router`].
fn router_egress(r: &NetResults) -> &QueueReport {
    r.queues
        .iter()
        .find(|q| q.name == "r->b")
        .expect("queue r->b")
}

fn run(text: &str, sets: &[&str]) -> NetResults {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let r = run_text(text, false, &sets).unwrap();
    assert!(r.bytes_verified, "{:?}", r.failure);
    r
}

#[test]
fn one_flow_through_a_router_matches_the_direct_link() {
    let r = run(&through_router(""), &[]);
    let link = LinkConfig {
        rate_bps: 50_000_000,
        delay_ns: 10_000_000,
        ..LinkConfig::default()
    };
    let direct = Scenario {
        workload: Workload::Bulk {
            duration_ns: 3_000_000_000,
        },
        link_ab: link.clone(),
        link_ba: link,
        ..Scenario::default()
    }
    .run()
    .unwrap();
    let (routed, direct) = (r.flows[0].goodput_mbps, direct.goodput_bps / 1e6);
    assert!(
        (routed - direct).abs() < 0.05 * direct,
        "through a router {routed} Mbit/s, direct {direct} Mbit/s"
    );
    let min_rtt = r.flows[0].min_rtt_ms;
    assert!((20.0..21.0).contains(&min_rtt), "{min_rtt}");
    let q = router_egress(&r);
    assert!(q.utilization > 0.9 && q.sojourn_ms > 10.0, "{q:?}");
}

#[test]
fn same_file_same_results() {
    let sets = ["flows.f.count=3", "links.down.loss=0.001"];
    let a = run(&through_router(""), &sets);
    let b = run(&through_router(""), &sets);
    assert_eq!(a.flows, b.flows);
    assert_eq!(a.sim_events, b.sim_events);
    let c = run(&through_router(""), &[sets[0], sets[1], "run.seed=2"]);
    assert_ne!(a.flows, c.flows, "the seed changes the run");
}

#[test]
fn fq_codel_at_the_router_isolates_a_probe() {
    let probe = "[flows.p]\nfrom = \"a\"\nto = \"b\"\nprobe = { size = 64, interval = \"20ms\" }";
    let text = format!("{}\n{probe}", through_router(""));
    let fifo = run(&text, &["links.down.queue=pfifo,limit=500"]);
    let fq = run(&text, &["links.down.queue=fq_codel"]);
    let delay = |r: &NetResults| {
        r.flows
            .iter()
            .find(|f| f.name == "p")
            .unwrap()
            .delay_ms
            .unwrap()
    };
    assert!(delay(&fifo) > 40.0, "{}", delay(&fifo));
    assert!(delay(&fq) < 15.0, "{}", delay(&fq));
}

#[test]
fn ecn_marks_at_the_router_instead_of_drops() {
    let sets = [
        "links.down.queue=fq_codel,ecn=1",
        "hosts.a.sysctls.net.ipv4.tcp_ecn=1",
        "hosts.b.sysctls.net.ipv4.tcp_ecn=1",
    ];
    let r = run(&through_router(""), &sets);
    let q = router_egress(&r);
    assert!(q.ce_marks > 0, "{q:?}");
    assert_eq!(r.flows[0].retrans, 0, "marks, no losses");
}

#[test]
fn fixed_size_transfers_both_ways_end_the_run() {
    let back = "[flows.g]\nfrom = \"b\"\nto = \"a\"\nbytes = 300000";
    let text = format!("{}\n{back}", through_router(""));
    let r = run(&text, &["flows.f.bytes=500000", "run.duration=60s"]);
    assert_eq!((r.flows[0].bytes, r.flows[1].bytes), (500_000, 300_000));
    assert!(r.duration_s < 5.0, "ended at {} s", r.duration_s);
}

#[test]
fn a_stopped_bulk_flow_closes_and_verifies() {
    let r = run(&through_router(""), &["flows.f.stop=1s"]);
    let f = &r.flows[0];
    assert!(f.bytes > 1_000_000, "{f:?}");
    assert!(f.goodput_mbps > 30.0 && f.goodput_mbps < 50.0, "{f:?}");
}

/// A tbf on a router's egress shapes a fast link to its rate: one bulk flow gets
/// the token rate, and the queue in front of it is tbf's.
#[test]
fn tbf_shapes_a_router_egress_to_its_rate() {
    let text = r#"
        [run]
        duration = "5s"
        [hosts.a]
        [hosts.b]
        [routers.r]
        [links.up]
        between = ["a", "r"]
        [links.down]
        between = ["r", "b"]
        rate = "100mbit"
        delay = "10ms"
        forward = { queue = "tbf,rate=10mbit,burst=20kb,latency=50ms" }
        [flows.f]
        from = "a"
        to = "b"
    "#;
    let r = lowtide_sim::network::run_text(text, false, &[]).unwrap();
    assert!(r.bytes_verified, "{:?}", r.failure);
    let g = r.flows[0].goodput_mbps;
    assert!((8.5..10.0).contains(&g), "{g}");
    let q = router_egress(&r);
    assert_eq!(q.qdisc, "tbf");
    // The queue is tbf's child bfifo: at most its limit (10 Mbit/s x 50 ms + 20 KB
    // = 82,980 bytes), so its delay stays near 50 ms or below.
    assert!(q.sojourn_max_ms < 80.0, "{q:?}");
    assert!(q.drops > 0 && q.utilization < 0.15, "{q:?}");
}

/// htb on a router's egress (issue 22): two senders through a 100 Mbit/s link
/// shaped to a root of 20 Mbit/s, `a`'s packets steered to class 1:10 (rate 15,
/// ceil 20 Mbit/s) by a `src` filter, `c`'s to the default 1:20 (rate 5, ceil 20).
/// Both busy, each gets its rate (they sum to the root's); alone, a class borrows
/// up to its ceil; with its ceil at its rate, it does not.
#[test]
fn htb_gives_each_class_its_rate_and_lends_the_rest() {
    let text = r#"
        [run]
        duration = "4s"
        [hosts.a]
        [hosts.b]
        [hosts.c]
        [routers.r]
        [links.la]
        between = ["a", "r"]
        [links.lc]
        between = ["c", "r"]
        [links.down]
        between = ["r", "b"]
        rate = "100mbit"
        delay = "5ms"
        forward = { queue = "htb,rate=20mbit,default=20,class=10:rate=15mbit:ceil=20mbit:src=a,class=20:rate=5mbit:ceil=20mbit" }
        [flows.fa]
        from = "a"
        to = "b"
        [flows.fc]
        from = "c"
        to = "b"
    "#;
    let goodput = |text: &str, sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let r = run_text(text, false, &sets).unwrap();
        assert!(r.bytes_verified, "{:?}", r.failure);
        let q = r.queues.iter().find(|q| q.name == "r->b").unwrap();
        assert_eq!(q.qdisc, "htb");
        let g: Vec<f64> = r.flows.iter().map(|f| f.goodput_mbps).collect();
        g
    };
    let g = goodput(text, &[]);
    assert!((13.5..15.2).contains(&g[0]), "{g:?}");
    assert!((4.2..5.2).contains(&g[1]), "{g:?}");
    // a alone: it borrows up to its ceil; with its ceil at its rate, it does not.
    let alone = &text[..text.find("[flows.fc]").unwrap()];
    let g = goodput(alone, &[]);
    assert!((17.5..20.2).contains(&g[0]), "{g:?}");
    let capped = "links.down.forward.queue=htb,rate=20mbit,default=20,class=10:rate=15mbit:src=a,class=20:rate=5mbit";
    let g = goodput(alone, &[capped]);
    assert!((13.0..15.2).contains(&g[0]), "{g:?}");
}

/// CUBIC with ECN through RED marking at a step (`min = max`, `ecn`): RED marks
/// the ECT data CE instead of dropping it, each ECE starts one CWR reduction
/// (PRR, counting the new data sent), and the queue stays near the step, far from
/// its hard limit: no drop, no retransmission. When CWR counted no new data in
/// `prr_out`, cwnd grew during each reduction, the queue reached RED's 1 MB limit,
/// and the not-ECT retransmissions that followed were dropped at the hard mark
/// again and again (215,219 retransmissions in 3 s).
#[test]
fn cubic_with_ecn_through_a_red_step_marks_and_never_drops() {
    let sets = [
        "links.down.rate=1gbit",
        "links.down.delay=400us",
        "links.down.queue=red,limit=1000000,min=30000,max=30000,avpkt=1500,burst=20,probability=1,ecn=1",
        "links.up.rate=10gbit",
        "hosts.a.sysctls.net.ipv4.tcp_ecn=1",
        "flows.f.count=2",
        "run.duration=1s",
    ];
    let r = run(&through_router(""), &sets);
    let q = router_egress(&r);
    assert!(q.ce_marks > 100, "{q:?}");
    assert_eq!(q.drops, 0, "{q:?}");
    assert!(q.backlog_max_packets < 100, "{q:?}");
    assert!(r.flows.iter().all(|f| f.retrans == 0), "{:?}", r.flows);
}

/// `sim run --timeseries`: one DCTCP flow through a RED step at K = 20 packets
/// behind a 10:1 step down; every grid point has the flow's row with DCTCP's
/// alpha, and most marks were made with the queue past K (RED marks on its
/// average, Wlog 1, which follows the queue within a packet or two but decays
/// over idle time only, so a packet into an emptied queue may be marked too).
#[test]
fn the_time_series_has_every_flow_row_and_each_mark_past_k() {
    let sets = [
        "links.down.rate=1gbit",
        "links.down.delay=400us",
        "links.down.queue=red,limit=1000000,min=30000,max=30000,avpkt=1500,burst=20,probability=1,ecn=1",
        "links.up.rate=10gbit",
        "hosts.a.cc=dctcp",
        "hosts.b.cc=dctcp",
        "run.duration=200ms",
    ];
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let file =
        lowtide_sim::network::ScenarioFile::parse(&through_router(""), false, &sets).expect("file");
    let t = lowtide_sim::network::Topology::new(&file).expect("topology");
    let (r, ts) = lowtide_sim::network::run_with_timeseries(&t, 1_000_000).expect("run");
    assert_eq!(ts.flow_names, ["f"]);
    // Connected at 0: a row per millisecond from the first after it.
    assert!((198..=200).contains(&ts.flows.len()), "{}", ts.flows.len());
    assert!(ts
        .flows
        .windows(2)
        .all(|w| w[1].time_us == w[0].time_us + 1000));
    assert!(ts
        .flows
        .iter()
        .all(|f| f.dctcp_alpha.is_some_and(|a| a <= 1024)));
    let q = router_egress(&r);
    assert_eq!(ts.marks.len() as u64, q.ce_marks, "{q:?}");
    assert!(ts.marks.iter().all(|m| m.queue == "r->b"));
    let past_k = ts.marks.iter().filter(|m| m.backlog_packets >= 20).count();
    assert!(
        past_k * 2 > ts.marks.len(),
        "{past_k} of {}",
        ts.marks.len()
    );
    let csv = ts.flows_csv();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .ends_with(",rcv_wnd,dctcp_alpha"));
    assert_eq!(ts.marks_csv().lines().count(), ts.marks.len() + 1);
    // Each mark names its packet's flow (the one flow's data) and that flow's own
    // share of the backlog, all of it here.
    assert!(ts.marks.iter().all(|m| m.flow == Some(0)));
    assert!(ts
        .marks
        .iter()
        .all(|m| m.flow_backlog_bytes == m.backlog_bytes));
    assert!(ts.marks_csv().lines().nth(1).unwrap().contains(",r->b,"));
}
