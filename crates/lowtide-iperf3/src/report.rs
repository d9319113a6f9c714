//! Renderers for a [`TestOutcome`]: iperf3's final text table and its `-J` JSON shape.

use std::fmt::Write;

use serde_json::{json, Map, Value};

use crate::interval::Interval;
use crate::outcome::{Role, StreamOutcome, TestOutcome};
use crate::protocol::IPERF_VERSION;

/// iperf3's adaptive units (`unit_snprintf` with `A`/`a`): `KBytes` etc. in powers of
/// 1024 for sizes, `Kbits` etc. in powers of 1000 for rates.
fn units(v: f64, base: f64, names: [&str; 4]) -> String {
    let (mut v, mut i) = (v, 0);
    while v >= base && i < 3 {
        v /= base;
        i += 1;
    }
    let num = if v < 9.995 {
        format!("{v:4.2}")
    } else if v < 99.95 {
        format!("{v:4.1}")
    } else {
        format!("{v:4.0}")
    };
    format!("{num} {}", names[i])
}

fn bytes_str(b: u64) -> String {
    units(b as f64, 1024.0, ["Bytes", "KBytes", "MBytes", "GBytes"])
}

fn rate_str(bytes: u64, secs: f64) -> String {
    units(
        bps(bytes, secs),
        1000.0,
        ["bits", "Kbits", "Mbits", "Gbits"],
    )
}

fn bps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs
    } else {
        0.0
    }
}

fn line(id: &str, secs: f64, bytes: u64, retr: Option<u64>, who: &str) -> String {
    let retr = retr.map_or_else(|| "   ".to_string(), |r| format!("{r:3}"));
    format!(
        "[{id}] {:6.2}-{:<6.2} sec  {}  {}/sec  {retr}             {who}\n",
        0.0,
        secs,
        bytes_str(bytes),
        rate_str(bytes, secs)
    )
}

/// One interval as iperf3 prints it (`print_interval_results`): the column header
/// before the first interval of a period (else, with several streams, a separator),
/// a line per stream (`Retr` and `Cwnd` on the sending side), `[SUM]` with several
/// streams, `(omitted)` on the omitted ones.
pub fn text_interval(iv: &Interval) -> String {
    let mut s = String::new();
    let many = iv.streams.len() > 1;
    if iv.first() {
        s.push_str(match iv.sender {
            true => "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n",
            false => "[ ID] Interval           Transfer     Bitrate\n",
        });
    } else if many {
        s.push_str(SEPARATOR);
    }
    let omitted = if iv.omitted { "(omitted)" } else { "" };
    let secs = iv.seconds();
    let head = |id: &str, bytes: u64| {
        format!(
            "[{id}] {:6.2}-{:<6.2} sec  {}  {}/sec",
            iv.start,
            iv.end,
            bytes_str(bytes),
            rate_str(bytes, secs)
        )
    };
    for st in &iv.streams {
        let h = head(&format!("{:3}", st.id), st.bytes);
        let _ = match st.retransmits {
            Some(r) => writeln!(
                s,
                "{h}  {r:3}   {}       {omitted}",
                bytes_str(st.stats.snd_cwnd_bytes)
            ),
            None => writeln!(s, "{h}                  {omitted}"),
        };
    }
    if many {
        let h = head("SUM", iv.bytes());
        let _ = match iv.retransmits() {
            Some(r) => writeln!(s, "{h}  {r:3}             {omitted}"),
            None => writeln!(s, "{h}                  {omitted}"),
        };
    }
    s
}

const SEPARATOR: &str = "- - - - - - - - - - - - - - - - - - - - - - - - -\n";

