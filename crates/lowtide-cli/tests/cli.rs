//! The `lowtide` binary: argument errors exit with 2, `--json` prints the results.

use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

#[test]
fn bad_values_exit_with_2_and_one_clear_line() {
    let cases: &[&[&str]] = &[
        &["--rate", "fast"],
        &["--rtt", "20"],
        &["--loss", "150%"],
        &["--bytes", "2XB"],
        &["--bytes", "1MB", "--duration", "1s"],
        &["--cc", "cubic"],
        &["--gro", "maybe"],
        &["--sysctl", "net.ipv4.tcp_nonsense=1"],
        &["--sysctl", "net.ipv4.tcp_rmem=1 2"],
        &["--flows", "0"],
        &["--no-such-flag"],
    ];
    for args in cases {
        let mut full = vec!["sim", "stream"];
        full.extend_from_slice(args);
        let out = lowtide(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.lines().next().is_some_and(|l| l.starts_with("error: ")),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn json_output_has_the_required_keys() {
    let out = lowtide(&[
        "sim", "stream", "--flows", "2", "--rate", "100mbit", "--rtt", "2ms", "--bytes", "200KB",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("valid JSON");
    for key in [
        "flows",
        "duration_s",
        "goodput_bps",
        "per_flow",
        "bytes_verified",
        "counters",
        "counters_receiver",
        "sim_wall_s",
        "sim_packets",
        "sim_events",
        "drops",
    ] {
        assert!(v.get(key).is_some(), "missing key {key}");
    }
    assert_eq!(v["flows"], 2);
    assert_eq!(v["bytes_verified"], true);
    let flows = v["per_flow"].as_array().expect("per_flow array");
    assert_eq!(flows.len(), 2);
    for f in flows {
        for key in [
            "flow",
            "goodput_bps",
            "bytes_delivered",
            "retrans_segs",
            "rtt_us",
            "wakeups",
        ] {
            assert!(f.get(key).is_some(), "missing per_flow key {key}");
        }
        assert_eq!(f["bytes_delivered"], 200_000);
    }
    assert!(v["counters"]["TcpOutSegs"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn summary_is_readable_and_reports_verification() {
    let out = lowtide(&[
        "sim",
        "stream",
        "--rate",
        "100mbit",
        "--rtt",
        "2ms",
        "--duration",
        "100ms",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[SUM]"), "{text}");
    assert!(text.contains("bytes verified: yes"), "{text}");
}
