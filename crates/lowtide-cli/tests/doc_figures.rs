//! The experiments' figures in the docs come from the results.json they cite.
//!
//! README.md, BENCHMARKS.md and docs/experiments/*.md quote experiment figures only
//! inside generated blocks:
//!
//! ```text
//! <!-- begin: lowtide experiment summary docs/experiments -->
//! ...what that command prints now...
//! <!-- end -->
//! ```
//!
//! The command names the directory whose results.json the block cites; this test runs
//! it and fails when the block differs (a number that disagrees with results.json, or
//! a results.json changed without its docs). docs/experiments/report.md must be what
//! `lowtide experiment render docs/experiments` writes from its results.json. After a
//! new run is committed, rewrite the blocks and the report with
//! `LOWTIDE_UPDATE_DOCS=1 cargo test -p lowtide-cli --test doc_figures`.

use std::path::{Path, PathBuf};
use std::process::Command;

const BEGIN: &str = "<!-- begin: lowtide ";
const END: &str = "<!-- end -->";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn update() -> bool {
    std::env::var_os("LOWTIDE_UPDATE_DOCS").is_some()
}

/// What `lowtide ARGS` prints, run from the repository's root.
fn lowtide(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lowtide"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run lowtide");
    assert!(
        out.status.success(),
        "lowtide {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The docs that may quote experiment figures.
fn docs() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md"), root().join("BENCHMARKS.md")];
    let dir = root().join("docs/experiments");
    let mut md: Vec<PathBuf> = (std::fs::read_dir(&dir).expect("docs/experiments"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| p.file_name().is_some_and(|n| n != "report.md"))
        .collect();
    md.sort();
    v.extend(md);
    v
}

/// Checks (or rewrites) every generated block of `path`; returns how many it has.
fn check_blocks(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).expect("read doc");
    let mut out = String::new();
    let mut rest = text.as_str();
    let mut n = 0;
    let mut wrong = Vec::new();
    while let Some(at) = rest.find(BEGIN) {
        let line_end = at + rest[at..].find('\n').expect("marker line ends");
        let marker = &rest[at..line_end];
        let cmd = (marker[BEGIN.len()..].trim_end())
            .strip_suffix("-->")
            .expect("marker ends with -->")
            .trim();
        let body_start = line_end + 1;
        let end = body_start
            + rest[body_start..]
                .find(END)
                .unwrap_or_else(|| panic!("{}: `{marker}` has no {END}", path.display()));
        let args: Vec<&str> = cmd.split_whitespace().collect();
        let now = lowtide(&args);
        if rest[body_start..end] != now {
            wrong.push(cmd.to_string());
        }
        out.push_str(&rest[..body_start]);
        out.push_str(&now);
        rest = &rest[end..];
        n += 1;
    }
    out.push_str(rest);
    if update() {
        std::fs::write(path, out).expect("write doc");
    } else {
        assert!(
            wrong.is_empty(),
            "{}: generated block(s) disagree with what they cite: {wrong:?} \
             (LOWTIDE_UPDATE_DOCS=1 cargo test -p lowtide-cli --test doc_figures rewrites them)",
            path.display()
        );
    }
    n
}

#[test]
fn doc_figures_are_the_results_they_cite() {
    let mut blocks = 0;
    for d in docs() {
        let n = check_blocks(&d);
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        if ["BENCHMARKS.md", "README.md"].contains(&name.as_str())
            && d.parent().is_some_and(|p| p.ends_with("experiments"))
        {
            assert!(
                n > 0,
                "docs/experiments/README.md quotes no generated block"
            );
        }
        if name == "BENCHMARKS.md" {
            assert!(n > 0, "BENCHMARKS.md quotes no generated block");
        }
        blocks += n;
    }
    assert!(blocks >= 2, "{blocks} generated blocks");
}

/// report.md beside results.json is what `render` writes from it (plot links aside:
/// they need the font).
#[test]
fn the_committed_report_is_rendered_from_its_results() {
    let dir = root().join("docs/experiments");
    let tmp = std::env::temp_dir().join(format!("lowtide-doc-render-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    lowtide(&[
        "experiment",
        "render",
        dir.to_str().unwrap(),
        "--out",
        tmp.to_str().unwrap(),
    ]);
    let now = std::fs::read_to_string(tmp.join("report.md")).expect("rendered");
    let report = dir.join("report.md");
    let _ = std::fs::remove_dir_all(&tmp);
    if update() {
        std::fs::write(&report, &now).expect("write report.md");
        return;
    }
    let old = std::fs::read_to_string(&report).expect("docs/experiments/report.md");
    let text = |s: &str| -> Vec<String> {
        (s.lines())
            .filter(|l| !l.starts_with("!["))
            .map(str::to_string)
            .collect()
    };
    let (a, b) = (text(&old), text(&now));
    let first = a.iter().zip(&b).position(|(x, y)| x != y);
    assert!(
        a == b,
        "docs/experiments/report.md is not what results.json renders to (first differing \
         line {first:?}: {:?} vs {:?}); LOWTIDE_UPDATE_DOCS=1 cargo test -p lowtide-cli \
         --test doc_figures rewrites it",
        first.map(|i| &a[i]),
        first.map(|i| &b[i])
    );
}
