//! The ranges the simulator's options accept, as clap value parsers (one value at a
//! time) and as checks across options ([`check_stream`]). A value out of range is a
//! usage error: `lowtide: <option>: <why>` on stderr, exit code 2. The limits are
//! what a network engineer would call a plausible path or test, and are repeated in
//! each option's help text.

use crate::units;
use std::time::Duration;

/// Link rates: 1 kbit/s (an old modem) to 1 Tbit/s.
pub const RATE: (u64, u64) = (1_000, 1_000_000_000_000);
/// Round-trip time: 0 (back to back) to 10 s (well beyond a geostationary hop).
pub const MAX_RTT: Duration = Duration::from_secs(10);
/// Jitter: at most 10 s.
pub const MAX_JITTER: Duration = Duration::from_secs(10);
/// Measured time of a bulk run: 1 ms to one day (iperf3's `-t` limit, 86400 s).
pub const DURATION: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(86_400));
/// Simulated-time cap of a fixed-size run: 1 ms to 10,000,000 s (the longest
/// liveness deadline `sim soak` computes, with RTO backoff to 120 s).
pub const TIME_LIMIT: (Duration, Duration) =
    (Duration::from_millis(1), Duration::from_secs(10_000_000));
/// Bytes per flow: 1 B to 100 GB.
pub const BYTES: (u64, u64) = (1, 100_000_000_000);
/// Bytes over all flows of a fixed-size run: at most 1 TB.
pub const TOTAL_BYTES: u64 = 1_000_000_000_000;
/// Flows: 1 to 20,000 (their ephemeral ports fit Linux's default
/// `ip_local_port_range`, 32768-60999).
pub const FLOWS: (u32, u32) = (1, 20_000);
/// Flow `i` connects at `i` × this (the simulator's stagger).
pub const STAGGER: Duration = Duration::from_micros(1);
/// MSS: Linux's `TCP_MIN_MSS` (88) to 65495 (a 65535-byte MTU).
pub const MSS: (u32, u32) = (88, 65_495);
/// NIC queue (txqueuelen): 1 to 1,000,000 packets.
pub const QUEUE: (u64, u64) = (1, 1_000_000);
/// Mean loss-burst length: 1 to 1000 packets.
pub const LOSS_BURST: (f64, f64) = (1.0, 1000.0);
/// Report interval (`-i`): 1 ms to 3600 s of simulated time, at most this many
/// intervals in a run.
pub const INTERVAL: (Duration, Duration) = (Duration::from_millis(1), Duration::from_secs(3600));
/// Most intervals a run may report (`duration / -i`).
pub const MAX_INTERVALS: u64 = 100_000;
/// Time-series interval: at least 1 µs, at most this many grid points in a run.
pub const TIMESERIES_MIN: Duration = Duration::from_micros(1);
/// Most time-series grid points a bulk run may write.
pub const MAX_TIMESERIES_POINTS: u64 = 1_000_000;

/// `d` as the user would write it back.
pub fn show(d: Duration) -> String {
    let ns = d.as_nanos();
    match ns {
        0 => "0s".into(),
        n if n % 1_000_000_000 == 0 => format!("{}s", n / 1_000_000_000),
        n if n % 1_000_000 == 0 => format!("{}ms", n / 1_000_000),
        n if n % 1_000 == 0 => format!("{}us", n / 1_000),
        n => format!("{n}ns"),
    }
}

/// A value written with a minus sign, which no option of the simulator takes.
fn negative(s: &str, range: &str) -> Result<(), String> {
    match s.trim().starts_with('-') {
        true => Err(format!("'{s}' is negative; the range is {range}")),
        false => Ok(()),
    }
}

/// `d` rounded up to a whole millisecond, as a suggestion to the user.
fn show_ms_up(d: Duration) -> String {
    show(Duration::from_millis(
        d.as_nanos().div_ceil(1_000_000) as u64
    ))
}

