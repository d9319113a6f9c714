//! A script's `ip route add|change|replace|del ...` lines, as iproute2 parses them
//! (ip/iproute.c `iproute_modify`), turned into lowtide's routes
//! (`lowtide::route`): the prefix and the metrics TCP reads. Nexthops (`via`,
//! `dev`), `proto`, `scope`, `metric`/`priority` and `src` name what lowtide's one
//! device already is, and are read past.

use lowtide::route::{Metrics, Route, Rtax, RTAX_FEATURE_ECN};
use std::net::IpAddr;

/// What one `ip route` line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteCmd {
    /// `add`, `change`, `replace`, `append`: the route, metrics whole.
    Replace(Route),
    /// `del`/`delete`: the prefix.
    Delete(IpAddr, u8),
}

/// Parses the words after `ip [-4|-6] route` (or `ro`, `r`): `add 192.0.2.1 via
/// 192.168.0.2 dev tun0 advmss 600 mtu lock 640 initcwnd 11`. `None` for a line that
/// changes no route (`show`, `flush`, `get`); an error names the word iproute2 would
/// reject.
pub fn parse(words: &[&str]) -> Option<Result<RouteCmd, String>> {
    let (op, rest) = words.split_first()?;
    let delete = match *op {
        "add" | "change" | "chg" | "replace" | "append" | "prepend" => false,
        "del" | "delete" => true,
        _ => return None,
    };
    Some(parse_args(rest).map(|(dst, len, metrics)| match delete {
        true => RouteCmd::Delete(dst, len),
        false => RouteCmd::Replace(Route {
            dst,
            prefix_len: len,
            metrics,
        }),
    }))
}

fn parse_args(words: &[&str]) -> Result<(IpAddr, u8, Metrics), String> {
    let mut metrics = Metrics::default();
    let mut prefix = None;
    let mut it = words.iter().copied().peekable();
    while let Some(w) = it.next() {
        match w {
            // Nexthop and attributes that do not change what TCP reads.
            "via" | "dev" | "oif" | "proto" | "scope" | "table" | "metric" | "priority"
            | "preference" | "src" | "realm" | "realms" | "tos" | "dsfield" | "onlink" | "type" => {
                if !matches!(w, "onlink") {
                    it.next();
                }
            }
            "lock" => return Err("lock: without a metric".into()),
            "congctl" => {
                let lock = it.next_if_eq(&"lock").is_some();
                let name = it.next().ok_or("congctl: no algorithm")?;
                metrics.set_congctl(name, lock);
            }
            "features" => {
                let f = it.next().ok_or("features: no value")?;
                if f != "ecn" {
                    return Err(format!("features {f}: unknown"));
                }
                metrics.set(Rtax::Features, RTAX_FEATURE_ECN, false);
            }
            w => match Rtax::by_name(w) {
                Some(m) => {
                    let lock = it.next_if_eq(&"lock").is_some();
                    let v = it.next().ok_or_else(|| format!("{w}: no value"))?;
                    metrics.set(m, metric_value(m, v)?, lock || m == Rtax::RtoMin);
                }
                None if prefix.is_none() => prefix = Some(parse_prefix(w)?),
                None => return Err(format!("{w}: unknown")),
            },
        }
    }
    let (dst, len) = prefix.ok_or("no prefix")?;
    Ok((dst, len, metrics))
}

