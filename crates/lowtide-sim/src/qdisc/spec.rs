//! A qdisc by name and parameters, as `tc qdisc add dev D root NAME PARAMS` takes
//! it, written `NAME[,PARAM=VALUE]...` (e.g. `fq_codel,target=2ms,ecn=0`).

use super::codel::{Codel, CodelConfig, CodelParams};
use super::fifo::Fifo;
use super::fq::{Fq, FqConfig};
use super::fq_codel::{FqCodel, FqCodelConfig};
use super::htb::{Htb, HtbClassConfig, HtbConfig, HtbMatch};
use super::red::{Red, RedConfig};
use super::tbf::{Tbf, TbfConfig};
use super::{Qdisc, QueueItem};

/// A queueing discipline and its parameters (`None`: the device's default).
#[derive(Debug, Clone, PartialEq)]
pub enum QdiscSpec {
    /// `pfifo_fast`: for TCP, a pfifo of `txqueuelen` packets.
    PfifoFast,
    /// `pfifo [limit PACKETS]` (default `txqueuelen`).
    Pfifo(Option<u32>),
    /// `bfifo [limit BYTES]` (default `txqueuelen * psched_mtu`).
    Bfifo(Option<u64>),
    /// `codel`.
    Codel(CodelConfig),
    /// `fq_codel` (its quantum `None`: the device's `psched_mtu`).
    FqCodel(FqCodelConfig, Option<u32>),
    /// `fq` (quantum and initial quantum `None`: from the device's `psched_mtu`).
    Fq(FqConfig, Option<u32>, Option<u32>),
    /// `red` (its limit `None`: `txqueuelen * psched_mtu` bytes).
    Red(RedConfig, Option<u64>),
    /// `tbf` (`latency`, if given instead of `limit`: ns), resolved at build.
    Tbf(TbfConfig, Option<u64>),
    /// `htb`: its root class 1:1 and leaves (see [`QdiscSpec::parse_with`]).
    Htb(HtbConfig),
}

/// A host name's address, for htb's `src=`/`dst=` filters.
pub type HostAddr<'a> = &'a dyn Fn(&str) -> Option<std::net::IpAddr>;

/// The names [`QdiscSpec::parse`] takes.
pub const QDISC_NAMES: &[&str] = &[
    "pfifo_fast",
    "pfifo",
    "bfifo",
    "codel",
    "fq_codel",
    "fq",
    "red",
    "tbf",
    "htb",
];

impl QdiscSpec {
    /// The qdisc `net.core.default_qdisc = name` puts on a device, if it is one of
    /// the simulator's (`noqueue`, `sfq`, ... are not).
    pub fn default_qdisc(name: &str) -> Option<QdiscSpec> {
        QdiscSpec::parse(name).ok()
    }

    /// Parses `NAME[,PARAM=VALUE]...`. Times take `us`, `ms` or `s` (bare: µs, as
    /// tc), sizes `b`, `kb`, `mb` (bare: bytes), rates `bit`, `kbit`, `mbit`, `gbit`
    /// (bare: bit/s); flags `1`/`0`, `on`/`off`.
    pub fn parse(s: &str) -> Result<QdiscSpec, String> {
        QdiscSpec::parse_with(s, &|_| None)
    }

