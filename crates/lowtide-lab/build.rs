//! Build-time provenance for `lowtide experiment` (results.json's "provenance"): the
//! compiler's version and the commit the binary was built from, as environment
//! variables read with `option_env!` (src/provenance.rs).

use std::process::Command;

fn output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    match out.status.success() {
        true => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        false => None,
    }
}

fn main() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    if let Some(v) = output(&rustc, &["-V"]) {
        println!("cargo:rustc-env=LOWTIDE_BUILD_RUSTC={v}");
    }
    if let Some(commit) = output("git", &["rev-parse", "HEAD"]) {
        println!("cargo:rustc-env=LOWTIDE_BUILD_COMMIT={commit}");
        let status = output("git", &["status", "--porcelain", "--untracked-files=no"]);
        let dirty = status.is_some_and(|s| !s.is_empty());
        println!("cargo:rustc-env=LOWTIDE_BUILD_DIRTY={dirty}");
        // Rerun when HEAD, the branch it names or any source moves.
        for p in ["HEAD"] {
            if let Some(path) = output("git", &["rev-parse", "--git-path", p]) {
                println!("cargo:rerun-if-changed={path}");
            }
        }
        if let Some(r) = output("git", &["symbolic-ref", "-q", "HEAD"]) {
            if let Some(path) = output("git", &["rev-parse", "--git-path", &r]) {
                println!("cargo:rerun-if-changed={path}");
            }
        }
        println!("cargo:rerun-if-changed=../../crates");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
