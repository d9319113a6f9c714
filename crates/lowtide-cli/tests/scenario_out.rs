//! `lowtide sim run --out DIR` (issue 22): the report, the results with every
//! flow's and queue's time series, and the plots, written into a directory; the
//! series agree with the report's figures (the bytes a flow's goodput series adds
//! up to, the cwnd column as the mean of its cwnd series).

use std::path::{Path, PathBuf};
use std::process::Command;

fn scenario(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "..", "scenarios", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lowtide-out-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The plots are drawn when the font is there (.ci/run installs it).
fn font() -> bool {
    Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists()
}

/// A PNG file's width and height, after checking its signature.
fn png_size(p: &Path) -> (u32, u32) {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{}", p.display());
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn sim_run_out_writes_the_report_the_series_and_the_plots() {
    let dir = out_dir("bufferbloat");
    let d = dir.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args([
            "sim",
            "run",
            &scenario("bufferbloat.toml"),
            "--quick",
            "--out",
            d,
        ])
        .output()
        .expect("run lowtide");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&format!("wrote {d}/")), "{stdout}");
    // The report as printed, with its cwnd column.
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(text.starts_with("flow "), "{text}");
    assert!(text.lines().next().unwrap().contains(" cwnd "), "{text}");
    assert!(stdout.starts_with(&text), "{stdout}");

    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let flows = r["flows"].as_array().unwrap();
    let series = r["flow_series"].as_array().unwrap();
    assert_eq!(series.len(), flows.len());
    for (f, s) in flows.iter().zip(series) {
        let name = f["name"].as_str().unwrap();
        assert_eq!(s["name"], f["name"]);
        // --quick runs 6 s; the series is every 100 ms (run.series_interval).
        let t: Vec<f64> = (s["t_s"].as_array().unwrap().iter())
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(t.len(), 60, "{name}");
        assert!(
            (t[0] - 0.1).abs() < 1e-9 && (t[59] - 6.0).abs() < 1e-9,
            "{name}"
        );
        // The goodput series adds up to the bytes the flow's receiver read: every
        // flow here runs to the end, so exactly the report's bytes.
        let good: f64 = (s["goodput_mbps"].as_array().unwrap().iter())
            .map(|g| g.as_f64().unwrap() * 1e6 * 0.1 / 8.0)
            .sum();
        let bytes = f["bytes"].as_f64().unwrap();
        assert!(bytes > 10_000.0, "{name}: {bytes} bytes");
        assert!((good - bytes).abs() < 1.0, "{name}: {good} against {bytes}");
        assert_eq!(s["bytes"].as_array().unwrap()[59].as_f64(), Some(bytes));
        // cwnd: every point after the connection has one, at least 2 segments
        // and no more than the pfifo's 1,000 packets plus the path's BDP; the
        // report's column is their mean.
        let cwnd: Vec<f64> = (s["cwnd"].as_array().unwrap().iter().skip(2))
            .map(|c| c.as_f64().unwrap_or_else(|| panic!("{name}: {s}")))
            .collect();
        assert!(
            cwnd.iter().all(|&c| (2.0..1_100.0).contains(&c)),
            "{name}: {cwnd:?}"
        );
        let all: Vec<f64> = (s["cwnd"].as_array().unwrap().iter())
            .filter_map(|c| c.as_f64())
            .collect();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        let col = f["cwnd"].as_f64().unwrap();
        assert!((mean - col).abs() < 1e-9, "{name}: {mean} against {col}");
    }
    // The pfifo's standing queue: a bulk flow's window there is many times the one
    // fq_codel leaves it.
    let col = |n: &str| {
        let f = flows.iter().find(|f| f["name"] == n).unwrap();
        f["cwnd"].as_f64().unwrap()
    };
    assert!(col("bulk_fifo#0") > 4.0 * col("bulk_codel#0"));
    // Queue delay: the pfifo's sojourn series grows past 100 ms.
    let q = (r["series"].as_array().unwrap().iter())
        .find(|q| q["name"] == "r_fifo->server_fifo")
        .unwrap();
    let late = q["sojourn_ms"].as_array().unwrap()[59].as_f64().unwrap();
    assert!(late > 100.0, "{late}");

    if font() {
        // Two host pairs: two panels of 420 pixels each; two queues where
        // packets waited (the routers'), the hosts' own idle ones left out.
        for (name, panels) in [("goodput", 2), ("cwnd", 2), ("queue-delay", 2)] {
            let p = dir.join(format!("plots/{name}.png"));
            assert_eq!(png_size(&p), (900, 420 * panels), "{name}");
            let len = std::fs::metadata(&p).unwrap().len();
            assert!((5_000..150_000).contains(&len), "{name}: {len} bytes");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_out_that_is_a_file_is_a_usage_error_before_the_run() {
    let f = out_dir("file");
    std::fs::write(&f, "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(["sim", "run", &scenario("bufferbloat.toml"), "--quick"])
        .args(["--out", f.to_str().unwrap()])
        .output()
        .expect("run lowtide");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--out:") && stderr.contains("not a directory"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
    std::fs::remove_file(&f).ok();
}
