//! iperf3's text layout (iperf 3.x, `iperf_locale.c` and `units.c`), for every
//! command that reports a transfer the way iperf3 does: the connection lines, the
//! interval lines of `-i` (with `[SUM]` lines and separators for several streams)
//! and the sender/receiver summary. Numbers go in as plain values (bytes, bits per
//! second, seconds), so the simulator and the real path share the same lines.

use std::fmt::Write;

/// Between intervals of several streams, and before the summary.
pub const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - -";
/// Above the interval lines of a sender.
pub const HEADER_INTERVALS: &str =
    "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd";
/// Above the summary lines.
pub const HEADER_SUMMARY: &str = "[ ID] Interval           Transfer     Bitrate         Retr";

/// iperf3's `unit_snprintf`: a number in 4 places and an adaptive unit, 1024-based
/// for bytes (`Bytes`, `KBytes`, ...), 1000-based for bits (`bits`, `Kbits`, ...).
fn unit(v: f64, bytes: bool) -> String {
    const BYTE: [&str; 5] = ["Byte", "KByte", "MByte", "GByte", "TByte"];
    const BIT: [&str; 5] = ["bit", "Kbit", "Mbit", "Gbit", "Tbit"];
    let base = if bytes { 1024.0 } else { 1000.0 };
    let (mut v, mut i) = (v, 0);
    while v >= base && i < 4 {
        v /= base;
        i += 1;
    }
    let label = if bytes { BYTE[i] } else { BIT[i] };
    // "print such that we always fit in 4 places"
    match v {
        v if v < 9.995 => format!("{v:4.2} {label}"),
        v if v < 99.95 => format!("{v:4.1} {label}"),
        v => format!("{v:4.0} {label}"),
    }
}

/// A byte count as iperf3 prints it ("12.0 MBytes").
pub fn bytes(b: u64) -> String {
    unit(b as f64, true) + "s"
}

/// A bit rate as iperf3 prints it ("101 Mbits/sec").
pub fn rate(bits_per_second: f64) -> String {
    unit(bits_per_second, false) + "s/sec"
}

/// `Connecting to host HOST, port PORT`.
pub fn connecting(host: &str, port: u16) -> String {
    format!("Connecting to host {host}, port {port}")
}

/// `[ID] local A port P connected to B port Q`.
pub fn connected(id: u32, local: &str, lport: u16, remote: &str, rport: u16) -> String {
    format!("[{id:>3}] local {local} port {lport} connected to {remote} port {rport}")
}

/// What one line reports: a stream (`Some(id)`) or the sum (`None`), over
/// `start..end` seconds.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// Stream id, or `None` for `[SUM]`.
    pub id: Option<u32>,
    /// Start (s).
    pub start: f64,
    /// End (s).
    pub end: f64,
    /// Bytes in the span.
    pub bytes: u64,
    /// Bits per second.
    pub bits_per_second: f64,
}

fn prefix(s: &Span) -> String {
    let id = match s.id {
        Some(id) => format!("[{id:>3}] "),
        None => "[SUM] ".to_string(),
    };
    format!(
        "{id}{:6.2}-{:<6.2} sec  {}  {}",
        s.start,
        s.end,
        bytes(s.bytes),
        rate(s.bits_per_second)
    )
}

/// A sender's interval line: a stream's with `Cwnd` (bytes), the sum's without.
pub fn interval(s: &Span, retr: u64, cwnd: Option<u64>) -> String {
    match (s.id, cwnd) {
        (Some(_), Some(c)) => format!("{}  {retr:>3}   {}       ", prefix(s), bytes(c)),
        _ => format!("{}  {retr:>3}             ", prefix(s)),
    }
}

/// The summary's `sender` line.
pub fn sender(s: &Span, retr: u64) -> String {
    format!("{}  {retr:>3}             sender", prefix(s))
}

/// The summary's `receiver` line.
pub fn receiver(s: &Span) -> String {
    format!("{}                  receiver", prefix(s))
}

/// Appends `line` and a newline.
pub fn push(out: &mut String, line: &str) {
    let _ = writeln!(out, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the real iperf3 3.12 printed them (-P 2 -i 1 over loopback).
    #[test]
    fn lines_match_iperf3() {
        let s = Span {
            id: Some(5),
            start: 0.0,
            end: 1.0,
            bytes: 12_582_912,
            bits_per_second: 100.66e6,
        };
        assert_eq!(
            interval(&s, 0, Some(654_336)),
            "[  5]   0.00-1.00   sec  12.0 MBytes   101 Mbits/sec    0    639 KBytes       "
        );
        let sum = Span {
            id: None,
            bytes: 25_165_824,
            bits_per_second: 201.3e6,
            ..s
        };
        assert_eq!(
            interval(&sum, 0, None),
            "[SUM]   0.00-1.00   sec  24.0 MBytes   201 Mbits/sec    0             "
        );
        let total = Span {
            id: Some(7),
            start: 0.0,
            end: 2.0,
            bytes: 25_060_966,
            bits_per_second: 99.6e6,
        };
        assert_eq!(
            sender(&total, 1),
            "[  7]   0.00-2.00   sec  23.9 MBytes  99.6 Mbits/sec    1             sender"
        );
        assert_eq!(
            receiver(&total),
            "[  7]   0.00-2.00   sec  23.9 MBytes  99.6 Mbits/sec                  receiver"
        );
        assert_eq!(
            connected(5, "127.0.0.1", 42368, "127.0.0.1", 5399),
            "[  5] local 127.0.0.1 port 42368 connected to 127.0.0.1 port 5399"
        );
    }

    #[test]
    fn units_fit_in_four_places() {
        assert_eq!(bytes(512), " 512 Bytes");
        assert_eq!(bytes(1023), "1023 Bytes");
        assert_eq!(bytes(1024), "1.00 KBytes");
        assert_eq!(bytes(10_189_619), "9.72 MBytes");
        assert_eq!(rate(9.996e6), "10.0 Mbits/sec");
        assert_eq!(rate(941e6), " 941 Mbits/sec");
        assert_eq!(rate(0.0), "0.00 bits/sec");
        assert_eq!(rate(1.5e12), "1.50 Tbits/sec");
    }
}
