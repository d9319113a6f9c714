//! The scenario file: a TOML document describing hosts, routers, the links between
//! them with a queue on each egress, the flows, and the checks a run must pass.
//!
//! ```toml
//! [run]
//! duration = "10s"          # virtual time the run lasts
//! seed = 1
//!
//! [quick]                   # overrides applied by --quick (the CI scale)
//! "run.duration" = "3s"
//!
//! [hosts.client]
//! cc = "cubic"              # net.ipv4.tcp_congestion_control of this host
//! sysctls = { "net.ipv4.tcp_ecn" = 1 }
//!
//! [hosts.server]
//!
//! [routers.r1]
//!
//! [links.access]
//! between = ["client", "r1"]
//! rate = "1gbit"
//! delay = "1ms"
//!
//! [links.bottleneck]
//! between = ["r1", "server"]
//! rate = "20mbit"
//! delay = "9ms"
//! queue = "fq_codel"        # each egress of the link; `forward`/`reverse` override
//!
//! [flows.bulk]
//! from = "client"
//! to = "server"
//! count = 2
//!
//! [flows.probe]
//! from = "client"
//! to = "server"
//! probe = { size = 100, interval = "100ms" }
//!
//! [flows.web]               # netperf TCP_RR-like transactions
//! from = "client"
//! to = "server"
//! rr = { request = 200, response = 20000, think = "10ms" }
//!
//! [flows.video]             # bulk for 2 s, silent for 1 s, in turn
//! from = "client"
//! to = "server"
//! on = "2s"
//! off = "1s"
//!
//! checks = ["flow.probe.delay_ms < 20"]   # (top level, before any table)
//! ```
//!
//! Durations take `ns`, `us`, `ms` or `s`; rates `bit`, `kbit`, `mbit`, `gbit`;
//! queues are written as `tc` names them, `NAME[,PARAM=VALUE]...`
//! ([`crate::qdisc::QdiscSpec::parse`]), with Linux's defaults for what is left out.

use serde::Deserialize;
use std::collections::BTreeMap;
use toml::{Table, Value};

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The checks the run must pass, each `FIGURE OP VALUE` (see
    /// [`crate::network::check`]), e.g. `"flow.a.goodput_mbps > 2 * flow.b.goodput_mbps"`.
    #[serde(default)]
    pub checks: Vec<String>,
    /// How long and with which seed.
    pub run: RunSpec,
    /// Overrides (`"path" = value`, as `--set path=value`) that `--quick` applies:
    /// the file's reduced scale.
    #[serde(default)]
    pub quick: Table,
    /// Hosts by name: each runs a lowtide stack and has exactly one link.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostSpec>,
    /// Routers by name: they forward packets by route through the egress queue.
    #[serde(default)]
    pub routers: BTreeMap<String, RouterSpec>,
    /// Links by name: a full-duplex link between two nodes.
    pub links: BTreeMap<String, LinkSpec>,
    /// Flows by name.
    pub flows: BTreeMap<String, FlowSpec>,
}

/// `[run]`: the run as a whole.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Virtual time the run lasts; a run whose flows are all fixed-size ends when
    /// they are done, and fails if they are not by then.
    pub duration: String,
    /// Seeds the stacks, the links' impairments, the qdiscs and the payload.
    #[serde(default = "one")]
    pub seed: u64,
    /// GRO on every host's receive path.
    #[serde(default = "yes")]
    pub gro: bool,
    /// Interrupt coalescing window of the hosts' receive path (`ethtool -C rx-usecs`).
    #[serde(default = "rx_usecs")]
    pub rx_usecs: String,
    /// Interval of the queues' time series (`"0s"`: none).
    #[serde(default = "series_interval")]
    pub series_interval: String,
}

/// `[hosts.NAME]`: a host (running lowtide in the simulator; see [`HostSpec::stack`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// `net.ipv4.tcp_congestion_control` (the flows' default on this host).
    pub cc: Option<String>,
    /// Sysctls by Linux's names (`"net.ipv4.tcp_ecn" = 1`); values as in
    /// `--config` files: strings, integers, booleans, arrays of integers.
    #[serde(default)]
    pub sysctls: Table,
    /// The NIC's `txqueuelen` (packets; default 1000).
    pub txqueuelen: Option<u32>,
    /// Whose TCP the host runs in `lowtide net run`: the kernel's (the default)
    /// or lowtide's. The simulator runs lowtide on every host.
    #[serde(default)]
    pub stack: HostStack,
}