fn in_range(s: &str, d: Duration, (lo, hi): (Duration, Duration)) -> Result<Duration, String> {
    match d {
        d if d < lo => Err(format!("'{s}' is below the minimum of {}", show(lo))),
        d if d > hi => Err(format!("'{s}' is above the maximum of {}", show(hi))),
        d => Ok(d),
    }
}

/// A link rate within [`RATE`].
pub fn rate(s: &str) -> Result<u64, String> {
    negative(s, "1kbit to 1tbit")?;
    let r = units::parse_rate(s)?;
    match r {
        r if r < RATE.0 => Err(format!("'{s}' is below the minimum of 1kbit")),
        r if r > RATE.1 => Err(format!("'{s}' is above the maximum of 1tbit")),
        r => Ok(r),
    }
}

/// A round-trip time within 0..=[`MAX_RTT`].
pub fn rtt(s: &str) -> Result<Duration, String> {
    negative(s, "0 to 10s")?;
    in_range(s, units::parse_duration(s)?, (Duration::ZERO, MAX_RTT))
}

/// A one-way delay within 0..=[`MAX_RTT`] / 2.
pub fn delay(s: &str) -> Result<Duration, String> {
    negative(s, "0 to 5s")?;
    in_range(s, units::parse_duration(s)?, (Duration::ZERO, MAX_RTT / 2))
}

/// Jitter within 0..=[`MAX_JITTER`].
pub fn jitter(s: &str) -> Result<Duration, String> {
    negative(s, "0 to 10s")?;
    in_range(s, units::parse_duration(s)?, (Duration::ZERO, MAX_JITTER))
}

/// A bulk run's measured time within [`DURATION`]; a bare number is seconds, as
/// iperf3's `-t` (and `-i` here) take it.
pub fn duration(s: &str) -> Result<Duration, String> {
    negative(s, "1ms to 86400s")?;
    let d = match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v <= 1e9 => Duration::from_secs_f64(v),
        Ok(_) => return Err(format!("'{s}' must be 1ms to 86400s")),
        Err(_) => units::parse_duration(s)?,
    };
    in_range(s, d, DURATION)
}

/// A seed: a whole number from 0 to 2^64 - 1.
pub fn seed(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("seed '{s}' must be a whole number from 0 to {}", u64::MAX))
}

/// A fixed-size run's time cap within [`TIME_LIMIT`].
pub fn time_limit(s: &str) -> Result<Duration, String> {
    negative(s, "1ms to 10000000s")?;
    in_range(s, units::parse_duration(s)?, TIME_LIMIT)
}

/// Bytes per flow within [`BYTES`].
pub fn bytes(s: &str) -> Result<u64, String> {
    negative(s, "1 to 100GB per flow")?;
    let b = units::parse_bytes(s)?;
    match b > BYTES.1 {
        true => Err(format!("'{s}' is above the maximum of 100GB per flow")),
        false => Ok(b),
    }
}

/// A probability in 0%..=100%, negative values included in the message.
pub fn probability(s: &str) -> Result<f64, String> {
    negative(s, "0% to 100%")?;
    units::parse_probability(s)
}

fn integer<T: TryFrom<u64> + Copy>(s: &str, (lo, hi): (u64, u64), what: &str) -> Result<T, String> {
    let v: i128 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a whole number"))?;
    if v < lo as i128 || v > hi as i128 {
        return Err(format!("{s} is out of range: {what}"));
    }
    T::try_from(v as u64).map_err(|_| format!("'{s}' is out of range"))
}

/// A number of flows within [`FLOWS`].
pub fn flows(s: &str) -> Result<u32, String> {
    integer(s, (FLOWS.0 as u64, FLOWS.1 as u64), "1 to 20000 flows")
}

/// An MSS within [`MSS`].
pub fn mss(s: &str) -> Result<u32, String> {
    let what = "Linux takes 88 (TCP_MIN_MSS) to 65495 bytes (a 65535-byte MTU)";
    integer(s, (MSS.0 as u64, MSS.1 as u64), what)
}

