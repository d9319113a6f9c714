//! Replays every checked-in corpus and regression file through the functions the
//! AFL++ targets call, so CI checks old findings without AFL (`cargo test -p
//! lowtide-fuzz`).

use std::path::{Path, PathBuf};

/// The files of `fuzz/<dir>/<target>/`, sorted (none if the folder is missing).
fn files(dir: &str, target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(target);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file());
    v.sort();
    v
}

fn replay(target: &str, run: fn(&[u8])) {
    let corpus = files("corpus", target);
    assert!(!corpus.is_empty(), "fuzz/corpus/{target} is empty");
    for p in corpus.iter().chain(&files("regressions", target)) {
        let data = std::fs::read(p).unwrap();
        let r = std::panic::catch_unwind(|| run(&data));
        assert!(r.is_ok(), "{} fails", p.display());
    }
}

#[test]
fn wire_corpus_and_regressions() {
    replay("wire", lowtide_fuzz::wire::run);
}

#[test]
fn engine_corpus_and_regressions() {
    replay("engine", lowtide_fuzz::engine::run);
}

#[test]
fn scoreboard_corpus_and_regressions() {
    replay("scoreboard", lowtide_fuzz::scoreboard::run);
}
