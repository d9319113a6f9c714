//! `lowtide sim run` (issue 22): the canonical scenarios of scenarios/ at their
//! `--quick` scale, each passing its own checks; a failed check exits 1 with its
//! values, a bad file exits 2 naming the problem.

use std::path::PathBuf;
use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

fn scenario(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "..", "scenarios", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

/// `sim run FILE --quick --json ARGS`: its exit code and results.
fn run_json(file: &str, args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let path = scenario(file);
    let mut full = vec!["sim", "run", &path, "--quick", "--json"];
    full.extend_from_slice(args);
    let out = lowtide(&full);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.code(), v, stderr)
}

fn flow<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    let flows = v["flows"].as_array().expect("flows");
    flows.iter().find(|f| f["name"] == name).expect("flow")
}

#[test]
fn bufferbloat_probe_delay_falls_to_near_codel_target() {
    let (code, v, err) = run_json("bufferbloat.toml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["bytes_verified"], true);
    let delay = |f: &str| flow(&v, f)["delay_ms"].as_f64().unwrap();
    let (fifo, codel) = (delay("probe_fifo"), delay("probe_codel"));
    assert!(
        fifo > 100.0 && codel < 20.0,
        "fifo {fifo} ms, fq_codel {codel} ms"
    );
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 7);
    assert!(checks.iter().all(|c| c["pass"] == true));
}

#[test]
fn rtt_unfairness_short_flow_takes_more() {
    let (code, v, err) = run_json("rtt-unfairness.toml", &[]);
    assert_eq!(code, Some(0), "{err}");
    let g = |f: &str| flow(&v, f)["goodput_mbps"].as_f64().unwrap();
    assert!(
        g("short") > 1.5 * g("long"),
        "{} vs {}",
        g("short"),
        g("long")
    );
    let q = (v["queues"].as_array().unwrap().iter())
        .find(|q| q["name"] == "r1->sink")
        .unwrap();
    assert_eq!(q["flows"], 2);
    assert!(q["jain"].as_f64().unwrap() < 0.95);
}

#[test]
fn bbr_parking_lot_and_nic_vs_router_pass_their_checks() {
    for file in [
        "bbr-vs-cubic.toml",
        "parking-lot.toml",
        "nic-vs-router.toml",
    ] {
        let (code, v, err) = run_json(file, &[]);
        assert_eq!(code, Some(0), "{file}: {err}");
        let checks = v["checks"].as_array().unwrap();
        assert!(checks.len() >= 4, "{file}");
        assert!(checks.iter().all(|c| c["pass"] == true), "{file}");
    }
}

#[test]
fn dctcp_holds_the_queue_near_the_marking_threshold_and_cubic_cannot() {
    let (code, v, err) = run_json("dctcp.toml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(flow(&v, "dctcp#0")["cc"], "dctcp");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 7);
    assert!(checks.iter().all(|c| c["pass"] == true));
    // The same network with CUBIC (no ECN asked: tcp_ecn 2) at both ends: RED drops
    // what it would mark, and the checks of a loss-free queue near K fail.
    let cubic = [
        "--set",
        "hosts.src_dctcp.cc=cubic",
        "--set",
        "hosts.dst_dctcp.cc=cubic",
    ];
    let (code, v, err) = run_json("dctcp.toml", &cubic);
    assert_eq!(code, Some(1), "{err}");
    let failed = |name: &str| {
        let c = checks_named(&v, name);
        c["pass"] == false
    };
    assert!(failed("queue.r_dctcp->dst_dctcp.drops < 1"), "{err}");
    assert!(failed("flow.dctcp.retrans < 1"), "{err}");
}

#[test]
fn rrul_latency_under_load_falls_behind_fq_codel_in_both_directions() {
    let (code, v, err) = run_json("rrul.toml", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["bytes_verified"], true);
    let f = |name: &str, fig: &str| flow(&v, name)[fig].as_f64().unwrap();
    let (fifo, codel) = (
        f("rr_fifo", "latency_p50_ms"),
        f("rr_codel", "latency_p50_ms"),
    );
    // Through fq_codel a transaction takes about the base RTT (20 ms); through
    // the pfifos it waits behind both directions' standing queues.
    assert!(
        codel < 25.0 && fifo > 4.0 * codel,
        "p50 {codel} vs {fifo} ms"
    );
    assert!(f("probe_codel", "delay_ms") < 20.0);
    // The bulk flows fill the bottleneck both ways, behind either queue.
    for dir in ["up", "down"] {
        for q in ["fifo", "codel"] {
            let g: f64 = (0..4)
                .map(|i| f(&format!("{dir}_{q}#{i}"), "goodput_mbps"))
                .sum();
            assert!(g > 16.0, "{dir}_{q}: {g} Mbit/s");
        }
    }
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 11);
    assert!(checks.iter().all(|c| c["pass"] == true), "{checks:?}");
}

