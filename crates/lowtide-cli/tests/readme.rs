//! README's figures come from commands this test runs: the `sim stream`, `sim run`
//! and `sim soak` examples' output is compared line by line with what the command
//! prints now (wall-clock figures aside). After a deliberate behaviour change, rewrite the block with
//! `LOWTIDE_UPDATE_README=1 cargo test -p lowtide-cli --test readme`.

use std::process::Command;

const README: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");

/// The example: this prompt line, then the output up to the closing fence.
const EXAMPLE: &str = "$ lowtide sim stream --rate 1gbit --rtt 20ms --loss 1% --duration 10s -i 2";

/// The scenario example (run from the repository's root).
const SCENARIO: &str = "$ lowtide sim run scenarios/bufferbloat.toml --quick";

/// The soak example.
const SOAK: &str = "$ lowtide sim soak --runs 20 --seed 1 --jobs 2";

/// A line without what depends on the machine (the wall time and rate of the run)
/// and without trailing blanks.
fn steady(line: &str) -> &str {
    let line = line.trim_end();
    if line.ends_with(" s wall") {
        // `sim soak`'s summary: "...; T s wall".
        return line.rsplit_once("; ").map_or(line, |(head, _)| head);
    }
    if line.ends_with(" s wall)") {
        // `sim run`'s summary: "..., N packets, T s wall)".
        return line.rsplit_once(", ").map_or(line, |(head, _)| head);
    }
    match line.find(" s wall (") {
        Some(at) => line[..at]
            .rsplit_once(" in ")
            .map_or(line, |(head, _)| head),
        None => line,
    }
}

#[test]
fn readme_sim_stream_example_is_what_the_command_prints() {
    check_example(EXAMPLE);
}

#[test]
fn readme_sim_run_example_is_what_the_command_prints() {
    check_example(SCENARIO);
}

#[test]
fn readme_sim_soak_example_is_what_the_command_prints() {
    check_example(SOAK);
}

/// Compares the README's output block after the prompt line `example` with what
/// the command prints now (or rewrites it, with `LOWTIDE_UPDATE_README`).
fn check_example(example: &str) {
    // The tests run in parallel: one read-modify-write of README at a time.
    static README_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = README_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let readme = std::fs::read_to_string(README).unwrap();
    let start = readme.find(example).expect("README has the example") + example.len() + 1;
    let end = start + readme[start..].find("```").expect("closing fence");
    let args: Vec<&str> = example.split(' ').skip(2).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(&args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let now = String::from_utf8(out.stdout).unwrap();
    if std::env::var_os("LOWTIDE_UPDATE_README").is_some() {
        let now: String = now.lines().map(|l| format!("{}\n", l.trim_end())).collect();
        let updated = format!("{}{now}{}", &readme[..start], &readme[end..]);
        std::fs::write(README, updated).unwrap();
        return;
    }
    let (was, is): (Vec<&str>, Vec<&str>) = (
        readme[start..end].lines().map(steady).collect(),
        now.lines().map(steady).collect(),
    );
    assert_eq!(
        was, is,
        "README's example is stale: LOWTIDE_UPDATE_README=1 cargo test -p lowtide-cli --test readme"
    );
}
