//! The scenario engine's request/response (netperf TCP_RR) and on/off flows
//! (issue 22 item 1): transactions one at a time, their rate and latency
//! percentiles from the path's figures; on/off writing only while on; every byte
//! of both directions verified.

use lowtide_sim::network::{run_text, FlowReport, NetResults};

/// A client and a server through one router, 10 ms of round trip; `flows` are
/// the `[flows.*]` tables.
fn net(flows: &str, sets: &[&str]) -> NetResults {
    let text = format!(
        r#"
        [run]
        duration = "4s"
        [hosts.a]
        [hosts.b]
        [routers.r]
        [links.up]
        between = ["a", "r"]
        [links.down]
        between = ["r", "b"]
        rate = "20mbit"
        delay = "5ms"
        {flows}
        "#
    );
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let r = run_text(&text, false, &sets).unwrap();
    assert!(r.bytes_verified, "{:?}", r.failure);
    r
}

fn flow<'a>(r: &'a NetResults, name: &str) -> &'a FlowReport {
    r.flows.iter().find(|f| f.name == name).unwrap()
}

#[test]
fn request_response_on_an_idle_path_takes_one_round_trip_each() {
    let r = net(
        r#"
        [flows.rr]
        from = "a"
        to = "b"
        rr = { request = 1, response = 1, think = "40ms" }
        "#,
        &[],
    );
    let f = flow(&r, "rr");
    // 10 ms of propagation and a few µs of serialization; the first one also
    // waits for the handshake.
    let p50 = f.latency_p50_ms.unwrap();
    assert!((10.0..10.5).contains(&p50), "{p50}");
    assert!(f.latency_max_ms.unwrap() > 20.0);
    // One transaction every 50 ms or so.
    let (n, tps) = (f.transactions.unwrap(), f.tps.unwrap());
    assert!(
        (75..=80).contains(&n) && (tps - n as f64 / 4.0).abs() < 1e-9,
        "{n} {tps}"
    );
    // Requests verified at the server: one byte each, the last maybe pending.
    assert!(f.bytes == n || f.bytes == n + 1, "{} {n}", f.bytes);
    assert!(f.delay_ms.is_none());
}

#[test]
fn large_responses_take_their_serialization_and_queue_behind_bulk() {
    let alone = net(
        r#"
        [flows.web]
        from = "b"
        to = "a"
        rr = { request = 200, response = 50000 }
        "#,
        &[],
    );
    let web = flow(&alone, "web");
    // 50 KB at 20 Mbit/s is 20 ms on the wire, plus the round trip.
    let p50 = web.latency_p50_ms.unwrap();
    assert!((30.0..40.0).contains(&p50), "{p50}");
    // The server is `a`: its responses go a->r->b, at 20 Mbit/s from r. Behind a
    // bulk flow into b they wait in its queue.
    let loaded = net(
        r#"
        [flows.web]
        from = "b"
        to = "a"
        rr = { request = 200, response = 50000 }
        [flows.bulk]
        from = "a"
        to = "b"
        "#,
        &[],
    );
    let w = flow(&loaded, "web");
    assert!(w.latency_p50_ms.unwrap() > 2.0 * p50, "{w:?}");
    assert!(w.tps.unwrap() < web.tps.unwrap() / 2.0);
    // A queue counts the flows whose requests (the client's data) cross it.
    let q = loaded.queues.iter().find(|q| q.name == "r->b").unwrap();
    assert_eq!((q.flows, q.jain), (1, None));
}

#[test]
fn on_off_writes_only_while_on() {
    let r = net(
        r#"
        [flows.onoff]
        from = "a"
        to = "b"
        on = "500ms"
        off = "500ms"
        notsent_lowat = 16384
        [flows.bulk]
        from = "a"
        to = "b"
        start = "0s"
        "#,
        &["links.down.reverse.rate=1gbit"],
    );
    let (on, bulk) = (flow(&r, "onoff"), flow(&r, "bulk"));
    // While it is off the bulk flow has the link to itself: it gets more.
    assert!(on.goodput_mbps < 0.8 * bulk.goodput_mbps, "{on:?} {bulk:?}");
    assert!(on.goodput_mbps > 2.0, "{on:?}");
    // Alone, with a short send buffer beyond the window, it fills about half of
    // the time.
    let alone = net(
        r#"
        [flows.onoff]
        from = "a"
        to = "b"
        on = "500ms"
        off = "500ms"
        notsent_lowat = 16384
        "#,
        &[],
    );
    let g = flow(&alone, "onoff").goodput_mbps;
    assert!((7.0..13.0).contains(&g), "{g}");
}

#[test]
fn flow_kinds_exclude_each_other_and_need_their_parts() {
    let bad = |flows: &str| {
        let text = format!(
            "[run]\nduration = \"1s\"\n[hosts.a]\n[hosts.b]\n[links.l]\nbetween = [\"a\", \"b\"]\n{flows}"
        );
        run_text(&text, false, &[]).unwrap_err()
    };
    let f = "[flows.f]\nfrom = \"a\"\nto = \"b\"\n";
    assert!(bad(&format!("{f}on = \"1s\"")).contains("on and off go together"));
    assert!(bad(&format!("{f}on = \"1s\"\noff = \"0s\"")).contains("positive"));
    assert!(bad(&format!("{f}rr = {{ request = 0, response = 1 }}")).contains("positive"));
    assert!(bad(&format!(
        "{f}bytes = 10\nrr = {{ request = 1, response = 1 }}"
    ))
    .contains("one of"));
    assert!(bad(&format!("{f}rr = {{ request = 1 }}")).contains("response"));
}
