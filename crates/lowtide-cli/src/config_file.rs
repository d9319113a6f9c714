//! `--config FILE`: sysctls for both hosts from a TOML file.
//!
//! ```toml
//! [sysctl]
//! "net.ipv4.tcp_wmem" = "4096 16384 4194304"
//! "net.ipv4.tcp_notsent_lowat" = 131072
//! "experimental.tsq" = false
//! ```
//!
//! Values are strings (the sysctl's text form, as `sysctl -w` takes it), integers,
//! booleans (written as `1`/`0`, which every switch accepts) or arrays of integers
//! (`[4096, 16384, 4194304]`, joined by spaces). Unquoted dotted names
//! (`net.ipv4.tcp_sack = 0`) are TOML nested tables; they are joined back with dots.

use lowtide::Config;
use lowtide_sim::network::schema::{parse_toml, sysctl_pairs};
use toml::Value;

/// Reads `path` and applies its sysctls to `cfg` (each name appears once, so the
/// order does not matter).
pub fn apply_file(cfg: &mut Config, path: &std::path::Path) -> Result<(), String> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("config {shown}: {e}"))?;
    apply(cfg, &text).map_err(|e| format!("config {shown}: {e}"))
}

/// Applies the sysctls of a TOML document to `cfg`.
pub fn apply(cfg: &mut Config, text: &str) -> Result<(), String> {
    for (name, value) in sysctls(text)? {
        cfg.set(&name, &value).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The `[sysctl]` entries of a TOML document as (name, text value) pairs.
pub fn sysctls(text: &str) -> Result<Vec<(String, String)>, String> {
    let doc = parse_toml(text)?;
    let mut out = Vec::new();
    for (key, v) in &doc {
        match (key.as_str(), v) {
            ("sysctl", Value::Table(t)) => out.extend(sysctl_pairs(t)?),
            ("sysctl", _) => return Err("'sysctl' must be a table ([sysctl])".into()),
            (other, _) => return Err(format!("unknown section '{other}' (expected [sysctl])")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_integers_booleans_arrays_and_dotted_keys() {
        let text = r#"
            [sysctl]
            "net.ipv4.tcp_wmem" = "4096 16384 4194304"
            "net.ipv4.tcp_notsent_lowat" = 131072
            "experimental.tsq" = false
            "net.ipv4.tcp_rmem" = [4096, 65536, 1048576]
            net.ipv4.tcp_sack = true
        "#;
        let got = sysctls(text).unwrap();
        let want = [
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
            ("net.ipv4.tcp_notsent_lowat", "131072"),
            ("experimental.tsq", "0"),
            ("net.ipv4.tcp_rmem", "4096 65536 1048576"),
            ("net.ipv4.tcp_sack", "1"),
        ];
        let mut got_sorted = got.clone();
        got_sorted.sort();
        let mut want_sorted: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        want_sorted.sort();
        assert_eq!(got_sorted, want_sorted);
        let mut cfg = Config::default();
        apply(&mut cfg, text).unwrap();
        assert_eq!(cfg.tcp_notsent_lowat, 131_072);
        assert!(!cfg.tsq);
        assert_eq!(cfg.tcp_rmem, [4096, 65536, 1_048_576]);
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |t: &str| apply(&mut Config::default(), t).unwrap_err();
        assert!(err("[sysctl]\n\"net.ipv4.tcp_nonsense\" = 1").contains("tcp_nonsense"));
        assert!(err("[sysctl]\n\"net.ipv4.tcp_wmem\" = \"1 2\"").contains("tcp_wmem"));
        assert!(err("[sysctls]\n").contains("unknown section"));
        assert!(err("sysctl = 3").contains("must be a table"));
        assert!(err("[sysctl]\n\"experimental.tsq\" = 1.5").contains("unsupported"));
        assert!(err("\n[sysctl\n").starts_with("line 2: "));
    }
}