    /// [`QdiscSpec::parse`], with `hosts` naming the addresses htb's filters may
    /// give by host name. htb is written `htb,rate=R[,ceil=C][,burst=B][,cburst=CB]
    /// [,default=MINOR][,r2q=N][,direct_qlen=N],class=MINOR:rate=R[:ceil=C]
    /// [:burst=B][:cburst=CB][:prio=P][:quantum=Q][:limit=N][:src=HOST][:dst=HOST],...`:
    /// the qdisc's own rate, ceil and bursts are its root class 1:1's, each
    /// `class` a leaf 1:MINOR under it (`src`/`dst`: a `u32 match ip src|dst`
    /// filter to it, an address or a host's name).
    pub fn parse_with(s: &str, hosts: HostAddr) -> Result<QdiscSpec, String> {
        let mut parts = s.split(',').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let mut spec = match name {
            "pfifo_fast" => QdiscSpec::PfifoFast,
            "pfifo" => QdiscSpec::Pfifo(None),
            "bfifo" => QdiscSpec::Bfifo(None),
            "codel" => QdiscSpec::Codel(CodelConfig::default()),
            "fq_codel" => QdiscSpec::FqCodel(FqCodelConfig::default(), None),
            "fq" => QdiscSpec::Fq(FqConfig::default(), None, None),
            "red" => QdiscSpec::Red(RedConfig::with_limit(0), None),
            "htb" => QdiscSpec::Htb(HtbConfig {
                root: HtbClassConfig::new(1, 0),
                leaves: Vec::new(),
                default: 0,
                r2q: 10,
                direct_qlen: 0,
            }),
            "tbf" => QdiscSpec::Tbf(
                TbfConfig {
                    rate: 0,
                    burst: 0,
                    limit: 0,
                    peakrate: 0,
                    mtu: 0,
                },
                None,
            ),
            _ => {
                return Err(format!(
                    "{name}: not a qdisc (one of {})",
                    QDISC_NAMES.join(", ")
                ))
            }
        };
        for p in parts.filter(|p| !p.is_empty()) {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("{p}: PARAM=VALUE expected"))?;
            spec.set(k.trim(), v.trim(), hosts)
                .map_err(|e| format!("{name} {k}: {e}"))?;
        }
        if let QdiscSpec::Htb(c) = &spec {
            c.check().map_err(|e| format!("htb: {e}"))?;
        }
        if let QdiscSpec::Tbf(c, latency) = &mut spec {
            *c = c.resolve(*latency).map_err(|e| format!("tbf: {e}"))?;
            *latency = None;
        }
        Ok(spec)
    }

    /// Its `tc` name.
    pub fn name(&self) -> &'static str {
        match self {
            QdiscSpec::PfifoFast => "pfifo_fast",
            QdiscSpec::Pfifo(_) => "pfifo",
            QdiscSpec::Bfifo(_) => "bfifo",
            QdiscSpec::Codel(_) => "codel",
            QdiscSpec::FqCodel(..) => "fq_codel",
            QdiscSpec::Fq(..) => "fq",
            QdiscSpec::Red(..) => "red",
            QdiscSpec::Tbf(..) => "tbf",
            QdiscSpec::Htb(..) => "htb",
        }
    }

    fn set(&mut self, k: &str, v: &str, hosts: HostAddr) -> Result<(), String> {
        match self {
            QdiscSpec::PfifoFast => return Err("pfifo_fast takes no parameters".into()),
            QdiscSpec::Pfifo(l) if k == "limit" => *l = Some(num(v)? as u32),
            QdiscSpec::Bfifo(l) if k == "limit" => *l = Some(size(v)?),
            QdiscSpec::Pfifo(_) | QdiscSpec::Bfifo(_) => return Err("only limit".into()),
            QdiscSpec::Codel(c) if k == "limit" => c.limit = num(v)? as u32,
            QdiscSpec::Codel(c) => return set_codel(&mut c.params, k, v),
            QdiscSpec::FqCodel(c, quantum) => match k {
                "limit" => c.limit = num(v)? as u32,
                "flows" => c.flows = num(v)? as u32,
                "quantum" => *quantum = Some(size(v)? as u32),
                "memory_limit" => c.memory_limit = size(v)?.min(u32::MAX as u64) as u32,
                "drop_batch" => c.drop_batch = num(v)? as u32,
                _ => return set_codel(&mut c.params, k, v),
            },
            QdiscSpec::Fq(c, quantum, initial) => return set_fq(c, quantum, initial, k, v),
            QdiscSpec::Red(c, limit) => return set_red(c, limit, k, v),
            QdiscSpec::Tbf(c, latency) => match k {
                "rate" => c.rate = rate(v)? / 8,
                "burst" | "buffer" | "maxburst" => c.burst = size(v)?,
                "limit" => c.limit = size(v)?,
                "latency" => *latency = Some(time_us(v)? * 1000),
                "peakrate" => c.peakrate = rate(v)? / 8,
                "mtu" | "minburst" => c.mtu = size(v)?,
                _ => return Err("unknown parameter".into()),
            },
            QdiscSpec::Htb(c) => return set_htb(c, k, v, hosts),
        }
        Ok(())
    }

    /// The qdisc itself, for a device of `txqueuelen` packets and `psched_mtu`
    /// bytes; `seed` seeds RED's random numbers.
    pub fn build<T: QueueItem + 'static>(
        &self,
        txqueuelen: u32,
        psched_mtu: u32,
        seed: u64,
    ) -> Box<dyn Qdisc<T>> {
        match self {
            QdiscSpec::PfifoFast => Box::new(Fifo::pfifo(txqueuelen)),
            QdiscSpec::Pfifo(l) => Box::new(Fifo::pfifo(l.unwrap_or(txqueuelen))),
            QdiscSpec::Bfifo(l) => Box::new(Fifo::bfifo(
                l.unwrap_or(txqueuelen as u64 * psched_mtu as u64),
            )),
            QdiscSpec::Codel(c) => Box::new(Codel::new(CodelConfig {
                params: CodelParams {
                    mtu: psched_mtu,
                    ..c.params
                },
                ..*c
            })),
            QdiscSpec::FqCodel(c, q) => Box::new(FqCodel::new(FqCodelConfig {
                quantum: q.unwrap_or(psched_mtu),
                params: CodelParams {
                    mtu: psched_mtu,
                    ..c.params
                },
                ..*c
            })),
            QdiscSpec::Fq(c, q, iq) => Box::new(Fq::new(FqConfig {
                quantum: q.unwrap_or(2 * psched_mtu),
                initial_quantum: iq.unwrap_or(10 * psched_mtu),
                ..*c
            })),
            QdiscSpec::Red(c, l) => Box::new(Red::new(
                RedConfig {
                    limit: l.unwrap_or(txqueuelen as u64 * psched_mtu as u64),
                    ..*c
                },
                seed,
            )),
            QdiscSpec::Tbf(c, _) => Box::new(Tbf::new(*c)),
            QdiscSpec::Htb(c) => Box::new(Htb::new(c, txqueuelen)),
        }
    }
}