/// A host's TCP in `lowtide net run` (`stack = "kernel"` or `"lowtide"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostStack {
    /// The kernel's own TCP, in a network namespace with a TUN device.
    #[default]
    Kernel,
    /// lowtide, in the `net run` process, on the emulated network in real time.
    Lowtide,
}

/// `[routers.NAME]`: a router.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterSpec {
    /// Static routes: destination host name -> next-hop node name (a neighbour).
    /// Destinations not listed go by the shortest path (fewest hops).
    #[serde(default)]
    pub routes: BTreeMap<String, String>,
    /// `txqueuelen` of the router's interfaces (packets; default 1000).
    pub txqueuelen: Option<u32>,
}

/// `[links.NAME]`: a full-duplex link. Its settings hold for both directions unless
/// `forward` (from `between[0]` to `between[1]`) or `reverse` overrides them.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// The two nodes it joins.
    pub between: [String; 2],
    /// Settings of both directions, written at the link's top level (`rate`,
    /// `delay`, ... beside `between`).
    #[serde(default)]
    pub both: DirSpec,
    /// Overrides for the direction `between[0]` -> `between[1]`.
    #[serde(default)]
    pub forward: DirSpec,
    /// Overrides for the direction `between[1]` -> `between[0]`.
    #[serde(default)]
    pub reverse: DirSpec,
}

/// One direction's settings (all optional: a link's own, then the defaults).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirSpec {
    /// Line rate (`"100mbit"`; default 1gbit).
    pub rate: Option<String>,
    /// One-way propagation delay (default 0).
    pub delay: Option<String>,
    /// Extra delay per packet, uniform in 0..jitter (netem's jitter).
    pub jitter: Option<String>,
    /// Loss probability per packet (0 to 1).
    pub loss: Option<f64>,
    /// Mean loss burst length in packets (above 1: a Gilbert model).
    pub loss_burst: Option<f64>,
    /// Probability a packet is held back so that later ones overtake it.
    pub reorder: Option<f64>,
    /// Probability a packet arrives twice.
    pub duplicate: Option<f64>,
    /// Probability one bit of a packet is flipped.
    pub corrupt: Option<f64>,
    /// The qdisc on the egress into this direction (default `pfifo_fast`: for TCP
    /// a pfifo of `txqueuelen` packets).
    pub queue: Option<String>,
}

/// `[flows.NAME]`: `count` alike TCP connections from one host to another. Bulk
/// (netperf TCP_STREAM) unless `bytes` or `probe` says otherwise.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// The sending host.
    pub from: String,
    /// The receiving host.
    pub to: String,
    /// `TCP_CONGESTION` set on the socket (default: the sending host's).
    pub cc: Option<String>,
    /// When it connects (default 0; the instances of `count` 1 µs apart).
    pub start: Option<String>,
    /// When a bulk sender stops writing and shuts down (default: the run's end).
    pub stop: Option<String>,
    /// Send this many bytes, then close (instead of bulk).
    pub bytes: Option<u64>,
    /// A latency probe (instead of bulk): `size` bytes every `interval` with
    /// `TCP_NODELAY`, each message's one-way delay measured from its write to its
    /// last byte's read.
    pub probe: Option<ProbeSpec>,
    /// Request/response transactions (instead of bulk, like netperf TCP_RR): the
    /// client writes `request` bytes, the server answers `response` bytes once it
    /// has read the whole request, and the client writes its next request `think`
    /// after reading the whole response; one transaction at a time.
    pub rr: Option<RrSpec>,
    /// On/off: bulk for `on`, silent (no writes) for `off`, in turn from `start`
    /// (both needed).
    pub on: Option<String>,
    /// See `on`.
    pub off: Option<String>,
    /// How many alike connections (default 1; named `NAME#0`, `NAME#1`, ...).
    #[serde(default = "one_u32")]
    pub count: u32,
    /// `TCP_NOTSENT_LOWAT` on the sending socket.
    pub notsent_lowat: Option<u32>,
}

/// A request/response flow's transactions.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrSpec {
    /// Bytes per request (client to server).
    pub request: u32,
    /// Bytes per response (server to client).
    pub response: u32,
    /// Time between a response's last byte read and the next request (default 0).
    pub think: Option<String>,
}