/// iperf3's final table: a sender and a receiver line per stream, and `[SUM]` lines
/// with more than one stream; then `iperf Done.` if the test succeeded (the error of
/// a failed one is not part of it: iperf3 prints errors on stderr).
pub fn text_report(o: &TestOutcome) -> String {
    let mut s = String::new();
    if !o.streams.is_empty() {
        s.push_str(SEPARATOR);
        s.push_str("[ ID] Interval           Transfer     Bitrate         Retr\n");
    }
    for st in &o.streams {
        let id = format!("{:3}", st.id);
        s += &line(
            &id,
            st.sender_seconds(),
            st.sent_bytes().unwrap_or(0),
            st.retransmits,
            "sender",
        );
        s += &line(
            &id,
            st.receiver_seconds(),
            st.received_bytes().unwrap_or(0),
            None,
            "receiver",
        );
    }
    if o.streams.len() > 1 {
        let (sent, recv) = sums(o);
        s += &line("SUM", sent.seconds, sent.bytes, sent.retransmits, "sender");
        s += &line("SUM", recv.seconds, recv.bytes, None, "receiver");
    }
    // An error is the driver's to print (on stderr, as iperf3 prints its errors).
    if o.error.is_none() && !o.streams.is_empty() {
        s.push_str("\niperf Done.\n");
    }
    s
}

/// Totals over all streams.
struct Sum {
    bytes: u64,
    seconds: f64,
    retransmits: Option<u64>,
}

fn sums(o: &TestOutcome) -> (Sum, Sum) {
    let max = |f: fn(&StreamOutcome) -> f64| o.streams.iter().map(f).fold(0.0, f64::max);
    let retr: Option<u64> = o.streams.iter().map(|s| s.retransmits).sum();
    (
        Sum {
            bytes: o.sum_sent(),
            seconds: max(StreamOutcome::sender_seconds),
            retransmits: retr,
        },
        Sum {
            bytes: o.sum_received(),
            seconds: max(StreamOutcome::receiver_seconds),
            retransmits: None,
        },
    )
}

fn interval(secs: f64, bytes: u64, retr: Option<u64>, sender: bool, socket: Option<u32>) -> Value {
    let mut m = Map::new();
    if let Some(id) = socket {
        m.insert("socket".into(), json!(id));
    }
    m.insert("start".into(), json!(0));
    m.insert("end".into(), json!(secs));
    m.insert("seconds".into(), json!(secs));
    m.insert("bytes".into(), json!(bytes));
    m.insert("bits_per_second".into(), json!(bps(bytes, secs)));
    if let Some(r) = retr {
        m.insert("retransmits".into(), json!(r));
    }
    m.insert("sender".into(), json!(sender));
    Value::Object(m)
}

fn connected(o: &TestOutcome) -> Vec<Value> {
    o.streams
        .iter()
        .map(|s| {
            json!({
                "socket": s.id,
                "local_host": s.local_addr.map(|a| a.ip().to_string()),
                "local_port": s.local_addr.map(|a| a.port()),
                "remote_host": s.peer_addr.map(|a| a.ip().to_string()),
                "remote_port": s.peer_addr.map(|a| a.port()),
            })
        })
        .collect()
}

fn start(o: &TestOutcome) -> Value {
    let p = &o.params;
    let mut m = Map::new();
    m.insert("connected".into(), Value::Array(connected(o)));
    m.insert(
        "version".into(),
        json!(format!("lowtide-iperf3 (iperf {IPERF_VERSION} protocol)")),
    );
    if let (Role::Client, Some(a)) = (o.role, o.control_peer) {
        m.insert(
            "connecting_to".into(),
            json!({"host": a.ip().to_string(), "port": a.port()}),
        );
    }
    if let (Role::Server, Some(a)) = (o.role, o.control_peer) {
        m.insert(
            "accepted_connection".into(),
            json!({"host": a.ip().to_string(), "port": a.port()}),
        );
    }
    m.insert("cookie".into(), json!(o.cookie));
    m.insert(
        "test_start".into(),
        json!({
            "protocol": "TCP", "num_streams": p.parallel, "blksize": p.len, "omit": p.omit,
            "duration": p.time, "bytes": p.num, "blocks": p.blockcount,
            "reverse": u8::from(p.reverse), "tos": 0, "target_bitrate": p.bandwidth,
        }),
    );
    Value::Object(m)
}