fn set_codel(p: &mut CodelParams, k: &str, v: &str) -> Result<(), String> {
    match k {
        "target" => p.target = CodelParams::from_us(time_us(v)?),
        "interval" => p.interval = CodelParams::from_us(time_us(v)?),
        "ce_threshold" => p.ce_threshold = CodelParams::from_us(time_us(v)?),
        "ecn" => p.ecn = flag(v)?,
        _ => return Err("unknown parameter".into()),
    }
    Ok(())
}

fn set_fq(
    c: &mut FqConfig,
    quantum: &mut Option<u32>,
    initial: &mut Option<u32>,
    k: &str,
    v: &str,
) -> Result<(), String> {
    match k {
        "limit" => c.limit = num(v)? as u32,
        "flow_limit" => c.flow_limit = num(v)? as u32,
        "quantum" => match size(v)? {
            q @ 1..=0x10_0000 => *quantum = Some(q as u32),
            _ => return Err("invalid quantum (1 to 1 MB)".into()),
        },
        "initial_quantum" => *initial = Some(size(v)?.min(i32::MAX as u64) as u32),
        "maxrate" => c.flow_max_rate = rate(v)? / 8,
        "pacing" => c.rate_enable = flag(v)?,
        "low_rate_threshold" => c.low_rate_threshold = rate(v)? / 8,
        "refill_delay" => c.flow_refill_delay_ns = time_us(v)? * 1000,
        "horizon" => c.horizon_ns = time_us(v)? * 1000,
        "horizon_drop" => c.horizon_drop = flag(v)?,
        "orphan_mask" => c.orphan_mask = num(v)? as u32,
        "ce_threshold" => c.ce_threshold_ns = time_us(v)? * 1000,
        // fq_change: 1 to 18 (256 K buckets).
        "buckets" => match num(v)? {
            n @ 2..=0x4_0000 => c.buckets_log = 63 - n.leading_zeros(),
            _ => return Err("invalid buckets (2 to 262144)".into()),
        },
        "weights" => {
            // fq_load_weights: FQ_MIN_WEIGHT (16 * 1024) each.
            let w: Vec<i32> = (v.split(':').map(|x| x.trim().parse::<i32>()))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            match <[i32; 3]>::try_from(w) {
                Ok(w) if w.iter().all(|&x| x >= 16 * 1024) => c.weights = w,
                _ => return Err("three weights W0:W1:W2, each >= 16384".into()),
            }
        }
        "priomap" => {
            // fq_load_priomap: 16 bands, each below FQ_BANDS.
            let m: Vec<u8> = (v.split(':').map(|x| x.trim().parse::<u8>()))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            match <[u8; 16]>::try_from(m) {
                Ok(m) if m.iter().all(|&b| b < 3) => c.prio2band = m,
                _ => return Err("16 bands B0:...:B15, each 0 to 2".into()),
            }
        }
        _ => return Err("unknown parameter".into()),
    }
    Ok(())
}