/// A metric's value as iproute2 hands it to the kernel: times (`rtt`, `rttvar`,
/// `rto_min`) in milliseconds from `200ms`, `1s` or `500us`, `rtt` then times 8 and
/// `rttvar` times 4 (the kernel's fixed point), while a bare number is taken raw
/// (`get_time_rtt`); `quickack` and `fastopen_no_cookie` 0 or 1; the rest unsigned
/// numbers. iproute2 sets `rto_min`'s lock itself (`mxlock |= 1 << RTAX_RTO_MIN`).
fn metric_value(m: Rtax, v: &str) -> Result<u32, String> {
    let bad = || format!("{v}: not a valid value");
    match m {
        Rtax::Rtt | Rtax::RttVar | Rtax::RtoMin => {
            let fixed = match m {
                Rtax::Rtt => 8.0,
                Rtax::RttVar => 4.0,
                _ => 1.0,
            };
            let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
                (n, fixed)
            } else if let Some(n) = v.strip_suffix("us") {
                (n, 0.001 * fixed)
            } else if let Some(n) = v.strip_suffix('s') {
                (n, 1000.0 * fixed)
            } else {
                (v, 1.0)
            };
            let x: f64 = num.parse().map_err(|_| bad())?;
            Ok((x * scale).round() as u32)
        }
        Rtax::QuickAck | Rtax::FastopenNoCookie => match v {
            "0" => Ok(0),
            "1" => Ok(1),
            _ => Err(bad()),
        },
        _ => v.parse().map_err(|_| bad()),
    }
}

/// `default`, `ADDR` (a host route) or `ADDR/LEN`.
fn parse_prefix(w: &str) -> Result<(IpAddr, u8), String> {
    if w == "default" {
        return Ok(("0.0.0.0".parse().expect("literal"), 0));
    }
    let (addr, len) = match w.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (w, None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| format!("{w}: not a prefix"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&l| l <= max)
            .ok_or_else(|| format!("{w}: bad prefix length"))?,
        None => max,
    };
    Ok((ip, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<&str> {
        s.split_whitespace().collect()
    }

    #[test]
    fn the_mtu_probe_scripts_route_line() {
        let line = "change 192.0.2.1 via 192.168.0.2 dev tun0 advmss 600 mtu lock 640 initcwnd 11";
        let Some(Ok(RouteCmd::Replace(r))) = parse(&words(line)) else {
            panic!("not parsed");
        };
        assert_eq!((r.dst.to_string(), r.prefix_len), ("192.0.2.1".into(), 32));
        let m = &r.metrics;
        assert_eq!(
            (m.get(Rtax::AdvMss), m.get(Rtax::Mtu), m.get(Rtax::InitCwnd)),
            (600, 640, 11)
        );
        assert!(m.locked(Rtax::Mtu) && !m.locked(Rtax::AdvMss));
    }

    #[test]
    fn times_flags_congctl_and_ipv6() {
        let line = "replace 2001:db8::/64 dev tun0 rto_min 50ms rtt 0.2s quickack 1 congctl lock reno features ecn";
        let Some(Ok(RouteCmd::Replace(r))) = parse(&words(line)) else {
            panic!("not parsed");
        };
        let m = &r.metrics;
        assert_eq!(
            (m.get(Rtax::RtoMin), m.get(Rtax::Rtt), m.get(Rtax::QuickAck)),
            (50, 1600, 1),
            "rtt in the kernel's fixed point (ms x 8)"
        );
        assert!(m.locked(Rtax::RtoMin) && m.locked(Rtax::CcAlgo) && m.ecn());
        assert_eq!((m.congctl(), r.prefix_len), (Some("reno"), 64));
        let raw = "add 10.0.0.0/8 dev tun0 rtt 100 rttvar 30ms";
        let Some(Ok(RouteCmd::Replace(r))) = parse(&words(raw)) else {
            panic!("not parsed");
        };
        let m = &r.metrics;
        assert_eq!(
            (m.get(Rtax::Rtt), m.get(Rtax::RttVar)),
            (100, 120),
            "a bare number is raw"
        );
    }

    #[test]
    fn deletes_show_and_errors() {
        assert_eq!(
            parse(&words("del default")),
            Some(Ok(RouteCmd::Delete("0.0.0.0".parse().unwrap(), 0)))
        );
        assert_eq!(parse(&words("show")), None);
        assert!(matches!(parse(&words("add 192.0.2.0/33")), Some(Err(_))));
        assert!(matches!(
            parse(&words("add 192.0.2.1 mtu lock")),
            Some(Err(_))
        ));
        assert!(matches!(
            parse(&words("add 192.0.2.1 quickack 2")),
            Some(Err(_))
        ));
        assert!(matches!(parse(&words("add via 1.2.3.4")), Some(Err(_))));
    }
}