/// A latency probe's messages.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// Bytes per message.
    pub size: u32,
    /// Time between messages.
    pub interval: String,
}

fn one() -> u64 {
    1
}
fn one_u32() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn rx_usecs() -> String {
    "20us".into()
}
fn series_interval() -> String {
    "100ms".into()
}

impl ScenarioFile {
    /// Parses a scenario: the TOML text, then (if `quick`) the file's `[quick]`
    /// overrides, then `sets` (`path=value` each), then the typed schema.
    pub fn parse(text: &str, quick: bool, sets: &[String]) -> Result<ScenarioFile, String> {
        let mut doc = parse_toml(text)?;
        if quick {
            let overrides = match doc.get("quick") {
                Some(Value::Table(t)) => t.clone(),
                Some(_) => return Err("quick: must be a table".into()),
                None => Table::new(),
            };
            for (path, v) in overrides {
                set_path(&mut doc, &path, v).map_err(|e| format!("quick: {e}"))?;
            }
        }
        for s in sets {
            let (path, v) = s
                .split_once('=')
                .ok_or_else(|| format!("--set {s}: PATH=VALUE expected"))?;
            set_path(&mut doc, path.trim(), value_of(v.trim()))
                .map_err(|e| format!("--set {s}: {e}"))?;
        }
        links_both(&mut doc);
        Value::Table(doc)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().trim().to_string())
    }
}

/// Moves each link's own settings (all but `between`, `forward`, `reverse`) into
/// its `both` table, where [`LinkSpec`] reads them.
fn links_both(doc: &mut Table) {
    let Some(Value::Table(links)) = doc.get_mut("links") else {
        return;
    };
    for (_, link) in links.iter_mut() {
        let Value::Table(l) = link else { continue };
        let keys: Vec<String> = (l.keys())
            .filter(|k| !matches!(k.as_str(), "between" | "forward" | "reverse" | "both"))
            .cloned()
            .collect();
        let mut both = match l.remove("both") {
            Some(Value::Table(t)) => t,
            _ => Table::new(),
        };
        for k in keys {
            if let Some(v) = l.remove(&k) {
                both.insert(k, v);
            }
        }
        l.insert("both".into(), Value::Table(both));
    }
}

/// A TOML document as a table; an error names the line.
pub fn parse_toml(text: &str) -> Result<Table, String> {
    text.parse().map_err(|e: toml::de::Error| match e.span() {
        Some(span) => {
            let line = 1 + text[..span.start.min(text.len())].matches('\n').count();
            format!("line {line}: {}", e.message().trim())
        }
        None => e.message().trim().to_string(),
    })
}

/// A `--set` value: a TOML value if it reads as one (`3`, `0.5`, `true`,
/// `"text"`, `[1, 2]`), else the text itself.
fn value_of(text: &str) -> Value {
    let doc: Result<Table, _> = format!("v = {text}").parse();
    match doc.ok().and_then(|mut t| t.remove("v")) {
        Some(v) => v,
        None => Value::String(text.to_string()),
    }
}

/// Sets `doc[a][b]...[z] = v` for the dotted path `a.b....z`, creating tables on
/// the way; a path that runs into a value that is not a table is an error.
fn set_path(doc: &mut Table, path: &str, v: Value) -> Result<(), String> {
    let keys: Vec<&str> = path.split('.').collect();
    if keys.iter().any(|k| k.is_empty()) {
        return Err(format!("{path}: not a dotted path"));
    }
    let (last, inner) = keys.split_last().ok_or("empty path")?;
    let mut t = doc;
    for k in inner {
        let next = t
            .entry(k.to_string())
            .or_insert_with(|| Value::Table(Table::new()));
        t = match next {
            Value::Table(inner) => inner,
            _ => return Err(format!("{path}: {k} is not a table")),
        };
    }
    t.insert(last.to_string(), v);
    Ok(())
}

/// The sysctls of a table as (name, text value) pairs, as `sysctl -w` takes them:
/// strings as they are, integers, booleans as `1`/`0`, arrays of integers joined by
/// spaces; nested tables (unquoted dotted names) joined back with dots.
pub fn sysctl_pairs(t: &Table) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    flatten("", t, &mut out)?;
    Ok(out)
}

fn flatten(prefix: &str, t: &Table, out: &mut Vec<(String, String)>) -> Result<(), String> {
    for (k, v) in t {
        let name = match prefix {
            "" => k.clone(),
            p => format!("{p}.{k}"),
        };
        match v {
            Value::Table(inner) => flatten(&name, inner, out)?,
            v => {
                let text = text_form(&name, v)?;
                out.push((name, text));
            }
        }
    }
    Ok(())
}