fn set_htb(c: &mut HtbConfig, k: &str, v: &str, hosts: HostAddr) -> Result<(), String> {
    match k {
        "default" => c.default = hex_minor(v)?,
        "r2q" => c.r2q = num(v)?.max(1) as u32,
        "direct_qlen" => c.direct_qlen = num(v)? as u32,
        "class" => {
            let mut parts = v.split(':');
            let minor = hex_minor(parts.next().unwrap_or_default())?;
            let mut leaf = HtbClassConfig::new(minor, 0);
            for p in parts {
                let (k, v) = p.split_once('=').ok_or("class=MINOR:PARAM=VALUE:...")?;
                set_htb_class(&mut leaf, k.trim(), v.trim(), hosts)
                    .map_err(|e| format!("{minor:x} {k}: {e}"))?;
            }
            c.leaves.push(leaf);
        }
        _ => return set_htb_class(&mut c.root, k, v, hosts),
    }
    Ok(())
}

/// A class's parameters (`tc class add ... htb`).
fn set_htb_class(c: &mut HtbClassConfig, k: &str, v: &str, hosts: HostAddr) -> Result<(), String> {
    let addr = |v: &str| {
        (v.parse().ok())
            .or_else(|| hosts(v))
            .ok_or_else(|| format!("{v}: not an address or a host"))
    };
    match k {
        "rate" => c.rate = rate(v)? / 8,
        "ceil" => c.ceil = rate(v)? / 8,
        "burst" | "buffer" | "maxburst" => c.burst = size(v)?,
        "cburst" | "cbuffer" | "cmaxburst" => c.cburst = size(v)?,
        "prio" => c.prio = (num(v)?.min(7)) as u8,
        "quantum" => c.quantum = num(v)? as u32,
        "limit" => c.limit = num(v)? as u32,
        "src" => c.filters.push(HtbMatch::Src(addr(v)?)),
        "dst" => c.filters.push(HtbMatch::Dst(addr(v)?)),
        _ => return Err("unknown parameter".into()),
    }
    Ok(())
}

/// A classid's minor, in hex as tc writes it (`1:10` is minor 0x10).
fn hex_minor(v: &str) -> Result<u16, String> {
    u16::from_str_radix(v.trim(), 16).map_err(|_| format!("{v}: a class minor in hex"))
}

fn set_red(c: &mut RedConfig, limit: &mut Option<u64>, k: &str, v: &str) -> Result<(), String> {
    match k {
        "limit" => *limit = Some(size(v)?),
        "min" => c.min = size(v)? as u32,
        "max" => c.max = size(v)? as u32,
        "avpkt" => c.avpkt = size(v)?.max(1) as u32,
        "burst" => c.burst = num(v)? as u32,
        "probability" => {
            c.probability = v
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or("a probability from 0 to 1")?
        }
        "bandwidth" => c.bandwidth = rate(v)?,
        "ecn" => c.ecn = flag(v)?,
        "harddrop" => c.harddrop = flag(v)?,
        "nodrop" => c.nodrop = flag(v)?,
        "adaptive" => c.adaptive = flag(v)?,
        _ => return Err("unknown parameter".into()),
    }
    Ok(())
}

