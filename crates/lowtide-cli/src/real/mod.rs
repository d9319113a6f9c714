//! The commands that run on the real path: lowtide on a TUN device, talking to the
//! kernel's TCP through the emulated link (`lowtide transfer`, `lowtide iperf3`), and
//! the link alone between two devices (`lowtide link`).

pub mod connect;
pub mod iperf;
pub mod link;
pub mod shards;
pub mod sockets;
pub mod transfer;

use crate::units;
use clap::Args;
use lowtide::{Config, Stack};
pub use lowtide_tun::device::{configure, open_device};
use lowtide_tun::device::{Offload, TunDevice};
use lowtide_tun::link::PathConfig;
use lowtide_tun::runtime::{Runtime, RuntimeConfig};
use lowtide_tun::shard::port_range;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

/// The flags every real-path command takes: the device, lowtide's address, the
/// emulated link (the simulator's flags), and the stack's settings.
#[derive(Args, Debug, Clone)]
pub struct RealArgs {
    /// TUN device to create (or attach to, if it exists).
    #[arg(long, value_name = "NAME")]
    pub tun: String,
    /// Address and prefix of the kernel's side of the device (e.g. 10.7.0.1/24);
    /// lowtide assigns it and brings the device up. Omit it for a device that is
    /// already configured.
    #[arg(long, value_name = "CIDR", value_parser = parse_cidr)]
    pub tun_addr: Option<(Ipv4Addr, u8)>,
    /// lowtide's own address [default: the address after --tun-addr's].
    #[arg(long, value_name = "ADDR")]
    pub local: Option<Ipv4Addr>,
    /// An IPv6 address for lowtide too (it answers pings and UDP there); the
    /// kernel's side of the device needs an address in its prefix
    /// (`ip -6 addr add fd00:7::1/64 dev TUN nodad`).
    #[arg(long, value_name = "ADDR")]
    pub local6: Option<std::net::Ipv6Addr>,
    #[command(flatten)]
    pub path: PathArgs,
    /// TSO and checksum offload on the device (64 KB super-packets both ways);
    /// off writes one MSS-sized segment per packet.
    #[arg(long, default_value = "on", value_parser = units::parse_on_off, value_name = "on|off", action = clap::ArgAction::Set)]
    pub offload: bool,
    /// Congestion control [default: the stack's, net.ipv4.tcp_congestion_control].
    #[arg(long, value_parser = crate::parse_cc)]
    pub cc: Option<String>,
    /// A sysctl for lowtide's stack, e.g. net.ipv4.tcp_notsent_lowat=131072
    /// (repeatable).
    #[arg(long = "sysctl", value_name = "NAME=VALUE", value_parser = crate::parse_sysctl)]
    pub sysctls: Vec<String>,
    /// Queues of the TUN device (IFF_MULTI_QUEUE), each served by its own engine
    /// shard (a stack and a thread); the kernel steers each flow to one queue by its
    /// flow hash. 1 opens a single-queue device.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub queues: u16,
    /// Seed of the stack's and the link's random choices.
    #[arg(long, default_value_t = 1, value_parser = crate::limits::seed, allow_hyphen_values = true)]
    pub seed: u64,
}

/// The emulated link's flags, shared with the simulator's: the forward direction is
/// from the side running the command (lowtide, or device A of `lowtide link`).
#[derive(Args, Debug, Clone)]
pub struct PathArgs {
    /// Line rate, both directions (e.g. 100mbit, 1gbit; 1kbit-1tbit); 0 is unlimited.
    #[arg(long, default_value = "0", value_parser = parse_rate_or_zero)]
    pub rate: u64,
    /// Round-trip propagation delay (0-10s); each direction gets half.
    #[arg(long, value_parser = crate::limits::rtt, conflicts_with = "delay")]
    pub rtt: Option<Duration>,
    /// One-way propagation delay, each direction (0-5s).
    #[arg(long, value_parser = crate::limits::delay)]
    pub delay: Option<Duration>,
    /// Loss probability, forward direction (e.g. 1%).
    #[arg(long, default_value = "0", value_parser = units::parse_probability)]
    pub loss: f64,
    /// Loss probability, reverse direction.
    #[arg(long, default_value = "0", value_parser = units::parse_probability)]
    pub loss_reverse: f64,
    /// Extra delay per packet, uniform in 0..JITTER (0-10s), both directions (may
    /// reorder); `sim stream --jitter` delays the A->B direction only.
    #[arg(long, default_value = "0ms", value_parser = crate::limits::jitter)]
    pub jitter: Duration,
    /// Queue limit in packets of each direction (pfifo limit; a GSO packet counts
    /// once).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub queue: u64,
    /// Writes what crosses the device(s) to this pcap file.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
}

