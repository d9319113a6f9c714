//! A scenario file checked and resolved: nodes with addresses and stacks'
//! configurations, one port per link direction with its settings and queue, routes
//! (given, else the fewest hops), and the flows one by one with their paths.

use super::check::Check;
use super::schema::{duration_ns, rate_bps, sysctl_pairs, DirSpec, LinkSpec, ScenarioFile};
use crate::payload::PayloadMode;
use crate::qdisc::{HostAddr, QdiscSpec};
use lowtide::Config;
use lowtide_link::LinkConfig;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};

/// `txqueuelen` of a device the file does not size (Linux's for Ethernet).
pub const DEFAULT_TXQUEUELEN: u32 = 1000;

/// What a node is.
#[derive(Debug, Clone)]
pub enum NodeKind {
    /// A host: its stack's configuration and its address.
    Host {
        /// The stack's sysctls.
        config: Box<Config>,
        /// Its address.
        addr: IpAddr,
    },
    /// A router.
    Router,
}

/// One node.
#[derive(Debug, Clone)]
pub struct NodeDef {
    /// Its name in the file.
    pub name: String,
    /// Host or router.
    pub kind: NodeKind,
    /// `txqueuelen` of its interfaces.
    pub txqueuelen: u32,
}

/// One link direction and the queue in front of it, at its source node.
#[derive(Debug, Clone)]
pub struct PortDef {
    /// `SRC->DST` (node names).
    pub name: String,
    /// The node that transmits.
    pub src: usize,
    /// The node that receives.
    pub dst: usize,
    /// Rate, delay, impairments.
    pub link: LinkConfig,
    /// The egress qdisc.
    pub queue: QdiscSpec,
}

/// One flow (an instance of a `[flows.NAME]` with its `count`).
#[derive(Debug, Clone)]
pub struct FlowDef {
    /// `NAME`, or `NAME#i` when the file asks for more than one.
    pub name: String,
    /// The `[flows.NAME]` it comes from.
    pub group: String,
    /// Sending host (node index).
    pub from: usize,
    /// Receiving host (node index).
    pub to: usize,
    /// `TCP_CONGESTION`, if set.
    pub cc: Option<String>,
    /// When it connects (ns).
    pub start_ns: u64,
    /// When a bulk sender stops (ns), if before the run's end.
    pub stop_ns: Option<u64>,
    /// A fixed-size transfer's bytes.
    pub bytes: Option<u64>,
    /// A probe's message size and interval (ns).
    pub probe: Option<(u32, u64)>,
    /// Request/response transactions.
    pub rr: Option<RrDef>,
    /// On/off: (on, off) durations (ns).
    pub onoff: Option<(u64, u64)>,
    /// `TCP_NOTSENT_LOWAT`.
    pub notsent_lowat: Option<u32>,
    /// The ports its data crosses, in order.
    pub path: Vec<usize>,
}

/// Bit set in a request/response flow's id for its responses' payload: flow
/// `i`'s responses are the stream `Payload::new(seed, i | RESPONSE_STREAM)`, in
/// the simulator and in `lowtide net run` alike.
pub const RESPONSE_STREAM: u32 = 1 << 31;

/// A request/response flow's transactions, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrDef {
    /// Bytes per request.
    pub request: u32,
    /// Bytes per response.
    pub response: u32,
    /// Think time after a response (ns).
    pub think_ns: u64,
}

/// The resolved scenario.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Hosts first, then routers, each sorted by name.
    pub nodes: Vec<NodeDef>,
    /// Two per link, forward then reverse, links sorted by name.
    pub ports: Vec<PortDef>,
    /// `next_hop[node][host]`: the port `node` sends packets for `host` on.
    pub next_hop: Vec<Vec<Option<usize>>>,
    /// Every flow instance.
    pub flows: Vec<FlowDef>,
    /// The checks.
    pub checks: Vec<Check>,
    /// Run length (ns).
    pub duration_ns: u64,
    /// The seed.
    pub seed: u64,
    /// GRO on the hosts.
    pub gro: bool,
    /// Hosts' interrupt coalescing (ns).
    pub rx_usecs_ns: u64,
    /// Interval of the queues' time series (ns; 0: none).
    pub series_interval_ns: u64,
    /// How the senders hand their bytes to their sockets (`sim run --payload`; not
    /// a setting of the file: every figure is the same in both modes).
    pub payload: PayloadMode,
}

