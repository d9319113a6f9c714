//! Usage errors of the real-path commands (`transfer`, `iperf3`, `link`): the line
//! `lowtide: <what>: <why>` on stderr, nothing on stdout, exit 2, before any device
//! is opened (so no root needed).

use std::process::{Command, Output};

fn lowtide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .output()
        .expect("run lowtide")
}

#[test]
fn real_path_usage_errors_exit_2_in_one_line() {
    let tun = ["--tun", "lt0", "--tun-addr", "10.7.0.1/24"];
    let cases: &[(&[&str], &str)] = &[
        (&["iperf3", "-c", "10.7.0.1", "-b", "fast"], "--bitrate"),
        (&["iperf3", "-c", "10.7.0.1", "-b", "10M/100"], "--bitrate"),
        (&["iperf3", "-c", "10.7.0.1", "-O", "61"], "--omit"),
        (&["iperf3", "-c", "10.7.0.1", "-i", "0.05"], "--interval"),
        (&["iperf3", "-c", "10.7.0.1", "-P", "0"], "--parallel"),
        // The emulated path's ranges are the simulator's (limits.rs).
        (&["iperf3", "-c", "10.7.0.1", "--rate", "1bit"], "--rate"),
        (&["iperf3", "-c", "10.7.0.1", "--rtt", "999s"], "--rtt"),
        (&["iperf3", "-c", "10.7.0.1", "--delay", "6s"], "--delay"),
        (
            &["iperf3", "-c", "10.7.0.1", "--jitter", "-1ms"],
            "--jitter",
        ),
        (
            &["link", "--tun", "a", "--duration", "100000s"],
            "--duration",
        ),
        (
            &["link", "--tun", "a", "--busy-poll", "2000000"],
            "--busy-poll",
        ),
        (
            &[
                "iperf3",
                "-c",
                "10.7.0.1",
                "--sysctl",
                "net.core.busy_poll=-1",
            ],
            "net.core.busy_poll",
        ),
        (&["iperf3", "-s", "-b", "10M"], "-b"),
        (&["iperf3", "-s", "-O", "2"], "-O"),
        (
            &["iperf3", "-c", "10.7.0.1", "--local", "10.7.0.1"],
            "--local",
        ),
        (
            &[
                "transfer",
                "--connect",
                "10.7.0.1:80",
                "--send",
                "1",
                "--local",
                "10.7.0.1",
            ],
            "--local",
        ),
        (
            &["transfer", "--connect", "10.7.0.1", "--send", "1"],
            "--connect",
        ),
        (
            &[
                "link",
                "--tun",
                "a",
                "--tun-addr",
                "10.8.0.1/24",
                "--peer-tun",
                "b",
                "--peer-addr",
                "10.8.0.2/24",
                "--peer-netns",
                "x",
                "--netns",
                "x",
            ],
            "--netns",
        ),
    ];
    for (args, flag) in cases {
        let mut full = args.to_vec();
        if full[0] != "link" {
            full.extend_from_slice(&tun);
        }
        let out = lowtide(&full);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let first = err.lines().next().unwrap_or("");
        assert!(
            first.starts_with("lowtide: ") && first.contains(flag),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
