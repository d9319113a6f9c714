//! `lowtide experiment`: determinism, shards and their merge, bad arguments.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lowtide-exp-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// DIR/results.json without its provenance (machine, load and commit: not a
/// function of the plan), after checking that the provenance is there.
fn results(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("results.json parses");
    let obj = v.as_object_mut().expect("an object");
    let prov = obj
        .remove("provenance")
        .expect("results.json has a provenance");
    for k in lowtide_lab::provenance::KEYS {
        assert!(prov.get(k).is_some(), "provenance.{k} missing: {prov}");
    }
    assert_eq!(
        prov["seeds"].as_array().map(Vec::len),
        Some(lowtide_lab::provenance::SEEDS.len()),
        "{prov}"
    );
    serde_json::to_string_pretty(&v).expect("serializes")
}

fn run_ok(args: &[&str]) {
    let out = lowtide(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// E5 at quick scale (three seeds per variant), whole and as three shards (the plan has
/// twelve runs) merged: the same results.json, byte for byte; and a second whole run
/// gives the same bytes again.
#[test]
fn merged_shards_equal_one_run_byte_for_byte() {
    let whole = tmp("whole");
    let again = tmp("again");
    run_ok(&[
        "experiment",
        "e5",
        "--quick",
        "--out",
        whole.to_str().unwrap(),
    ]);
    run_ok(&[
        "experiment",
        "e5",
        "--quick",
        "--jobs",
        "2",
        "--out",
        again.to_str().unwrap(),
    ]);
    assert_eq!(results(&whole), results(&again), "same seed, same bytes");
    let mut shard_dirs = Vec::new();
    for i in 1..=3 {
        let d = tmp(&format!("shard{i}"));
        let shard = format!("{i}/3");
        run_ok(&[
            "experiment",
            "e5",
            "--quick",
            "--shard",
            &shard,
            "--out",
            d.to_str().unwrap(),
        ]);
        shard_dirs.push(d);
    }
    assert_ne!(
        results(&shard_dirs[0]),
        results(&whole),
        "a shard is not the whole"
    );
    let merged = tmp("merged");
    let mut args = vec!["experiment", "merge"];
    args.extend(shard_dirs.iter().map(|d| d.to_str().unwrap()));
    args.extend(["--out", merged.to_str().unwrap()]);
    run_ok(&args);
    assert_eq!(results(&merged), results(&whole));
    let report = std::fs::read_to_string(merged.join("report.md")).expect("report");
    assert!(report.contains("IpOutRequests"), "{report}");
    assert!(report.contains("## Provenance"), "{report}");
    let text = std::fs::read_to_string(merged.join("results.json")).expect("merged");
    let v: serde_json::Value = serde_json::from_str(&text).expect("parses");
    let shards = v["provenance"]["shards"].as_array().map(Vec::len);
    assert_eq!(
        shards,
        Some(3),
        "the shards' provenance is kept in the merge"
    );
    assert!(
        report.contains("605ad7f184b6"),
        "seed 004 by its Linux commit: {report}"
    );
    // Two shards of the same slice do not merge.
    let dup = tmp("dup");
    let d0 = shard_dirs[0].to_str().unwrap();
    let out = lowtide(&[
        "experiment",
        "merge",
        d0,
        d0,
        "--out",
        dup.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A plan cut short merges only with --partial, and its checks then fail (exit 1).
    let part = tmp("part");
    let p = part.to_str().unwrap();
    let out = lowtide(&["experiment", "merge", d0, "--out", p]);
    assert_eq!(out.status.code(), Some(2), "missing runs need --partial");
    let out = lowtide(&["experiment", "merge", d0, "--partial", "--out", p]);
    assert_eq!(out.status.code(), Some(1));
    let report = std::fs::read_to_string(part.join("report.md")).expect("report");
    assert!(report.contains("4 runs (of 12 in the plan"), "{report}");
    for d in shard_dirs
        .iter()
        .chain([&whole, &again, &merged, &dup, &part])
    {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn bad_experiment_arguments_exit_with_2() {
    let cases: &[&[&str]] = &[
        &["e9"],
        &["e1", "--shard", "0/3"],
        &["e1", "--shard", "4/3"],
        &["e1", "--shard", "x"],
        &["e1", "--jobs", "0"],
        &["e1", "somedir"],
        &["merge"],
    ];
    for args in cases {
        let mut full = vec!["experiment"];
        full.extend_from_slice(args);
        let out = lowtide(&full);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// `experiment --timeseries DIR`: every run writes its host and per-flow CSV (E5, whose
/// plan samples nothing, too), and results.json is the same bytes as without it. A file
/// that cannot be written fails the command.
#[test]
fn experiment_timeseries_writes_every_run_and_changes_no_figure() {
    let plain = tmp("ts-plain");
    let sampled = tmp("ts-sampled");
    let series = tmp("ts-series");
    run_ok(&[
        "experiment",
        "e5",
        "--quick",
        "--out",
        plain.to_str().unwrap(),
    ]);
    let with_series = [
        "experiment",
        "e5",
        "--quick",
        "--out",
        sampled.to_str().unwrap(),
        "--timeseries",
        series.to_str().unwrap(),
    ];
    run_ok(&with_series);
    assert_eq!(results(&plain), results(&sampled), "sampling only reads");
    for i in 1..=12 {
        for kind in ["host", "flows"] {
            let p = series.join(format!("e5-{i}-{kind}.csv"));
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            assert!(text.lines().count() > 2, "{p:?}: {text}");
        }
    }
    // A directory where a CSV file must go: the write fails, the command says so.
    std::fs::remove_file(series.join("e5-1-host.csv")).unwrap();
    std::fs::create_dir(series.join("e5-1-host.csv")).unwrap();
    let out = lowtide(&with_series);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("lowtide: --timeseries: 1 run(s) not written"),
        "{err}"
    );
    for d in [plain, sampled, series] {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// `sim stream --timeseries`: one row per flow and interval with ss -ti's names,
/// host rows beside; JSON lines for a .jsonl name.
#[test]
fn sim_stream_writes_a_time_series() {
    let dir = tmp("ts");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("run.csv");
    let common = [
        "sim",
        "stream",
        "--flows",
        "2",
        "--rate",
        "100mbit",
        "--rtt",
        "10ms",
        "--duration",
        "1s",
        "--timeseries-interval",
        "100ms",
        "--timeseries",
    ];
    let mut args: Vec<&str> = common.to_vec();
    args.push(csv.to_str().unwrap());
    run_ok(&args);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    for col in [
        "cwnd",
        "ssthresh",
        "rtt_us",
        "pacing_rate_bps",
        "notsent",
        "wmem_queued",
        "sndbuf",
    ] {
        assert!(header.split(',').any(|c| c == col), "{header}");
    }
    // 11 grid points (0, 0.1, ..., 1.0 s) for 2 flows, less the ones before connect.
    let rows = lines.count();
    assert!((18..=22).contains(&rows), "{rows} rows");
    let host = std::fs::read_to_string(dir.join("run-host.csv")).unwrap();
    assert!(host.starts_with("time_s,tcp_mem_pages"), "{host}");
    let jsonl = dir.join("run.jsonl");
    let mut args: Vec<&str> = common.to_vec();
    args.push(jsonl.to_str().unwrap());
    run_ok(&args);
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let mut sndbuf = 0;
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).expect("a JSON object per line");
        assert!(v["cwnd"].as_u64().is_some_and(|c| c > 0), "{l}");
        sndbuf = sndbuf.max(v["sndbuf"].as_u64().expect("sk_sndbuf in every row"));
    }
    // tcp_init_buffer_space: at least 2 * TCP_INIT_CWND * per_mss (2304 at MSS 1448).
    assert!(sndbuf >= 46_080, "sndbuf {sndbuf}");
    let _ = std::fs::remove_dir_all(&dir);
}
