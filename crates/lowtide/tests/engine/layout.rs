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

/// Every module tcp/mod.rs declares has a row in its Linux table and in README's
/// (issue 24 item 10), so a reader who knows Linux finds each file from either.
#[test]
fn tcp_tables_list_every_module() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let read = |p: &str| std::fs::read_to_string(format!("{dir}/{p}")).expect(p);
    let (mod_rs, readme) = (read("src/tcp/mod.rs"), read("../../README.md"));
    let mods: Vec<&str> = mod_rs
        .lines()
        .filter_map(|l| {
            let l = l
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ");
            l.strip_prefix("mod ")?.strip_suffix(';')
        })
        .collect();
    assert!(
        mods.len() > 40,
        "tcp/mod.rs declares {} modules",
        mods.len()
    );
    let unlisted: Vec<&&str> = mods
        .iter()
        .filter(|m| {
            let in_doc = mod_rs.contains(&format!("//! | `{m}` |"))
                || mod_rs.contains(&format!("//! | [`{m}`] |"));
            let in_readme = readme.contains(&format!("| `{m}.rs` |"))
                || readme.contains(&format!("| `{m}/` |"));
            !(in_doc && in_readme)
        })
        .collect();
    assert!(
        unlisted.is_empty(),
        "not in tcp/mod.rs's or README's table: {unlisted:?}"
    );
}
