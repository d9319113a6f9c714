//! `lowtide experiment --real`: the real-path runs (root: namespaces, TUN, tc), their
//! place in results.json and report.md, and the refusal without root (exit 2).
//! Privileged tests skip with a message for other users and fail under
//! LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

use lowtide_tun::netns::privileged;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lowtide-real-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("results.json parses")
}

fn runs<'a>(v: &'a serde_json::Value, side: &str, variant: &str) -> Vec<&'a serde_json::Value> {
    (v["real"]["runs"].as_array().expect("real runs").iter())
        .filter(|r| r["side"] == side && r["variant"].as_str().unwrap_or("").starts_with(variant))
        .collect()
}

/// E5 on the real path at quick scale: lowtide sized at transmit time sends fewer IP
/// packets than sized at write time for the same segments; the kernel's counters come
/// from its namespace; the report's real and kernel cells are filled; a simulator run
/// into the same directory keeps the real section.
#[test]
fn real_e5_counts_packets_both_ways_and_survives_a_sim_run() {
    if !privileged("real_e5_counts_packets_both_ways_and_survives_a_sim_run") {
        return;
    }
    let dir = tmp("e5");
    let d = dir.to_str().unwrap();
    let out = lowtide(&[
        "experiment",
        "e5",
        "--real",
        "--quick",
        "--out",
        d,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&dir);
    let (a, b) = (runs(&v, "lowtide", "A"), runs(&v, "lowtide", "B"));
    let k = runs(&v, "kernel", "B");
    // --real runs its whole plan 3 times, interleaved (issue 23: repetitions).
    assert_eq!((a.len(), b.len(), k.len()), (3, 3, 3), "{}", v["real"]);
    for r in a.iter().chain(&b).chain(&k) {
        assert!(r["error"].is_null(), "{r}");
        // 2,000,000 bytes in 1448-byte segments, SYN, FIN and the final ACK: 1385;
        // a send the receive window ends goes to the window's edge, a partial segment
        // included (tcp_mss_split_point), which adds one each time the window ends a
        // send: how often depends on when the kernel receiver's window updates come,
        // which varies run to run (1386-1388 seen, 1388 once in a rwnd-limited
        // repetition on a loaded machine); the kernel may count a few pure ACKs more
        // in its window (window updates, the ACK of the receiver's FIN): 1387 seen.
        let segs = r["tcp_out_segs"].as_u64().unwrap_or(0);
        let most = 1390;
        assert!((1385..=most).contains(&segs), "TcpOutSegs: {r}");
    }
    let out_req = |r: &serde_json::Value| r["ip_out_requests"].as_u64().unwrap();
    // The seed's direction over the three repetitions, as the report's check reads
    // it: one wall-clock repetition on a loaded machine can go the other way (a
    // starved real-time loop sends smaller packets), their sum does not.
    let sum = |rs: &[&serde_json::Value]| rs.iter().map(|r| out_req(r)).sum::<u64>();
    assert!(
        sum(&b) < sum(&a),
        "IpOutRequests A {} B {}",
        sum(&a),
        sum(&b)
    );
    for k in &k {
        assert!(out_req(k) > 0 && out_req(k) <= 1385, "{k}");
    }
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let row = (report.lines())
        .find(|l| l.starts_with("| IpOutRequests |"))
        .expect("IpOutRequests row");
    assert!(!row.contains("not measured"), "{row}");
    assert!(row.contains("(sized at transmit time)"), "{row}");
    // The simulator's run keeps what --real measured.
    let out = lowtide(&["experiment", "e5", "--quick", "--out", d, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = json(&dir);
    assert_eq!(after["real"], v["real"]);
    assert!(!after["runs"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Without root, --real is refused with a reason and exit 2, before anything runs;
/// --real does not combine with --shard or merge.
#[test]
fn real_without_root_or_with_shards_exits_with_2() {
    let out = lowtide(&["experiment", "e3", "--real", "--shard", "1/2"]);
    assert_eq!(out.status.code(), Some(2));
    let out = lowtide(&["experiment", "merge", "--real", "somedir"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("lowtide: "));
    // As root, the same command as user nobody (setpriv, util-linux).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let out = lowtide(&[
            "experiment",
            "e3",
            "--real",
            "--quick",
            "--out",
            "/nonexistent",
        ]);
        assert_eq!(out.status.code(), Some(2));
        return;
    }
    // A copy nobody can execute (the build directory may sit under a private home).
    let dir = tmp("nobody");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("lowtide");
    std::fs::copy(env!("CARGO_BIN_EXE_lowtide"), &bin).expect("copy the binary");
    use std::os::unix::fs::PermissionsExt;
    for (p, mode) in [(&dir, 0o755), (&bin, 0o755)] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&bin)
        .args([
            "experiment",
            "e3",
            "--real",
            "--quick",
            "--out",
            "/nonexistent",
        ])
        .output()
        .expect("setpriv (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("experiment --real: needs root"), "{err}");
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
