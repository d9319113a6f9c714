//! README's list of accepted sysctls (its Usage section) names every one
//! `Config::set` accepts, so the manual cannot fall behind the engine.

#[test]
fn readme_lists_every_sysctl() {
    let readme = include_str!("../../../../README.md");
    let missing: Vec<&str> = lowtide::Config::NAMES
        .iter()
        .copied()
        .filter(|name| {
            // The list writes `net.ipv4.` once and then the short names.
            let short = name.strip_prefix("net.ipv4.").unwrap_or(name);
            !readme.contains(&format!("`{short}`")) && !readme.contains(&format!("`{name}`"))
        })
        .collect();
    assert!(missing.is_empty(), "README.md does not list {missing:?}");
}
