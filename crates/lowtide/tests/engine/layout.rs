//! The engine's layout (issue 24): the import circle among the files of tcp/ (the
//! largest strongly connected component of their import graph,
//! scripts/tcp-import-circle.py) stays what Linux's own files share. It was 17 files
//! before the connection's state structs and the shared types moved where Linux's
//! headers hold them (tcp/sock.rs, tcp/consts.rs, tcp/skbuff.rs, cong's
//! `rate_sample`); the retransmit queue's tree and its store remain, one unit.

/// Files the circle may hold.
const MAX_CIRCLE: usize = 2;

#[test]
fn tcp_import_circle_does_not_grow() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = std::process::Command::new("python3")
        .arg(format!("{root}/scripts/tcp-import-circle.py"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/src/tcp"))
        .args(["-v", "--max", &MAX_CIRCLE.to_string()])
        .output()
        .expect("python3 runs scripts/tcp-import-circle.py");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