impl Topology {
    /// Checks and resolves `f`; errors say what is wrong and where.
    pub fn new(f: &ScenarioFile) -> Result<Topology, String> {
        let nodes = nodes(f)?;
        let index: BTreeMap<&str, usize> = (nodes.iter().enumerate())
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        let mut ports = Vec::new();
        let host_addr = |name: &str| {
            let n = &nodes[*index.get(name)?];
            match n.kind {
                NodeKind::Host { addr, .. } => Some(addr),
                NodeKind::Router => None,
            }
        };
        for (name, l) in &f.links {
            let p = link_ports(l, &index, &host_addr).map_err(|e| format!("links.{name}: {e}"))?;
            ports.extend(p);
        }
        let hosts = (nodes.iter())
            .filter(|n| matches!(n.kind, NodeKind::Host { .. }))
            .count();
        for (i, n) in nodes.iter().enumerate().take(hosts) {
            let links = ports.iter().filter(|p| p.src == i).count();
            if links != 1 {
                return Err(format!("hosts.{}: has {links} links (one needed)", n.name));
            }
        }
        let next_hop = routes(f, &nodes, &ports, hosts, &index)?;
        let duration_ns = duration_ns(&f.run.duration).map_err(|e| format!("run.duration: {e}"))?;
        if duration_ns == 0 {
            return Err("run.duration: must be positive".into());
        }
        let mut flows = Vec::new();
        for (name, spec) in &f.flows {
            let defs = flow_defs(name, spec, &index, hosts, &next_hop, &ports, duration_ns)
                .map_err(|e| format!("flows.{name}: {e}"))?;
            flows.extend(defs);
        }
        if flows.is_empty() {
            return Err("flows: at least one flow is needed".into());
        }
        let series = duration_ns_of("run.series_interval", &f.run.series_interval)?;
        if series != 0 && (series < 1_000_000 || duration_ns / series > 1_000_000) {
            return Err(
                "run.series_interval: 0 (none), or 1ms or more and a million samples at most"
                    .into(),
            );
        }
        let checks = (f.checks.iter())
            .map(|c| Check::parse(c).map_err(|e| format!("checks: {c}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        let t = Topology {
            nodes,
            ports,
            next_hop,
            flows,
            checks,
            duration_ns,
            seed: f.run.seed,
            gro: f.run.gro,
            rx_usecs_ns: duration_ns_of("run.rx_usecs", &f.run.rx_usecs)?,
            series_interval_ns: series,
            payload: PayloadMode::Stored,
        };
        for c in &t.checks {
            c.validate(&t)
                .map_err(|e| format!("checks: {}: {e}", c.text))?;
        }
        Ok(t)
    }

    /// The port named `SRC->DST`.
    pub fn port_by_name(&self, name: &str) -> Option<usize> {
        self.ports.iter().position(|p| p.name == name)
    }
}

fn duration_ns_of(what: &str, v: &str) -> Result<u64, String> {
    duration_ns(v).map_err(|e| format!("{what}: {e}"))
}

/// A name usable in a check: letters, digits, `_` and `-`.
fn valid_name(s: &str) -> bool {
    !s.is_empty() && (s.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The nodes: hosts (addresses 10.0.0.1 up, in name order) then routers.
fn nodes(f: &ScenarioFile) -> Result<Vec<NodeDef>, String> {
    let mut nodes = Vec::new();
    if f.hosts.len() > 60_000 {
        return Err("hosts: at most 60000".into());
    }
    for (i, (name, h)) in f.hosts.iter().enumerate() {
        let mut config = Config::default();
        let mut apply = || -> Result<(), String> {
            for (k, v) in sysctl_pairs(&h.sysctls)? {
                config.set(&k, &v).map_err(|e| e.to_string())?;
            }
            if let Some(cc) = &h.cc {
                let k = "net.ipv4.tcp_congestion_control";
                config.set(k, cc).map_err(|e| e.to_string())?;
            }
            Ok(())
        };
        apply().map_err(|e| format!("hosts.{name}: {e}"))?;
        let n = i as u32 + 1;
        let addr = IpAddr::V4(Ipv4Addr::new(10, 0, (n >> 8) as u8, n as u8));
        nodes.push(NodeDef {
            name: name.clone(),
            kind: NodeKind::Host {
                config: Box::new(config),
                addr,
            },
            txqueuelen: h.txqueuelen.unwrap_or(DEFAULT_TXQUEUELEN),
        });
    }
    for (name, r) in &f.routers {
        if f.hosts.contains_key(name) {
            return Err(format!("routers.{name}: a host has that name"));
        }
        nodes.push(NodeDef {
            name: name.clone(),
            kind: NodeKind::Router,
            txqueuelen: r.txqueuelen.unwrap_or(DEFAULT_TXQUEUELEN),
        });
    }
    if let Some(n) = nodes.iter().find(|n| !valid_name(&n.name)) {
        return Err(format!("{}: names take letters, digits, _ and -", n.name));
    }
    Ok(nodes)
}

/// The two ports of link `l`.
fn link_ports(
    l: &LinkSpec,
    index: &BTreeMap<&str, usize>,
    hosts: HostAddr,
) -> Result<[PortDef; 2], String> {
    let node = |n: &str| index.get(n).copied().ok_or(format!("{n}: no such node"));
    let (a, b) = (node(&l.between[0])?, node(&l.between[1])?);
    if a == b {
        return Err("a link joins two different nodes".into());
    }
    let port = |src: usize, dst: usize, over: &DirSpec, dir: &str| -> Result<PortDef, String> {
        let (link, queue) = dir_config(&l.both, over, hosts).map_err(|e| format!("{dir}: {e}"))?;
        let names = [&l.between[0], &l.between[1]];
        let (s, d) = if src == a {
            (names[0], names[1])
        } else {
            (names[1], names[0])
        };
        Ok(PortDef {
            name: format!("{s}->{d}"),
            src,
            dst,
            link,
            queue,
        })
    };
    Ok([
        port(a, b, &l.forward, "forward")?,
        port(b, a, &l.reverse, "reverse")?,
    ])
}

/// One direction's link settings and queue: `over`'s, else `both`'s, else the
/// defaults (1 Gbit/s, no delay, no impairment, `pfifo_fast`); a queue's filters
/// may name `hosts`.
fn dir_config(
    both: &DirSpec,
    over: &DirSpec,
    hosts: HostAddr,
) -> Result<(LinkConfig, QdiscSpec), String> {
    let pick_s = |a: &Option<String>, b: &Option<String>| a.clone().or_else(|| b.clone());
    let pick_f = |a: Option<f64>, b: Option<f64>| a.or(b);
    let rate = match pick_s(&over.rate, &both.rate) {
        Some(r) => rate_bps(&r).map_err(|e| format!("rate: {e}"))?,
        None => 1_000_000_000,
    };
    if rate == 0 {
        return Err("rate: must be positive".into());
    }
    let time = |what: &str, v: Option<String>| match v {
        Some(v) => duration_ns(&v).map_err(|e| format!("{what}: {e}")),
        None => Ok(0),
    };
    let prob = |what: &str, v: Option<f64>| match v.unwrap_or(0.0) {
        p if (0.0..=1.0).contains(&p) => Ok(p),
        p => Err(format!("{what}: {p} is not a probability (0 to 1)")),
    };
    let link = LinkConfig {
        rate_bps: rate,
        delay_ns: time("delay", pick_s(&over.delay, &both.delay))?,
        jitter_ns: time("jitter", pick_s(&over.jitter, &both.jitter))?,
        loss: prob("loss", pick_f(over.loss, both.loss))?,
        loss_burst: pick_f(over.loss_burst, both.loss_burst).unwrap_or(1.0),
        reorder: prob("reorder", pick_f(over.reorder, both.reorder))?,
        reorder_delay_ns: None,
        duplicate: prob("duplicate", pick_f(over.duplicate, both.duplicate))?,
        corrupt: prob("corrupt", pick_f(over.corrupt, both.corrupt))?,
    };
    let queue = match pick_s(&over.queue, &both.queue) {
        Some(q) => QdiscSpec::parse_with(&q, hosts).map_err(|e| format!("queue: {e}"))?,
        None => QdiscSpec::PfifoFast,
    };
    Ok((link, queue))
}

/// `next_hop[node][host]`: the given routes, else a port towards a neighbour
/// fewest hops from the host (ties: the port listed first).
fn routes(
    f: &ScenarioFile,
    nodes: &[NodeDef],
    ports: &[PortDef],
    hosts: usize,
    index: &BTreeMap<&str, usize>,
) -> Result<Vec<Vec<Option<usize>>>, String> {
    let mut next = vec![vec![None; hosts]; nodes.len()];
    for h in 0..hosts {
        let dist = hops_to(h, nodes.len(), ports);
        for (n, row) in next.iter_mut().enumerate() {
            if n == h || dist[n] == usize::MAX {
                continue;
            }
            row[h] = (ports.iter().enumerate())
                .filter(|(_, p)| p.src == n && dist[p.dst] == dist[n] - 1)
                .map(|(i, _)| i)
                .next();
        }
    }
    for (rname, r) in &f.routers {
        let n = index[rname.as_str()];
        for (dst, via) in &r.routes {
            let err = |why: &str| format!("routers.{rname}.routes.{dst}: {why}");
            let h = index.get(dst.as_str()).copied().filter(|&h| h < hosts);
            let h = h.ok_or_else(|| err("no such host"))?;
            let v = index.get(via.as_str()).ok_or_else(|| err("no such node"))?;
            let p = (ports.iter()).position(|p| p.src == n && p.dst == *v);
            next[n][h] = Some(p.ok_or_else(|| err("next hop is not a neighbour"))?);
        }
    }
    Ok(next)
}

/// Hops from every node to node `h` (`usize::MAX`: unreachable), by a
/// breadth-first search backwards over the ports.
fn hops_to(h: usize, n: usize, ports: &[PortDef]) -> Vec<usize> {
    let mut dist = vec![usize::MAX; n];
    dist[h] = 0;
    let mut q = VecDeque::from([h]);
    while let Some(x) = q.pop_front() {
        for p in ports.iter().filter(|p| p.dst == x) {
            if dist[p.src] == usize::MAX {
                dist[p.src] = dist[x] + 1;
                q.push_back(p.src);
            }
        }
    }
    dist
}

/// The ports from `from` to host `to` by the routes; an error for no route or a
/// loop.
pub fn path(
    from: usize,
    to: usize,
    next_hop: &[Vec<Option<usize>>],
    ports: &[PortDef],
) -> Result<Vec<usize>, String> {
    let mut at = from;
    let mut out = Vec::new();
    while at != to {
        let p = next_hop[at][to].ok_or("no route")?;
        out.push(p);
        at = ports[p].dst;
        if out.len() > next_hop.len() {
            return Err("the routes loop".into());
        }
    }
    Ok(out)
}

fn flow_defs(
    name: &str,
    s: &super::schema::FlowSpec,
    index: &BTreeMap<&str, usize>,
    hosts: usize,
    next_hop: &[Vec<Option<usize>>],
    ports: &[PortDef],
    duration_ns: u64,
) -> Result<Vec<FlowDef>, String> {
    if !valid_name(name) {
        return Err("names take letters, digits, _ and -".into());
    }
    let host = |n: &str| match index.get(n) {
        Some(&i) if i < hosts => Ok(i),
        _ => Err(format!("{n}: no such host")),
    };
    let (from, to) = (host(&s.from)?, host(&s.to)?);
    if from == to {
        return Err("from and to are the same host".into());
    }
    let fwd = path(from, to, next_hop, ports)?;
    path(to, from, next_hop, ports).map_err(|e| format!("{e} back"))?;
    let start = match &s.start {
        Some(v) => duration_ns_of("start", v)?,
        None => 0,
    };
    let stop = match &s.stop {
        Some(v) => Some(duration_ns_of("stop", v)?).filter(|&t| t < duration_ns),
        None => None,
    };
    if stop.is_some_and(|t| t <= start) {
        return Err("stop must come after start".into());
    }
    let onoff = match (&s.on, &s.off) {
        (None, None) => None,
        (Some(on), Some(off)) => {
            let (on, off) = (duration_ns_of("on", on)?, duration_ns_of("off", off)?);
            if on == 0 || off == 0 {
                return Err("on and off must be positive".into());
            }
            Some((on, off))
        }
        _ => return Err("on and off go together".into()),
    };
    let kinds = [
        s.bytes.is_some(),
        s.probe.is_some(),
        s.rr.is_some(),
        onoff.is_some(),
    ];
    if kinds.iter().filter(|&&k| k).count() > 1 || (stop.is_some() && kinds[0]) {
        return Err("one of bulk (with stop), bytes, probe, rr or on/off".into());
    }
    let rr = match &s.rr {
        Some(r) => {
            if r.request == 0 || r.response == 0 {
                return Err("rr: request and response must be positive".into());
            }
            let think_ns = match &r.think {
                Some(t) => duration_ns_of("rr.think", t)?,
                None => 0,
            };
            Some(RrDef {
                request: r.request,
                response: r.response,
                think_ns,
            })
        }
        None => None,
    };
    let probe = match &s.probe {
        Some(p) => {
            let iv = duration_ns_of("probe.interval", &p.interval)?;
            if iv == 0 || p.size == 0 {
                return Err("probe: size and interval must be positive".into());
            }
            Some((p.size, iv))
        }
        None => None,
    };
    if s.count == 0 || s.count > 20_000 {
        return Err("count: 1 to 20000".into());
    }
    Ok((0..s.count)
        .map(|i| FlowDef {
            name: match s.count {
                1 => name.to_string(),
                _ => format!("{name}#{i}"),
            },
            group: name.to_string(),
            from,
            to,
            cc: s.cc.clone(),
            start_ns: start + i as u64 * 1_000,
            stop_ns: stop,
            bytes: s.bytes,
            probe,
            rr,
            onoff,
            notsent_lowat: s.notsent_lowat,
            path: fwd.clone(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(text: &str) -> Result<Topology, String> {
        Topology::new(&ScenarioFile::parse(text, false, &[])?)
    }

    const DUMBBELL: &str = r#"
        [run]
        duration = "1s"
        [hosts.a1]
        [hosts.a2]
        [hosts.b]
        [routers.r1]
        [routers.r2]
        [links.x1]
        between = ["a1", "r1"]
        [links.x2]
        between = ["a2", "r1"]
        [links.core]
        between = ["r1", "r2"]
        rate = "10mbit"
        delay = "5ms"
        reverse = { queue = "fq_codel,target=2ms", rate = "1mbit" }
        [links.y]
        between = ["r2", "b"]
        [flows.f]
        from = "a1"
        to = "b"
        count = 2
        [flows.g]
        from = "b"
        to = "a2"
        bytes = 1000
    "#;

    #[test]
    fn shortest_paths_ports_and_flows() {
        let t = topo(DUMBBELL).unwrap();
        let names: Vec<&str> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a1", "a2", "b", "r1", "r2"]);
        let path = |f: usize| -> Vec<&str> {
            (t.flows[f].path.iter())
                .map(|&p| t.ports[p].name.as_str())
                .collect()
        };
        assert_eq!(path(0), ["a1->r1", "r1->r2", "r2->b"]);
        assert_eq!(path(2), ["b->r2", "r2->r1", "r1->a2"]);
        assert_eq!(
            (t.flows[0].name.as_str(), t.flows[1].start_ns),
            ("f#0", 1_000)
        );
        let back = &t.ports[t.port_by_name("r2->r1").unwrap()];
        assert_eq!(
            (back.link.rate_bps, back.link.delay_ns),
            (1_000_000, 5_000_000)
        );
        assert_eq!(back.queue.name(), "fq_codel");
        let fwd = &t.ports[t.port_by_name("r1->r2").unwrap()];
        assert_eq!(
            (fwd.link.rate_bps, fwd.queue.name()),
            (10_000_000, "pfifo_fast")
        );
    }

    #[test]
    fn static_routes_override_and_loops_are_refused() {
        let ring = r#"
            [run]
            duration = "1s"
            [hosts.a]
            [hosts.b]
            [routers.r1]
            routes = { b = "r3" }
            [routers.r2]
            [routers.r3]
            [links.a1]
            between = ["a", "r1"]
            [links.r12]
            between = ["r1", "r2"]
            [links.r23]
            between = ["r2", "r3"]
            [links.r13]
            between = ["r1", "r3"]
            [links.b2]
            between = ["r2", "b"]
            [flows.f]
            from = "a"
            to = "b"
        "#;
        let t = topo(ring).unwrap();
        let names: Vec<&str> = (t.flows[0].path.iter())
            .map(|&p| t.ports[p].name.as_str())
            .collect();
        assert_eq!(names, ["a->r1", "r1->r3", "r3->r2", "r2->b"]);
        let looped = ring.replace("[routers.r3]", "[routers.r3]\nroutes = { b = \"r1\" }");
        assert!(topo(&looped).unwrap_err().contains("loop"));
    }

    #[test]
    fn errors_say_where() {
        let e = |from: &str, to: &str| topo(&DUMBBELL.replace(from, to)).unwrap_err();
        assert!(e("between = [\"r2\", \"b\"]", "between = [\"r2\", \"c\"]").contains("links.y: c"));
        assert!(e("rate = \"10mbit\"", "rate = \"0bit\"").contains("positive"));
        assert!(e(
            "bytes = 1000",
            "bytes = 1000\nprobe = { size = 1, interval = \"1ms\" }"
        )
        .contains("flows.g"));
        let two = DUMBBELL.replace(
            "[links.y]",
            "[links.z]\nbetween = [\"a1\", \"r2\"]\n[links.y]",
        );
        assert!(topo(&two).unwrap_err().contains("hosts.a1: has 2 links"));
        let cut = DUMBBELL.replace("between = [\"r1\", \"r2\"]", "between = [\"a2\", \"r2\"]");
        assert!(topo(&cut).is_err());
        assert!(e("count = 2", "count = 0").contains("count"));
    }
}