fn cpu(o: &TestOutcome) -> Value {
    let f = |v: &Option<Value>, k: &str| v.as_ref().and_then(|v| v.get(k)?.as_f64()).unwrap_or(0.0);
    let (l, r) = (&o.local_results, &o.peer_results);
    json!({
        "host_total": f(l, "cpu_util_total"), "host_user": f(l, "cpu_util_user"),
        "host_system": f(l, "cpu_util_system"), "remote_total": f(r, "cpu_util_total"),
        "remote_user": f(r, "cpu_util_user"), "remote_system": f(r, "cpu_util_system"),
    })
}

/// An interval in iperf3's `-J` shape: `streams` (`socket`, `start`, `end`,
/// `seconds`, `bytes`, `bits_per_second`, and on the sending side `retransmits`,
/// `snd_cwnd`, `rtt`, `rttvar`; `omitted`, `sender`) and their `sum`.
fn json_interval(iv: &Interval) -> Value {
    let secs = iv.seconds();
    let streams: Vec<Value> = iv
        .streams
        .iter()
        .map(|st| {
            let mut m = Map::new();
            m.insert("socket".into(), json!(st.id));
            m.insert("start".into(), json!(iv.start));
            m.insert("end".into(), json!(iv.end));
            m.insert("seconds".into(), json!(secs));
            m.insert("bytes".into(), json!(st.bytes));
            m.insert("bits_per_second".into(), json!(bps(st.bytes, secs)));
            if let Some(r) = st.retransmits {
                m.insert("retransmits".into(), json!(r));
                m.insert("snd_cwnd".into(), json!(st.stats.snd_cwnd_bytes));
                m.insert("rtt".into(), json!(st.stats.rtt_us));
                m.insert("rttvar".into(), json!(st.stats.rttvar_us));
            }
            m.insert("omitted".into(), json!(iv.omitted));
            m.insert("sender".into(), json!(iv.sender));
            Value::Object(m)
        })
        .collect();
    let mut sum = Map::new();
    sum.insert("start".into(), json!(iv.start));
    sum.insert("end".into(), json!(iv.end));
    sum.insert("seconds".into(), json!(secs));
    sum.insert("bytes".into(), json!(iv.bytes()));
    sum.insert("bits_per_second".into(), json!(bps(iv.bytes(), secs)));
    if let Some(r) = iv.retransmits() {
        sum.insert("retransmits".into(), json!(r));
    }
    sum.insert("omitted".into(), json!(iv.omitted));
    sum.insert("sender".into(), json!(iv.sender));
    json!({"streams": streams, "sum": sum})
}

/// The outcome in iperf3's `-J` shape: `start` (`connected`, `test_start`, ...),
/// `intervals` (one per `-i`, omitted ones flagged), `end` (`streams` with `sender` and
/// `receiver`, `sum_sent` from the sender's counts, `sum_received` from the
/// receiver's, `cpu_utilization_percent`), and `error` when the test failed.
pub fn json_report(o: &TestOutcome) -> Value {
    let me = o.local_sender();
    let streams: Vec<Value> = o
        .streams
        .iter()
        .map(|s| {
            json!({
                "sender": interval(s.sender_seconds(), s.sent_bytes().unwrap_or(0), s.retransmits, me, Some(s.id)),
                "receiver": interval(s.receiver_seconds(), s.received_bytes().unwrap_or(0), None, me, Some(s.id)),
            })
        })
        .collect();
    let (sent, recv) = sums(o);
    let mut root = Map::new();
    root.insert("start".into(), start(o));
    let intervals: Vec<Value> = o.intervals.iter().map(json_interval).collect();
    root.insert("intervals".into(), Value::Array(intervals));
    root.insert(
        "end".into(),
        json!({
            "streams": streams,
            "sum_sent": interval(sent.seconds, sent.bytes, sent.retransmits.or(Some(0)), me, None),
            "sum_received": interval(recv.seconds, recv.bytes, None, me, None),
            "cpu_utilization_percent": cpu(o),
        }),
    );
    if let Some(e) = &o.error {
        root.insert("error".into(), json!(e.to_string()));
    }
    Value::Object(root)
}
