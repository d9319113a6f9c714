//! `lowtide sim stream`, `sim soak` and `experiment` as a user sees them (issue 13):
//! iperf3's layout and `-i` intervals in text and JSON, sender and receiver totals,
//! range checks of every option, and the progress display (only on a terminal).

use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `sim stream ARGS --json`, which must succeed.
fn json(args: &[&str]) -> serde_json::Value {
    let mut full = vec!["sim", "stream", "--json"];
    full.extend_from_slice(args);
    let out = lowtide(&full);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

const LOSSY: [&str; 8] = [
    "--rate",
    "100mbit",
    "--rtt",
    "20ms",
    "--loss",
    "1%",
    "--duration",
    "3s",
];

#[test]
fn text_is_laid_out_as_iperf3_with_intervals_and_both_sides() {
    let mut args = vec!["sim", "stream", "-P", "2", "-i", "1"];
    args.extend(LOSSY);
    let out = lowtide(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let has = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(has("Connecting to host 10.0.0.2, port 5001"), 1, "{text}");
    assert_eq!(has("[  0] local 10.0.0.1 port "), 1, "{text}");
    assert_eq!(has("[  1] local 10.0.0.1 port "), 1, "{text}");
    assert_eq!(
        has("[ ID] Interval           Transfer     Bitrate         Retr  Cwnd"),
        1
    );
    // Three 1-s intervals, each with two flows and a [SUM] line, then a separator.
    for (a, b) in [("0.00", "1.00"), ("1.00", "2.00"), ("2.00", "3.00")] {
        let span = format!("{a:>6}-{b:<6} sec");
        let n = lines.iter().filter(|l| l.contains(&span)).count();
        assert_eq!(n, 3, "{span}: {text}");
    }
    assert_eq!(has("- - - - -"), 3, "{text}");
    // The summary: per flow a sender and a receiver line, then both sums.
    let senders: Vec<&&str> = lines.iter().filter(|l| l.ends_with(" sender")).collect();
    let receivers: Vec<&&str> = lines.iter().filter(|l| l.ends_with(" receiver")).collect();
    assert_eq!((senders.len(), receivers.len()), (3, 3), "{text}");
    assert!(senders[2].starts_with("[SUM]   0.00-3.00   sec"), "{text}");
    assert!(
        receivers[2].starts_with("[SUM]   0.00-3.00   sec"),
        "{text}"
    );
    for l in senders.iter().chain(&receivers) {
        assert!(l.contains("Mbits/sec") && l.contains("Bytes"), "{l}");
    }
    // lowtide's own figures follow.
    assert!(text.contains("verdict: OK"), "{text}");
    assert!(text.contains("wakeups:"), "{text}");
    // Without -i: no interval lines, the summary alone.
    let plain = stdout(&lowtide(&[&["sim", "stream"][..], &LOSSY].concat()));
    assert!(!plain.contains("Cwnd"), "{plain}");
    assert!(
        plain.contains(" sender\n") && plain.contains(" receiver\n"),
        "{plain}"
    );
}

#[test]
fn json_intervals_have_iperf3s_shape_and_add_up() {
    let mut args = vec!["-P", "2", "-i", "0.5"];
    args.extend(LOSSY);
    let v = json(&args);
    let ivs = v["intervals"].as_array().expect("intervals");
    assert_eq!(ivs.len(), 6);
    let mut sum_bytes = 0;
    let mut sum_retr = 0;
    for (k, iv) in ivs.iter().enumerate() {
        let streams = iv["streams"].as_array().expect("streams");
        assert_eq!(streams.len(), 2);
        for s in streams {
            for key in [
                "socket",
                "start",
                "end",
                "seconds",
                "bytes",
                "bits_per_second",
                "retransmits",
                "snd_cwnd",
                "rtt",
                "omitted",
                "sender",
            ] {
                assert!(s.get(key).is_some(), "interval {k}: no {key}: {s}");
            }
            let (b, secs) = (s["bytes"].as_f64().unwrap(), s["seconds"].as_f64().unwrap());
            let bps = s["bits_per_second"].as_f64().unwrap();
            assert!((bps - b * 8.0 / secs).abs() < 1e-6 * bps.max(1.0), "{s}");
            assert!(s["snd_cwnd"].as_u64().unwrap() > 0);
        }
        let sum = &iv["sum"];
        assert_eq!(sum["start"].as_f64(), Some(k as f64 * 0.5));
        assert_eq!(sum["end"].as_f64(), Some((k + 1) as f64 * 0.5));
        let b: u64 = streams.iter().map(|s| s["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum["bytes"].as_u64(), Some(b));
        sum_bytes += b;
        sum_retr += sum["retransmits"].as_u64().unwrap();
    }
    let end = &v["end"];
    assert_eq!(end["sum_sent"]["bytes"].as_u64(), Some(sum_bytes));
    assert_eq!(end["sum_sent"]["retransmits"].as_u64(), Some(sum_retr));
    assert_eq!(end["sum_sent"]["sender"], true);
    assert_eq!(end["sum_received"]["sender"], false);
    // Sender (acknowledged) and receiver (read) over the same 3 s: the sender never
    // more than the receiver.
    let sent = end["sum_sent"]["bytes"].as_u64().unwrap();
    let received = end["sum_received"]["bytes"].as_u64().unwrap();
    assert!(
        sent <= received && received - sent < 200_000,
        "{sent} {received}"
    );
    let delivered: u64 = (v["per_flow"].as_array().unwrap().iter())
        .map(|f| f["bytes_delivered"].as_u64().unwrap())
        .sum();
    assert_eq!(received, delivered);
    // -t is kept under loss: 3 s measured, whatever was retransmitted.
    assert_eq!(v["duration_s"].as_f64(), Some(3.0));
    assert_eq!(end["sum_sent"]["seconds"].as_f64(), Some(3.0));
    assert!(sum_retr > 0);
    // Without -i the array is there and empty, and the existing fields stay.
    let plain = json(&LOSSY);
    assert_eq!(plain["intervals"], serde_json::json!([]));
    for key in ["goodput_bps", "per_flow", "verdict", "memory", "sim_wall_s"] {
        assert!(plain.get(key).is_some(), "{key}");
    }
}

#[test]
fn a_fixed_size_transfer_reports_every_byte_on_both_sides() {
    let v = json(&[
        "-P", "3", "--bytes", "400KB", "--rate", "50mbit", "--rtt", "10ms", "--loss", "2%", "-i",
        "0.1",
    ]);
    assert_eq!(v["end"]["sum_sent"]["bytes"].as_u64(), Some(1_200_000));
    assert_eq!(v["end"]["sum_received"]["bytes"].as_u64(), Some(1_200_000));
    let iv: u64 = (v["intervals"].as_array().unwrap().iter())
        .map(|i| i["sum"]["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(iv, 1_200_000);
    for s in v["end"]["streams"].as_array().unwrap() {
        assert_eq!(s["sender"]["bytes"], s["receiver"]["bytes"], "{s}");
    }
}

/// Every out-of-range value: exit 2, nothing on stdout, one first line
/// `lowtide: <option>: <why>` naming the option.
#[test]
fn out_of_range_values_are_usage_errors_naming_the_option() {
    let cases: &[(&[&str], &str)] = &[
        (&["sim", "stream", "--duration", "3y"], "--duration"),
        (&["sim", "stream", "--duration", "100000s"], "--duration"),
        (&["sim", "stream", "--duration", "0s"], "--duration"),
        (&["sim", "stream", "-t", "-5s"], "--duration"),
        (
            &["sim", "stream", "--flows", "20000", "--duration", "10ms"],
            "--duration",
        ),
        (&["sim", "stream", "--duration", "30ms"], "--duration"),
        (&["sim", "stream", "--flows", "20001"], "--flows"),
        (&["sim", "stream", "-P", "0"], "--flows"),
        (&["sim", "stream", "--rate", "0"], "--rate"),
        (&["sim", "stream", "--rate", "-1gbit"], "--rate"),
        (&["sim", "stream", "--rate", "1bit"], "--rate"),
        (&["sim", "stream", "--rate", "5tbit"], "--rate"),
        (&["sim", "stream", "--rtt", "11s"], "--rtt"),
        (&["sim", "stream", "--rtt", "-20ms"], "--rtt"),
        (&["sim", "stream", "--jitter", "1000s"], "--jitter"),
        (&["sim", "stream", "--loss", "101%"], "--loss"),
        (&["sim", "stream", "--loss", "-1%"], "--loss"),
        (&["sim", "stream", "--loss-reverse", "2"], "--loss-reverse"),
        (&["sim", "stream", "--reorder", "150%"], "--reorder"),
        (&["sim", "stream", "--loss-burst", "5000"], "--loss-burst"),
        (&["sim", "stream", "--mss", "20"], "--mss"),
        (&["sim", "stream", "--mss", "70000"], "--mss"),
        (&["sim", "stream", "--queue", "0"], "--queue"),
        (&["sim", "stream", "--bytes", "0"], "--bytes"),
        (&["sim", "stream", "--bytes", "1TB"], "--bytes"),
        (
            &["sim", "stream", "-P", "100", "--bytes", "50GB"],
            "--bytes",
        ),
        (
            &["sim", "stream", "--bytes", "1MB", "--time-limit", "1000d"],
            "--time-limit",
        ),
        (
            &["sim", "stream", "-i", "20", "--duration", "10s"],
            "--interval",
        ),
        (&["sim", "stream", "-i", "0.0001"], "--interval"),
        (&["sim", "stream", "-i", "-1"], "--interval"),
        (
            &["sim", "stream", "-i", "0.001", "--duration", "1000s"],
            "--interval",
        ),
        (
            &[
                "sim",
                "stream",
                "--timeseries",
                "x.csv",
                "--timeseries-interval",
                "1us",
            ],
            "--timeseries-interval",
        ),
        (
            &[
                "sim",
                "stream",
                "--timeseries",
                "x.csv",
                "--timeseries-interval",
                "20s",
            ],
            "--timeseries-interval",
        ),
        (&["sim", "soak", "--runs", "0"], "--runs"),
        (&["sim", "soak", "--runs", "100000000"], "--runs"),
        (&["sim", "soak", "--jobs", "5000"], "--jobs"),
        (&["experiment", "e1", "--jobs", "0"], "--jobs"),
        (&["experiment", "e1", "--shard", "3/2"], "--shard"),
    ];
    for (args, option) in cases {
        let out = lowtide(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let first = err.lines().next().unwrap_or("");
        let want = format!("lowtide: {option}: ");
        assert!(first.starts_with(&want), "{args:?}: {err}");
        assert!(first.len() > want.len() + 10, "{args:?}: no reason: {err}");
    }
}

/// A run long enough to draw progress (the bar appears at once on the terminal of
/// [`on_a_terminal`], which sets `LOWTIDE_PROGRESS_AFTER_MS=0`: how fast the run is
/// must not decide the test).
const LONG: [&str; 12] = [
    "sim",
    "stream",
    "-P",
    "20",
    "--rate",
    "1gbit",
    "--rtt",
    "2ms",
    "--duration",
    "8s",
    "--gro",
    "off",
];

#[test]
fn no_progress_when_stderr_is_not_a_terminal() {
    let out = lowtide(&LONG);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
    let out = lowtide(&["sim", "soak", "--runs", "3", "--seed", "2"]);
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

/// Runs `cmd` under `script`, which gives it a terminal; returns what it printed.
fn on_a_terminal(args: &[&str]) -> String {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_lowtide"))
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .env("LOWTIDE_PROGRESS_AFTER_MS", "0")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .expect("script(1) from util-linux, to run lowtide on a terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_on_a_terminal_unless_quiet_or_json() {
    let shown = on_a_terminal(&LONG);
    assert!(shown.contains("flows connected"), "{shown}");
    assert!(shown.contains("s virtual"), "{shown}");
    assert!(shown.contains("verdict: OK"), "{shown}");
    for flag in ["--quiet", "--json"] {
        let mut args = LONG.to_vec();
        args.push(flag);
        let quiet = on_a_terminal(&args);
        assert!(!quiet.contains("flows connected"), "{flag}: {quiet}");
    }
    let soak = on_a_terminal(&["sim", "soak", "--runs", "3", "--seed", "2"]);
    assert!(soak.contains("/3 runs, "), "{soak}");
    let soak = on_a_terminal(&["sim", "soak", "--runs", "3", "--seed", "2", "-q"]);
    assert!(!soak.contains("/3 runs, "), "{soak}");
}

/// `lowtide ... | head -1`: when the reader of stdout goes away, lowtide ends as C
/// tools do (killed by SIGPIPE, nothing on stderr), not with a panic and exit 101.
#[test]
fn closed_stdout_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(["sim", "stream", "--rate", "100mbit", "--rtt", "10ms"])
        .args(["--duration", "5s", "-i", "0.01", "--flows", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lowtide");
    let mut first = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("piped"));
    out.read_line(&mut first).expect("a first line");
    drop(out);
    let done = child.wait_with_output().expect("wait");
    let err = stderr(&done);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        done.status.signal(),
        Some(libc::SIGPIPE),
        "{:?}",
        done.status
    );
}