/// A NIC queue within [`QUEUE`].
pub fn queue(s: &str) -> Result<u64, String> {
    integer(s, QUEUE, "a NIC queue holds 1 to 1000000 packets")
}

/// A mean loss-burst length within [`LOSS_BURST`].
pub fn loss_burst(s: &str) -> Result<f64, String> {
    negative(s, "1 to 1000 packets")?;
    match s.trim().parse::<f64>() {
        Ok(v) if (LOSS_BURST.0..=LOSS_BURST.1).contains(&v) => Ok(v),
        _ => Err(format!(
            "loss burst '{s}' must be a number of packets, 1 to 1000"
        )),
    }
}

/// `-i`: 0 (no interval reports) or a time within [`INTERVAL`].
pub fn interval(s: &str) -> Result<Duration, String> {
    // iperf3 takes seconds as a bare number: `-i 1`, `-i 0.5`.
    let d = match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=1e9).contains(&v) => Duration::from_secs_f64(v),
        Ok(_) => return Err(format!("'{s}' must be 0 (off) or 1ms to 3600s")),
        Err(_) => units::parse_duration(s)?,
    };
    match d.is_zero() {
        true => Ok(d),
        false => in_range(s, d, INTERVAL),
    }
}

/// A time-series interval of at least [`TIMESERIES_MIN`].
pub fn timeseries_interval(s: &str) -> Result<Duration, String> {
    let d = units::parse_duration(s)?;
    match d < TIMESERIES_MIN {
        true => Err(format!("'{s}' is below the minimum of 1us")),
        false => Ok(d),
    }
}

/// What `sim stream` was asked to do, for the checks across options.
#[derive(Debug, Clone, Copy)]
pub struct StreamPlan {
    /// Flows.
    pub flows: u32,
    /// Round-trip time.
    pub rtt: Duration,
    /// Bulk measured time, or `None` for a fixed-size run.
    pub duration: Option<Duration>,
    /// Bytes per flow of a fixed-size run.
    pub bytes: Option<u64>,
    /// The simulated-time cap of a fixed-size run.
    pub time_limit: Duration,
    /// `-i` (zero: off).
    pub interval: Duration,
    /// `--timeseries-interval`, if a time series is written.
    pub timeseries: Option<Duration>,
}