/// The text form `Config::set` takes for a TOML value.
fn text_form(name: &str, v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Boolean(b) => Ok(if *b { "1" } else { "0" }.into()),
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Integer(i) => Ok(i.to_string()),
                _ => Err(format!("{name}: arrays may only hold integers")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join(" ")),
        other => Err(format!(
            "{name}: unsupported {} value (use a string, an integer or a boolean)",
            other.type_str()
        )),
    }
}

/// A duration (`"10ms"`; bare numbers are seconds) in nanoseconds
/// ([`crate::units::parse_duration`]).
pub fn duration_ns(v: &str) -> Result<u64, String> {
    let v = v.trim();
    let with_unit = match v.parse::<f64>() {
        Ok(_) => format!("{v}s"),
        Err(_) => v.to_string(),
    };
    crate::units::parse_duration(&with_unit).map(|d| d.as_nanos().min(u64::MAX as u128) as u64)
}

/// A rate (`"100mbit"`; bare numbers are bit/s) in bits per second
/// ([`crate::units::parse_rate`]: positive).
pub fn rate_bps(v: &str) -> Result<u64, String> {
    crate::units::parse_rate(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = r#"
        [run]
        duration = "2s"
        [quick]
        "run.duration" = "1s"
        [hosts.a]
        [hosts.b]
        [links.l]
        between = ["a", "b"]
        rate = "10mbit"
        [flows.f]
        from = "a"
        to = "b"
    "#;

    #[test]
    fn quick_and_set_override_in_order() {
        let f = ScenarioFile::parse(MIN, false, &[]).unwrap();
        assert_eq!(f.run.duration, "2s");
        assert_eq!(f.run.seed, 1);
        let f = ScenarioFile::parse(MIN, true, &[]).unwrap();
        assert_eq!(f.run.duration, "1s");
        let sets = ["run.duration=5s".to_string(), "flows.f.count=3".into()];
        let f = ScenarioFile::parse(MIN, true, &sets).unwrap();
        assert_eq!((f.run.duration.as_str(), f.flows["f"].count), ("5s", 3));
        let q = ["links.l.forward.queue=fq_codel,ecn=1".to_string()];
        let f = ScenarioFile::parse(MIN, false, &q).unwrap();
        assert_eq!(
            f.links["l"].forward.queue.as_deref(),
            Some("fq_codel,ecn=1")
        );
    }

    #[test]
    fn errors_name_the_problem() {
        let err = |text: &str, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            ScenarioFile::parse(text, false, &sets).unwrap_err()
        };
        assert!(err(MIN, &["flows.f.colour=red"]).contains("colour"));
        assert!(err(MIN, &["run.duration.x=1"]).contains("not a table"));
        assert!(err(MIN, &["nothing"]).contains("PATH=VALUE"));
        assert!(err("[run\n", &[]).starts_with("line 1"));
        assert!(err("[run]\nduration = \"1s\"\n", &[]).contains("links"));
    }

    #[test]
    fn units() {
        assert_eq!(duration_ns("10ms"), Ok(10_000_000));
        assert_eq!(duration_ns("2"), Ok(2_000_000_000));
        assert_eq!(duration_ns("1.5us"), Ok(1500));
        assert_eq!(rate_bps("20mbit"), Ok(20_000_000));
        assert_eq!(rate_bps("1GBIT"), Ok(1_000_000_000));
        assert!(duration_ns("-1s").is_err());
        assert!(rate_bps("fast").is_err());
    }

    #[test]
    fn sysctls_as_text() {
        let t: Table = r#"
            "net.ipv4.tcp_wmem" = [4096, 16384, 4194304]
            net.ipv4.tcp_ecn = 1
            "experimental.tsq" = false
        "#
        .parse()
        .unwrap();
        let mut got = sysctl_pairs(&t).unwrap();
        got.sort();
        let want = [
            ("experimental.tsq", "0"),
            ("net.ipv4.tcp_ecn", "1"),
            ("net.ipv4.tcp_wmem", "4096 16384 4194304"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
        let bad: Table = "x = 1.5".parse().unwrap();
        assert!(sysctl_pairs(&bad).unwrap_err().contains("unsupported"));
    }
}
