//! `lowtide transfer --timeseries`: the simulator's time-series columns from a real
//! run (lowtide on TUN to a kernel receiver through a 100 Mbit/s, 10 ms path). Needs
//! root: skipped with a message otherwise, a failure under
//! LOWTIDE_REQUIRE_PRIVILEGED_TESTS (set by CI).

mod common;

use common::*;
use lowtide_tun::netns::privileged;
use std::time::Duration;

#[test]
fn transfer_writes_a_time_series() {
    if !privileged("transfer_writes_a_time_series") {
        return;
    }
    let env = Env::new("lts");
    let server = kernel_server(&env, 6100);
    let dir = std::env::temp_dir().join(format!("lowtide-ts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("run.csv");
    let out = env
        .lowtide(&[
            "transfer",
            "--connect",
            "10.7.0.1:6100",
            "--send",
            "3000000",
            "--tun",
            "lt0",
            "--tun-addr",
            "10.7.0.1/24",
            "--rate",
            "100mbit",
            "--rtt",
            "10ms",
            "--json",
            "--timeseries",
            csv.to_str().unwrap(),
            "--timeseries-interval",
            "20ms",
        ])
        .wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (n, _) = server.join().expect("kernel server");
    assert_eq!(n, 3_000_000);
    let flows = std::fs::read_to_string(&csv).expect("flow rows");
    let mut lines = flows.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("time_s,flow,cwnd,ssthresh,rtt_us,pacing_rate_bps"),
        "{header}"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // 3 MB at 100 Mbit/s take at least 240 ms: a dozen points of 20 ms or more.
    assert!(rows.len() >= 12, "{} rows", rows.len());
    let col = |name: &str| header.split(',').position(|c| c == name).unwrap();
    let acked: Vec<u64> = rows
        .iter()
        .map(|r| r[col("bytes_acked")].parse().unwrap())
        .collect();
    assert!(
        acked.windows(2).all(|w| w[0] <= w[1]),
        "bytes_acked never falls"
    );
    assert!(*acked.last().unwrap() > 1_000_000, "{acked:?}");
    assert!(rows
        .iter()
        .any(|r| r[col("cwnd")].parse::<u32>().unwrap() > 10));
    let host = std::fs::read_to_string(dir.join("run-host.csv")).expect("host rows");
    assert!(host.starts_with("time_s,tcp_mem_pages,wmem_queued,dev_queue_bytes"));
    // One host row per grid point; a point after the flow closed has no flow row.
    let host_rows = host.lines().count() - 1;
    assert!(
        host_rows >= rows.len() && host_rows <= rows.len() + 2,
        "{host_rows} host rows, {} flow rows",
        rows.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lowtide iperf3 -c ... -P 2 --timeseries`: one row per data stream and point (the
/// control connection left out), JSON lines for a .jsonl name.
#[test]
fn iperf3_client_writes_a_time_series_of_its_streams() {
    if !privileged("iperf3_client_writes_a_time_series_of_its_streams") {
        return;
    }
    let env = Env::new("ltsi");
    let server = env.spawn("iperf3", &["-s", "-1", "-p", "5201"]);
    std::thread::sleep(Duration::from_millis(300));
    let dir = std::env::temp_dir().join(format!("lowtide-tsi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.jsonl");
    let out = env
        .lowtide(&[
            "iperf3",
            "-c",
            "10.7.0.1",
            "-t",
            "1",
            "-P",
            "2",
            "--tun",
            "lt0",
            "--tun-addr",
            "10.7.0.1/24",
            "--rate",
            "100mbit",
            "--rtt",
            "10ms",
            "--timeseries",
            path.to_str().unwrap(),
            "--timeseries-interval",
            "50ms",
        ])
        .wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = server.wait(Duration::from_secs(20));
    let text = std::fs::read_to_string(&path).expect("flow rows");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let flows: std::collections::BTreeSet<u64> =
        rows.iter().map(|r| r["flow"].as_u64().unwrap()).collect();
    assert_eq!(
        flows.into_iter().collect::<Vec<_>>(),
        vec![0, 1],
        "two data streams"
    );
    // Each stream sent at least 1 MB (100 Mbit/s for 1 s shared by two).
    for f in [0, 1] {
        let acked = (rows.iter())
            .filter(|r| r["flow"] == f)
            .map(|r| r["bytes_acked"].as_u64().unwrap())
            .max()
            .unwrap();
        assert!(acked > 1_000_000, "stream {f}: {acked}");
    }
    assert!(dir.join("run-host.jsonl").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
