//! `lowtide sim soak` and the stream flags it reproduces runs with
//! (`--loss-burst`, `--time-limit`).

use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

#[test]
fn soak_is_deterministic_and_its_exit_code_follows_the_failures() {
    let args = [
        "sim", "soak", "--runs", "6", "--seed", "5", "--jobs", "2", "--json",
    ];
    let (a, b) = (lowtide(&args), lowtide(&args));
    let (mut ja, mut jb) = (json(&a), json(&b));
    for k in [
        "runs",
        "passed",
        "failed",
        "flows",
        "bytes_verified",
        "failures",
    ] {
        assert!(ja.get(k).is_some(), "missing {k}");
    }
    assert_eq!(ja["runs"], 6);
    let failed = ja["failed"].as_u64().unwrap();
    assert_eq!(a.status.code(), Some(if failed == 0 { 0 } else { 1 }));
    assert!(a.stderr.is_empty(), "no progress with --json");
    ja["wall_s"] = 0.into();
    jb["wall_s"] = 0.into();
    assert_eq!(ja, jb, "same seed, same soak");
}

#[test]
fn bad_soak_arguments_exit_with_2() {
    for args in [&["--runs", "0"][..], &["--jobs", "0"], &["--seed", "x"]] {
        let mut full = vec!["sim", "soak"];
        full.extend_from_slice(args);
        let out = lowtide(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn time_limit_fails_a_transfer_that_cannot_finish_and_loss_burst_is_checked() {
    let out = lowtide(&[
        "sim",
        "stream",
        "--bytes",
        "2MB",
        "--rate",
        "1mbit",
        "--rtt",
        "2ms",
        "--time-limit",
        "1s",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let failure = json(&out)["failure"].as_str().unwrap_or("").to_string();
    assert!(failure.contains("time limit"), "{failure}");
    for bad in [&["--loss-burst", "0.5"][..], &["--time-limit", "1s"]] {
        let mut full = vec!["sim", "stream"];
        full.extend_from_slice(bad);
        assert_eq!(lowtide(&full).status.code(), Some(2), "{bad:?}");
    }
}
