//! `lowtide sim sweep` and `sim merge` (issue 22): a grid of settings run point by
//! point, each with its verdict and checks; a failing point exits 1 naming it; the
//! job array of the README (GNU parallel running `--shard {}/N`, then `sim merge`)
//! gives exactly the whole sweep's points. Without `parallel` on the machine the
//! shards run as plain subprocesses, side by side.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const LOWTIDE: &str = env!("CARGO_BIN_EXE_lowtide");

fn lowtide(args: &[&str]) -> Output {
    Command::new(LOWTIDE)
        .args(args)
        .output()
        .expect("run lowtide")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lowtide-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One bulk flow and one 20 ms request/response-free probe through a router; the
/// check holds above 6 Mbit/s of bottleneck.
fn scenario(d: &Path) -> String {
    let text = r#"
checks = ["flow.bulk.goodput_mbps > 6"]
[run]
duration = "2s"
[hosts.a]
[hosts.b]
[routers.r]
[links.up]
between = ["a", "r"]
[links.down]
between = ["r", "b"]
rate = "10mbit"
delay = "5ms"
queue = "pfifo,limit=50"
[flows.bulk]
from = "a"
to = "b"
"#;
    let p = d.join("s.toml");
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

fn results(d: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(d.join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("JSON")
}

const RATES: &str = "links.down.rate=[8mbit,12mbit,16mbit,20mbit]";
const QUEUES: &str = r#"links.down.queue=["pfifo,limit=50", "fq_codel,target=2ms"]"#;

#[test]
fn a_failing_point_exits_1_naming_it() {
    let d = dir("fail");
    let file = scenario(&d);
    let out = d.join("out");
    let o = lowtide(&[
        "sim",
        "sweep",
        &file,
        "--param",
        "links.down.rate=[4mbit,10mbit]",
        "--out",
        out.to_str().unwrap(),
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("point 0 (links.down.rate=4mbit): check failed: flow.bulk.goodput_mbps > 6"),
        "{err}"
    );
    assert!(!err.contains("point 1 "), "{err}");
    let v = results(&out);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["checks"][0]["pass"], true);
    assert_eq!(points[0]["verified"], true);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("## flow bulk") && md.contains("## queue r->b"),
        "{md}"
    );
    assert!(
        md.contains("| 0 | 4mbit | FAILED (checks) | 0 of 1 |"),
        "{md}"
    );
    // A value the file refuses is a usage error naming the point, before any run.
    let o = lowtide(&[
        "sim",
        "sweep",
        &file,
        "--param",
        "links.down.rate=[10mbit,0bit]",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("point 1 (links.down.rate=0bit)"),
        "{}",
        stderr(&o)
    );
}

/// The README's job array: `parallel lowtide sim sweep ... --shard {}/3 --out
/// DIR/{} ::: 1 2 3`, then `lowtide sim merge DIR/1 DIR/2 DIR/3 --out DIR/all`.
#[test]
fn shards_run_as_a_job_array_merge_into_the_whole_sweep() {
    let d = dir("shards");
    let file = scenario(&d);
    let whole = d.join("whole");
    let common = [
        "sim", "sweep", &file, "--param", RATES, "--param", QUEUES, "--jobs", "2",
    ];
    let mut args: Vec<&str> = common.to_vec();
    args.extend([
        "--out",
        whole.to_str().unwrap(),
        "--plot",
        "queue.r->b.sojourn_ms",
    ]);
    let o = lowtide(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let shard_out = |i: &str| d.join(format!("shard{i}"));
    let with_parallel = (Command::new("parallel").arg("--version").output())
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU parallel"));
    if with_parallel {
        let mut cmd = Command::new("parallel");
        // -q: each argument quoted as given (the --param lists hold quotes).
        cmd.args(["-q", LOWTIDE]).args(common).args([
            "--shard",
            "{}/3",
            "--out",
            &format!("{}/shard{{}}", d.display()),
            ":::",
            "1",
            "2",
            "3",
        ]);
        let o = cmd.output().expect("parallel");
        assert!(o.status.success(), "parallel: {}", stderr(&o));
    } else {
        let children: Vec<_> = ["1", "2", "3"]
            .iter()
            .map(|i| {
                let shard = format!("{i}/3");
                let out = shard_out(i);
                Command::new(LOWTIDE)
                    .args(common)
                    .args(["--shard", &shard, "--out", out.to_str().unwrap()])
                    .spawn()
                    .expect("spawn a shard")
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
    }
    // Shard 2 of 3 holds points 1, 4, 7 of the 8.
    let s2 = results(&shard_out("2"));
    let idx: Vec<u64> = (s2["points"].as_array().unwrap().iter())
        .map(|p| p["index"].as_u64().unwrap())
        .collect();
    assert_eq!(idx, [1, 4, 7]);
    let merged = d.join("merged");
    let (a, b, c) = (shard_out("3"), shard_out("1"), shard_out("2"));
    let mut margs = vec!["sim", "merge"];
    margs.extend([
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    ]);
    margs.extend(["--out", merged.to_str().unwrap()]);
    let o = lowtide(&margs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (w, m) = (results(&whole), results(&merged));
    assert_eq!(m["points"], w["points"]);
    assert_eq!(m["points"].as_array().unwrap().len(), 8);
    assert_eq!(m["shard"], serde_json::Value::Null);
    // The plot (the file's check's figure by default) is drawn from the merge.
    let font = Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists();
    if font {
        assert!(merged
            .join("plots/sweep0_flow_bulk_goodput_mbps.png")
            .exists());
        assert!(whole
            .join("plots/sweep0_queue_r__b_sojourn_ms.svg")
            .exists());
    }
    // Missing a shard, or mixing sweeps, is refused.
    let o = lowtide(&[
        "sim",
        "merge",
        a.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("points missing"), "{}", stderr(&o));
    let o = lowtide(&[
        "sim",
        "merge",
        a.to_str().unwrap(),
        whole.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert!(stderr(&o).contains("appears twice"), "{}", stderr(&o));
}