/// A number with an optional unit suffix from `units` (lowercase), scaled.
fn scaled(v: &str, units: &[(&str, f64)], what: &str) -> Result<u64, String> {
    let v = v.to_ascii_lowercase();
    let (digits, mult) = units
        .iter()
        .find_map(|(u, m)| v.strip_suffix(u).map(|d| (d.to_string(), *m)))
        .unwrap_or((v.clone(), 1.0));
    let x: f64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("{v}: not a {what}"))?;
    let x = x * mult;
    match x.is_finite() && (0.0..=u64::MAX as f64).contains(&x) {
        true => Ok(x.round() as u64),
        false => Err(format!("{v}: out of range")),
    }
}

fn num(v: &str) -> Result<u64, String> {
    scaled(v, &[], "number").and_then(|n| match n <= u32::MAX as u64 {
        true => Ok(n),
        false => Err(format!("{n}: too large")),
    })
}

fn time_us(v: &str) -> Result<u64, String> {
    scaled(v, &[("us", 1.0), ("ms", 1e3), ("s", 1e6)], "time")
}

fn size(v: &str) -> Result<u64, String> {
    let u = [
        ("kb", 1024.0),
        ("mb", 1024.0 * 1024.0),
        ("k", 1024.0),
        ("m", 1048576.0),
        ("b", 1.0),
    ];
    scaled(v, &u, "size")
}

fn rate(v: &str) -> Result<u64, String> {
    let u = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)];
    scaled(v, &u, "rate")
}

fn flag(v: &str) -> Result<bool, String> {
    match v {
        "1" | "on" | "true" | "yes" => Ok(true),
        "0" | "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{v}: 1 or 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_parameters() {
        assert_eq!(QdiscSpec::parse("pfifo").unwrap(), QdiscSpec::Pfifo(None));
        assert_eq!(
            QdiscSpec::parse("bfifo,limit=30kb").unwrap(),
            QdiscSpec::Bfifo(Some(30 * 1024))
        );
        let QdiscSpec::FqCodel(c, q) =
            QdiscSpec::parse("fq_codel,target=2ms,ecn=0,quantum=300").unwrap()
        else {
            panic!("not fq_codel");
        };
        assert_eq!(
            (c.params.target, c.params.ecn, q),
            (CodelParams::from_us(2000), false, Some(300))
        );
        let QdiscSpec::Fq(c, ..) =
            QdiscSpec::parse("fq,horizon=1s,horizon_drop=0,maxrate=8mbit").unwrap()
        else {
            panic!("not fq");
        };
        assert_eq!(
            (c.horizon_ns, c.horizon_drop, c.flow_max_rate),
            (1_000_000_000, false, 1_000_000)
        );
        let spec =
            "fq,buckets=4096,weights=65536:65536:16384,priomap=0:0:0:0:1:1:1:1:2:2:2:2:0:1:2:0";
        let QdiscSpec::Fq(c, ..) = QdiscSpec::parse(spec).unwrap() else {
            panic!("not fq");
        };
        assert_eq!(
            (c.buckets_log, c.weights[2], c.prio2band[14]),
            (12, 16384, 2)
        );
        assert!(QdiscSpec::parse("fq,weights=1:65536:65536").is_err());
        assert!(QdiscSpec::parse("fq,priomap=3:0").is_err());
        assert!(QdiscSpec::parse("fq,buckets=1").is_err());
        assert!(QdiscSpec::parse("sfq").is_err());
        assert!(QdiscSpec::parse("fq,quantum=0").is_err());
        assert!(QdiscSpec::parse("fq_codel,target").is_err());
        assert!(QdiscSpec::parse("red,probability=2").is_err());
        assert!(QdiscSpec::parse("pfifo_fast,limit=3").is_err());
        let QdiscSpec::Tbf(c, _) =
            QdiscSpec::parse("tbf,rate=8mbit,burst=32kb,latency=50ms").unwrap()
        else {
            panic!("not tbf");
        };
        // limit = rate x latency + burst (iproute2's q_tbf.c).
        assert_eq!((c.rate, c.burst, c.limit), (1_000_000, 32768, 82768));
        assert!(QdiscSpec::parse("tbf,rate=8mbit,burst=32kb")
            .unwrap_err()
            .contains("limit or latency"));
        assert!(QdiscSpec::parse("tbf,burst=32kb,limit=1mb").is_err());
    }
}