impl PathArgs {
    /// (forward, reverse) path settings.
    pub fn configs(&self) -> (PathConfig, PathConfig) {
        let one_way = match (self.rtt, self.delay) {
            (Some(rtt), _) => rtt / 2,
            (None, Some(d)) => d,
            (None, None) => Duration::ZERO,
        };
        let base = PathConfig {
            rate_bps: (self.rate > 0).then_some(self.rate),
            delay_ns: one_way.as_nanos() as u64,
            jitter_ns: self.jitter.as_nanos() as u64,
            loss: 0.0,
            queue_limit: self.queue as usize,
        };
        let fwd = PathConfig {
            loss: self.loss,
            ..base.clone()
        };
        let rev = PathConfig {
            loss: self.loss_reverse,
            ..base
        };
        (fwd, rev)
    }
}

fn parse_rate_or_zero(s: &str) -> Result<u64, String> {
    match s.trim() {
        "0" => Ok(0),
        _ => crate::limits::rate(s),
    }
}

/// `A.B.C.D/N`.
pub fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' is not ADDR/PREFIX (e.g. 10.7.0.1/24)"))?;
    let addr: Ipv4Addr = addr
        .parse()
        .map_err(|_| format!("'{addr}' is not an IPv4 address"))?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|l| (1..=30).contains(l))
        .ok_or_else(|| format!("prefix length '{len}' must be 1..30"))?;
    Ok((addr, len))
}

/// The address after `addr` in its subnet, if it is a host address there.
pub fn next_host(addr: Ipv4Addr, prefix: u8) -> Option<Ipv4Addr> {
    let mask = u32::MAX << (32 - prefix as u32);
    let next = u32::from(addr).wrapping_add(1);
    let broadcast = (u32::from(addr) & mask) | !mask;
    (next & mask == u32::from(addr) & mask && next != broadcast).then(|| next.into())
}

impl RealArgs {
    /// lowtide's address: --local, or the one after --tun-addr.
    pub fn local_addr(&self) -> Result<Ipv4Addr, String> {
        match (self.local, self.tun_addr) {
            (Some(a), _) => Ok(a),
            (None, Some((a, len))) => next_host(a, len)
                .ok_or_else(|| format!("no host address after {a}/{len}: give --local")),
            (None, None) => Err("give --tun-addr (or --local for a configured device)".into()),
        }
    }

    fn stack_config(&self) -> Result<Config, String> {
        let mut cfg = Config::default();
        if let Some(cc) = &self.cc {
            cfg.set("net.ipv4.tcp_congestion_control", cc)
                .map_err(|e| e.to_string())?;
        }
        for s in &self.sysctls {
            cfg.set_assignment(s).map_err(|e| e.to_string())?;
        }
        Ok(cfg)
    }

    /// Checks the arguments (errors here are usage errors, exit code 2).
    pub fn validate(&self) -> Result<Ipv4Addr, String> {
        self.stack_config()?;
        crate::outputs::check_files([("--pcap", self.path.pcap.as_deref())])?;
        if self.tun.is_empty() || self.tun.len() > 15 {
            return Err(format!("--tun '{}' must be 1..15 characters", self.tun));
        }
        if self.queues > 1 && self.path.pcap.is_some() {
            return Err("--pcap: one queue only (--queues 1)".into());
        }
        let local = self.local_addr()?;
        if let Some((kernel, _)) = self.tun_addr.filter(|(k, _)| *k == local) {
            return Err(format!(
                "--local {local}: that is the kernel's address (--tun-addr {kernel}); lowtide needs its own"
            ));
        }
        Ok(local)
    }