fn checks_named<'a>(v: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    (v["checks"].as_array().expect("checks").iter())
        .find(|c| c["check"] == check)
        .unwrap_or_else(|| panic!("no check {check} in {v}"))
}

#[test]
fn queue_time_series_show_the_standing_queue_and_codel_holding_it() {
    let (code, v, err) = run_json("bufferbloat.toml", &[]);
    assert_eq!(code, Some(0), "{err}");
    let series = v["series"].as_array().unwrap();
    let q = |name: &str| series.iter().find(|s| s["name"] == name).unwrap();
    let u64s = |s: &serde_json::Value, k: &str| -> Vec<u64> {
        (s[k].as_array().unwrap().iter())
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let (fifo, codel) = (q("r_fifo->server_fifo"), q("r_codel->server_codel"));
    // --quick runs 6 s, sampled every 100 ms.
    let t = fifo["t_s"].as_array().unwrap();
    assert_eq!(t.len(), 60);
    assert_eq!(t[0].as_f64(), Some(0.1));
    // The pfifo fills up (1,000 packets) and stays near full; fq_codel's stays
    // a small fraction of it.
    let fb = u64s(fifo, "backlog_bytes");
    let cb = u64s(codel, "backlog_bytes");
    let late = |b: &[u64]| b[30..].iter().sum::<u64>() / 30;
    assert!(late(&fb) > 500_000, "pfifo {}", late(&fb));
    assert!(late(&cb) * 10 < late(&fb), "fq_codel {}", late(&cb));
    for s in [fifo, codel] {
        let d = u64s(s, "drops");
        assert!(d.windows(2).all(|w| w[0] <= w[1]), "drops only add up");
        assert_eq!(u64s(s, "backlog_packets").len(), 60);
    }
    let sojourn: Vec<f64> = (codel["sojourn_ms"].as_array().unwrap()[30..].iter())
        .filter_map(|x| x.as_f64())
        .collect();
    let mean = sojourn.iter().sum::<f64>() / sojourn.len() as f64;
    assert!(mean < 15.0, "fq_codel sojourn {mean} ms");
    // A queue that carries no flow's data has no series.
    assert!(series.iter().all(|s| s["name"] != "server_fifo->r_fifo"));
}

#[test]
fn a_failed_check_exits_1_with_its_values() {
    let set = "checks=[\"flow.short.goodput_mbps > 1000\"]";
    let (code, v, err) = run_json(
        "rtt-unfairness.toml",
        &["--set", set, "--set", "run.duration=2s"],
    );
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(v["checks"][0]["pass"], false);
    assert!(
        err.contains("check failed: flow.short.goodput_mbps > 1000 (left "),
        "{err}"
    );
}

#[test]
fn text_report_has_flows_queues_and_checks() {
    let path = scenario("rtt-unfairness.toml");
    let args = [
        "sim",
        "run",
        &path,
        "--set",
        "run.duration=2s",
        "--set",
        "checks=[]",
    ];
    let out = lowtide(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text
        .lines()
        .any(|l| l.starts_with("short ") && l.contains("cubic")));
    assert!(text
        .lines()
        .any(|l| l.starts_with("r1->sink ") && l.contains("pfifo")));
    assert!(text.contains("every byte of 2 flows verified"), "{text}");
}

#[test]
fn bad_files_exit_2_saying_what_and_why() {
    let path = scenario("rtt-unfairness.toml");
    let cases: [(&[&str], &str); 5] = [
        (&["--set", "links.bottleneck.queue=sfq"], "sfq: not a qdisc"),
        (
            &["--set", "flows.short.to=moon"],
            "flows.short: moon: no such host",
        ),
        (
            &["--set", "links.far.rate=fast"],
            "links.far: forward: rate",
        ),
        (
            &["--set", "checks=[\"flow.nobody.bytes > 1\"]"],
            "nobody: no such flow",
        ),
        (&["--set", "colour=red"], "colour"),
    ];
    for (args, want) in cases {
        let mut full = vec!["sim", "run", &path];
        full.extend_from_slice(args);
        let out = lowtide(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("lowtide: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
    let out = lowtide(&["sim", "run", "/nonexistent.toml"]);
    assert_eq!(out.status.code(), Some(2));
}
