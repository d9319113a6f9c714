//! Parsers of sysctl values, as Linux's `proc_do*` handlers accept them.

use super::ConfigError;

const BOOL: &str = "0 or 1";

pub(super) fn parse_bool(name: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(bad(name, v, BOOL)),
    }
}

/// A switch: `true`/`false` (TOML style) or `1`/`0` (sysctl style).
pub(super) fn parse_flag(name: &str, v: &str) -> Result<bool, ConfigError> {
    match v.trim() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(bad(name, v, "true or false")),
    }
}

pub(super) fn bad(name: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::BadValue {
        name: name.into(),
        value: value.into(),
        expected,
    }
}

pub(super) fn parse_num<T: core::str::FromStr + PartialOrd>(
    name: &str,
    v: &str,
    min: T,
    max: T,
    expected: &'static str,
) -> Result<T, ConfigError> {
    match v.trim().parse::<T>() {
        Ok(x) if x >= min && x <= max => Ok(x),
        _ => Err(bad(name, v, expected)),
    }
}

pub(super) fn parse_triple<T>(name: &str, v: &str) -> Result<[T; 3], ConfigError>
where
    T: std::str::FromStr + Default + Copy + PartialOrd,
{
    const EXP: &str = "three counts 'min default max' with 0 < min <= default <= max";
    let parts: Vec<&str> = v.split_whitespace().collect();
    if parts.len() != 3 {
        return Err(bad(name, v, EXP));
    }
    let mut out = [T::default(); 3];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p.parse().map_err(|_| bad(name, v, EXP))?;
    }
    if out[0] == T::default() || out[0] > out[1] || out[1] > out[2] {
        return Err(bad(name, v, EXP));
    }
    Ok(out)
}

/// The largest keepalive sysctl in seconds (`INT_MAX` jiffies at HZ=1000).
pub(super) const KEEPALIVE_MAX_S: u32 = i32::MAX as u32 / 1000;

pub(super) fn parse_ports(name: &str, v: &str) -> Result<[u16; 2], ConfigError> {
    const EXP: &str = "'low high' with 1 <= low <= high <= 65535";
    let p: Vec<u16> = v
        .split_whitespace()
        .map(|s| s.parse::<u16>().map_err(|_| bad(name, v, EXP)))
        .collect::<Result<_, _>>()?;
    match p.as_slice() {
        [lo, hi] if *lo >= 1 && lo <= hi => Ok([*lo, *hi]),
        _ => Err(bad(name, v, EXP)),
    }
}

/// A port list as `proc_do_large_bitmap` reads it (`ip_local_reserved_ports`):
/// comma-separated ports and `low-high` ranges; empty clears it.
pub(super) fn parse_port_list(name: &str, v: &str) -> Result<Vec<[u16; 2]>, ConfigError> {
    const EXP: &str = "ports or ranges 'low-high', comma-separated";
    let port = |s: &str| s.trim().parse::<u16>().map_err(|_| bad(name, v, EXP));
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| match item.split_once('-') {
            Some((lo, hi)) => match (port(lo)?, port(hi)?) {
                (lo, hi) if lo <= hi => Ok([lo, hi]),
                _ => Err(bad(name, v, EXP)),
            },
            None => port(item).map(|p| [p, p]),
        })
        .collect()
}