    /// The kernel must route lowtide's address through the device, or it answers
    /// nothing (its SYN-ACKs and ACKs would go elsewhere or nowhere): asks the
    /// kernel's routing table (a UDP `connect`, which only looks the route up).
    fn check_route_back(&self, local: Ipv4Addr) -> Result<(), String> {
        let hint = match self.tun_addr {
            Some((a, len)) => format!(
                "give an address in {a}/{len}, or add a route to it through {}",
                self.tun
            ),
            None => format!("add a route to it through {}", self.tun),
        };
        let probe = std::net::UdpSocket::bind("0.0.0.0:0").map_err(|e| format!("socket: {e}"))?;
        if let Err(e) = probe.connect((local, 9)) {
            let e = std::io::Error::from_raw_os_error(e.raw_os_error().unwrap_or(0));
            let why = e.to_string();
            let why = why.split(" (os error").next().unwrap_or(&why);
            return Err(format!(
                "--local {local}: {why}: the kernel has no route to it ({hint})"
            ));
        }
        let src = probe.local_addr().map(|a| a.ip());
        match self.tun_addr {
            Some((kernel, _)) if src.as_ref().ok() != Some(&std::net::IpAddr::V4(kernel)) => {
                Err(format!(
                "--local {local}: the kernel routes it through another interface, not {} ({hint})",
                self.tun
            ))
            }
            _ => Ok(()),
        }
    }

    /// Opens the device, configures it and starts the runtime (errors here are
    /// run-time failures, exit code 1).
    pub fn open(&self) -> Result<(Runtime, Ipv4Addr), String> {
        let local = self.validate()?;
        let dev = open_device(&self.tun, self.offload_mode(), self.tun_addr)?;
        self.check_route_back(local)?;
        let mut rt = self.runtime(dev, local, 0)?;
        if let Some(p) = &self.path.pcap {
            rt.capture(p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        Ok((rt, local))
    }

    /// [`RealArgs::open`] of `--queues` queues: one runtime per queue, each with its
    /// own stack, whose ephemeral ports are that shard's slice of
    /// `net.ipv4.ip_local_port_range` (so shards never open the same four-tuple).
    pub fn open_queues(&self) -> Result<(Vec<Runtime>, Ipv4Addr), String> {
        let local = self.validate()?;
        let n = usize::from(self.queues);
        let devs = TunDevice::open_queues(&self.tun, self.offload_mode(), n)
            .map_err(|e| format!("TUN device {} ({n} queues): {e}", self.tun))?;
        if let Some(addr) = self.tun_addr {
            configure(&devs[0], addr)?;
        }
        self.check_route_back(local)?;
        let rts = devs
            .into_iter()
            .enumerate()
            .map(|(k, dev)| self.runtime(dev, local, k))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((rts, local))
    }

    fn offload_mode(&self) -> Offload {
        match self.offload {
            true => Offload::Full,
            false => Offload::None,
        }
    }

    /// The runtime of shard `k` (of `--queues`) on `dev`.
    fn runtime(&self, dev: TunDevice, local: Ipv4Addr, k: usize) -> Result<Runtime, String> {
        let mut stack_cfg = self.stack_config()?;
        let range = stack_cfg.ip_local_port_range;
        stack_cfg.ip_local_port_range = port_range(range, k, usize::from(self.queues));
        let busy_poll = Duration::from_micros(stack_cfg.busy_poll_us.into());
        let seed = self.seed.wrapping_add(k as u64);
        let mut stack = Stack::new(stack_cfg, seed);
        // RFC 6528 / RFC 6056: ISNs and ports keyed by the OS, not by --seed.
        let secret = lowtide_tun::random::os_secret().map_err(|e| format!("getrandom: {e}"))?;
        stack.set_secret(secret);
        stack.add_address(local.into());
        if let Some(v6) = self.local6 {
            stack.add_address(v6.into());
        }
        let (egress, ingress) = self.path.configs();
        let cfg = RuntimeConfig {
            offload: self.offload_mode(),
            egress,
            ingress,
            seed,
            busy_poll,
        };
        Runtime::new(stack, dev, cfg).map_err(|e| format!("runtime: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_next_host() {
        assert_eq!(
            parse_cidr("10.7.0.1/24"),
            Ok((Ipv4Addr::new(10, 7, 0, 1), 24))
        );
        assert!(parse_cidr("10.7.0.1").is_err());
        assert!(parse_cidr("10.7.0.1/33").is_err());
        assert!(parse_cidr("x/24").is_err());
        let a = Ipv4Addr::new(10, 7, 0, 1);
        assert_eq!(next_host(a, 24), Some(Ipv4Addr::new(10, 7, 0, 2)));
        assert_eq!(next_host(Ipv4Addr::new(10, 7, 0, 254), 24), None);
        assert_eq!(
            next_host(Ipv4Addr::new(10, 7, 0, 1), 30),
            Some(Ipv4Addr::new(10, 7, 0, 2))
        );
        assert_eq!(next_host(Ipv4Addr::new(10, 7, 0, 2), 30), None);
    }
}