/// The checks across options; `Err((option, why))`.
pub fn check_stream(p: &StreamPlan) -> Result<(), (&'static str, String)> {
    let span = p.duration.unwrap_or(p.time_limit);
    if let Some(d) = p.duration {
        // The last flow connects at (flows - 1) staggers, then needs a round trip
        // for the handshake and one more for its first data to be acknowledged.
        let need = STAGGER * (p.flows - 1) + 2 * p.rtt;
        if d < need {
            let why = match p.flows {
                1 => format!(
                    "{} is shorter than two round trips (--rtt {}): the flow could not \
                     connect and deliver data; give at least {}",
                    show(d),
                    show(p.rtt),
                    show_ms_up(need)
                ),
                n => format!(
                    "{} is too short for {n} flows at --rtt {}: they connect {} apart and \
                     each needs two round trips to deliver data; give at least {}",
                    show(d),
                    show(p.rtt),
                    show(STAGGER),
                    show_ms_up(need)
                ),
            };
            return Err(("--duration", why));
        }
    }
    if let Some(b) = p.bytes {
        let total = b.saturating_mul(p.flows as u64);
        if total > TOTAL_BYTES {
            return Err((
                "--bytes",
                format!(
                    "{} flows of {b} bytes are {total} bytes in all; a run carries at most \
                     1 TB ({TOTAL_BYTES} bytes)",
                    p.flows
                ),
            ));
        }
    }
    if !p.interval.is_zero() {
        if p.interval > span {
            let what = if p.duration.is_some() {
                "--duration"
            } else {
                "--time-limit"
            };
            return Err((
                "--interval",
                format!(
                    "{} is longer than the run ({what} {})",
                    show(p.interval),
                    show(span)
                ),
            ));
        }
        let n = p
            .duration
            .map_or(0, |d| (d.as_nanos() / p.interval.as_nanos()) as u64);
        if n > MAX_INTERVALS {
            return Err((
                "--interval",
                format!(
                    "{} would report {n} intervals; at most {MAX_INTERVALS}",
                    show(p.interval)
                ),
            ));
        }
    }
    if let (Some(ts), Some(d)) = (p.timeseries, p.duration) {
        if ts > d {
            return Err((
                "--timeseries-interval",
                format!(
                    "{} is longer than the run (--duration {})",
                    show(ts),
                    show(d)
                ),
            ));
        }
        let n = (d.as_nanos() / ts.as_nanos()) as u64;
        if n > MAX_TIMESERIES_POINTS {
            return Err((
                "--timeseries-interval",
                format!(
                    "{} would write {n} rows per flow; at most {MAX_TIMESERIES_POINTS}",
                    show(ts)
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> StreamPlan {
        StreamPlan {
            flows: 1,
            rtt: Duration::from_millis(20),
            duration: Some(Duration::from_secs(10)),
            bytes: None,
            time_limit: Duration::from_secs(600),
            interval: Duration::ZERO,
            timeseries: None,
        }
    }

    #[test]
    fn single_values() {
        assert!(rate("0").is_err());
        assert!(rate("999").is_err());
        assert_eq!(rate("1kbit"), Ok(1000));
        assert!(rate("2tbit").is_err());
        assert!(rtt("11s").is_err());
        assert_eq!(rtt("0ms"), Ok(Duration::ZERO));
        assert!(duration("0s").is_err());
        assert!(duration("2d").is_err());
        assert!(duration("86401s").is_err());
        assert_eq!(duration("86400s"), Ok(Duration::from_secs(86_400)));
        assert!(bytes("0").is_err());
        assert!(bytes("101GB").is_err());
        assert!(flows("0").is_err());
        assert!(flows("20001").is_err());
        assert!(flows("-3").is_err());
        assert!(mss("87").is_err());
        assert_eq!(mss("1460"), Ok(1460));
        assert!(queue("0").is_err());
        assert!(loss_burst("0.5").is_err());
        assert_eq!(interval("0"), Ok(Duration::ZERO));
        assert_eq!(interval("0.5"), Ok(Duration::from_millis(500)));
        assert_eq!(interval("250ms"), Ok(Duration::from_millis(250)));
        assert!(interval("0.0001").is_err());
        assert!(interval("-1").is_err());
        assert!(interval("2h").is_err());
        assert!(probability("101%").is_err());
        assert!(probability("-1%").is_err());
    }

    #[test]
    fn across_options() {
        assert!(check_stream(&plan()).is_ok());
        let short = StreamPlan {
            duration: Some(Duration::from_millis(10)),
            ..plan()
        };
        assert_eq!(check_stream(&short).unwrap_err().0, "--duration");
        let many = StreamPlan {
            flows: 20_000,
            rtt: Duration::from_millis(1),
            duration: Some(Duration::from_millis(10)),
            ..plan()
        };
        let (opt, why) = check_stream(&many).unwrap_err();
        assert_eq!(opt, "--duration");
        assert!(why.contains("20000 flows") && why.contains("22ms"), "{why}");
        assert!(rate("-5mbit").unwrap_err().contains("negative"));
        let long_i = StreamPlan {
            interval: Duration::from_secs(11),
            ..plan()
        };
        assert_eq!(check_stream(&long_i).unwrap_err().0, "--interval");
        let fine_i = StreamPlan {
            interval: Duration::from_millis(1),
            duration: Some(Duration::from_secs(1000)),
            ..plan()
        };
        assert_eq!(check_stream(&fine_i).unwrap_err().0, "--interval");
        let huge = StreamPlan {
            flows: 20_000,
            duration: None,
            bytes: Some(100_000_000_000),
            ..plan()
        };
        assert_eq!(check_stream(&huge).unwrap_err().0, "--bytes");
    }
}
