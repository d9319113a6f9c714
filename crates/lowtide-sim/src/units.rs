//! Parsing of values with units, as `tc`/netem and iperf spell them: the command
//! line's flags and the scenario files' values ([`crate::network::schema`]) alike.
//! Each parser returns a one-line error message (clap reports it, exit code 2).

use std::time::Duration;

/// Splits `s` into its leading number and the unit after it.
fn split_number(s: &str) -> Result<(f64, &str), String> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' does not start with a number"))?;
    if !value.is_finite() {
        return Err(format!("'{s}' is not a finite number"));
    }
    Ok((value, unit.trim()))
}

fn to_integer(value: f64, what: &str, s: &str) -> Result<u64, String> {
    if value < 0.0 || value >= u64::MAX as f64 {
        return Err(format!("{what} '{s}' out of range"));
    }
    Ok(value.round() as u64)
}

/// A link rate in bit/s: `100mbit`, `1gbit`, `10gbit`, `500kbit`, `1.5gbit`, or a
/// bare number of bit/s. Must be positive.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" | "bps" => 1.0,
        "kbit" | "kbps" => 1e3,
        "mbit" | "mbps" => 1e6,
        "gbit" | "gbps" => 1e9,
        "tbit" | "tbps" => 1e12,
        _ => {
            return Err(format!(
                "unknown rate unit in '{s}' (use bit, kbit, mbit, gbit)"
            ))
        }
    };
    positive(to_integer(v * mult, "rate", s)?, "rate", s)
}

/// A duration: `40ms`, `500us`, `1s`, `2.5s`, `100ns`, `1m`. A bare number is
/// rejected (the unit would be a guess).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (v, unit) = split_number(s)?;
    let ns_per = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "" => return Err(format!("duration '{s}' needs a unit (ns, us, ms, s)")),
        _ => return Err(format!("unknown time unit in '{s}' (use ns, us, ms, s)")),
    };
    Ok(Duration::from_nanos(to_integer(v * ns_per, "duration", s)?))
}

/// A byte count: `2000000`, `2MB`, `64KiB`, `1.5G`; K/M/G(B) are powers of 1000,
/// KiB/MiB/GiB powers of 1024. Must be positive.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let (v, unit) = split_number(s)?;
    let mult = match unit {
        "" | "B" => 1.0,
        "K" | "KB" | "k" | "kB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "unknown size unit in '{s}' (use K, M, G, KiB, MiB, GiB)"
            ))
        }
    };
    let n = v * mult;
    if n.fract() != 0.0 {
        return Err(format!("'{s}' is not a whole number of bytes"));
    }
    positive(to_integer(n, "size", s)?, "size", s)
}

/// `n`, refused when zero: `what` of text `s` must be positive.
fn positive(n: u64, what: &str, s: &str) -> Result<u64, String> {
    if n == 0 {
        return Err(format!("{what} '{s}' must be positive"));
    }
    Ok(n)
}

/// A probability: `1%`, `0.5%`, or a fraction `0.01`; within 0..=1.
pub fn parse_probability(s: &str) -> Result<f64, String> {
    let (v, unit) = split_number(s)?;
    let p = match unit {
        "%" => v / 100.0,
        "" => v,
        _ => return Err(format!("'{s}' is not a probability (use 1% or 0.01)")),
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(format!("probability '{s}' must be within 0%..100% (0..1)"));
    }
    Ok(p)
}

/// `on` or `off` (also `1`/`0`, `true`/`false`).
pub fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "1" | "true" | "yes" => Ok(true),
        "off" | "0" | "false" | "no" => Ok(false),
        _ => Err(format!("'{s}' is not on or off")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("10Gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("64kbit"), Ok(64_000));
        assert_eq!(parse_rate("1.5gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("12345"), Ok(12_345));
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10gb/s").is_err());
        assert!(parse_rate("-1mbit").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("40ms"), Ok(Duration::from_millis(40)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse_duration("0ms"), Ok(Duration::ZERO));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("ms").is_err());
    }

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("2MB"), Ok(2_000_000));
        assert_eq!(parse_bytes("2000000"), Ok(2_000_000));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5K"), Ok(1_500));
        assert_eq!(parse_bytes("3M"), Ok(3_000_000));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("1.5").is_err());
        assert!(parse_bytes("2XB").is_err());
    }

    #[test]
    fn probabilities() {
        assert_eq!(parse_probability("1%"), Ok(0.01));
        assert_eq!(parse_probability("0.5%"), Ok(0.005));
        assert_eq!(parse_probability("0.01"), Ok(0.01));
        assert_eq!(parse_probability("0"), Ok(0.0));
        assert_eq!(parse_probability("100%"), Ok(1.0));
        assert!(parse_probability("5").is_err());
        assert!(parse_probability("101%").is_err());
        assert!(parse_probability("a lot").is_err());
    }

    #[test]
    fn switches() {
        assert_eq!(parse_on_off("on"), Ok(true));
        assert_eq!(parse_on_off("OFF"), Ok(false));
        assert!(parse_on_off("maybe").is_err());
    }
}
