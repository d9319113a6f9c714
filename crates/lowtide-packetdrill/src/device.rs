//! The device directory the runner keeps (`device_dir=` in `--so_flags`): what a
//! script's `ip link`, `tc` and `ethtool` lines did to tun0, the device that lowtide
//! is. Rescanned at every call like the sysctl directory:
//! - `mtu`: the device MTU (`ip link set dev tun0 mtu N`, or the runner's `--mtu`),
//!   applied with `Stack::set_device_mtu`;
//! - `tx_queue_limit`: the packet limit of tun0's root FIFO qdisc (`tc qdisc ... root
//!   pfifo limit N`); 0 is a queue that drops every packet (`NET_XMIT_DROP`), which
//!   the stack hears through `handle_tx_dropped`. Any other limit never fills here:
//!   packetdrill takes each packet at once;
//! - `tcp_metrics_flush`: a line per `ip tcp_metrics flush`: lowtide's TCP metrics
//!   (the Fast Open cookie cache) are flushed once per new line;
//! - `routes`: a line per `ip route add|change|replace|del ...` (the words after
//!   `route`), applied once each in order with `Stack::route_replace` or
//!   `Stack::route_delete` (`crate::route` parses them);
//! - `features`: `ethtool -K tun0 FEATURE on|off` lines. With TSO/GSO on (tun's
//!   default under packetdrill) packetdrill reads each GSO packet whole; turning
//!   `tso` or `gso` off makes the device hand it over cut into wire segments (the
//!   stack still builds GSO packets: that part is reported, not modelled). The
//!   device never aggregates received packets, so GRO/LRO off is what it already is.

use crate::sysctl::SysctlDir;
use lowtide::posix::Host;
use lowtide::Instant;
use std::path::PathBuf;

/// The watched directory and what was last applied from it.
#[derive(Debug, Default)]
pub struct DeviceDir {
    dir: Option<PathBuf>,
    mtu: Option<String>,
    /// The root qdisc drops every packet (`pfifo limit 0`).
    pub drop_all: bool,
    /// TSO or GSO was turned off: packets reach packetdrill segmented.
    pub segment: bool,
    /// `ip tcp_metrics flush` lines applied so far.
    metrics_flushes: usize,
    /// `ip route` lines applied so far.
    routes: usize,
}

impl DeviceDir {
    /// Applies the `ip route` lines not applied yet; one lowtide cannot take is
    /// reported.
    fn apply_routes(&mut self, host: &mut Host, text: String, sysctl: &mut SysctlDir) {
        for line in text.lines().skip(self.routes) {
            self.routes += 1;
            let words: Vec<&str> = line.split_whitespace().collect();
            match crate::route::parse(&words) {
                Some(Ok(crate::route::RouteCmd::Replace(r))) => host.stack_mut().route_replace(r),
                Some(Ok(crate::route::RouteCmd::Delete(ip, len))) => {
                    host.stack_mut().route_delete(ip, len);
                }
                Some(Err(why)) => sysctl.report_once(format!("rejected ip route {line}: {why}")),
                None => {}
            }
        }
    }

    /// Watches `dir`, if any.
    pub fn new(dir: Option<PathBuf>) -> DeviceDir {
        DeviceDir {
            dir,
            ..DeviceDir::default()
        }
    }

    /// Applies what changed since the last scan; what lowtide cannot do goes to the
    /// report of `sysctl`.
    pub fn rescan(&mut self, host: &mut Host, now: Instant, sysctl: &mut SysctlDir) {
        let Some(dir) = self.dir.clone() else {
            return;
        };
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .ok()
                .map(|t| t.trim().to_string())
        };
        let mtu = read("mtu");
        if mtu != self.mtu {
            self.mtu.clone_from(&mtu);
            if let Some(text) = mtu {
                let r = text
                    .parse::<u32>()
                    .map_err(|_| lowtide::SocketError::InvalidInput)
                    .and_then(|m| host.stack_mut().set_device_mtu(now, m));
                host.sync_events();
                if r.is_err() {
                    sysctl.report_once(format!("rejected device mtu {text}: invalid"));
                }
            }
        }
        self.drop_all = read("tx_queue_limit").is_some_and(|l| l == "0");
        let flushes = read("tcp_metrics_flush").map_or(0, |t| t.lines().count());
        if flushes != self.metrics_flushes {
            self.metrics_flushes = flushes;
            host.stack_mut().flush_tcp_metrics();
        }
        self.apply_routes(host, read("routes").unwrap_or_default(), sysctl);
        let offloads = [
            "tso",
            "gso",
            "tcp-segmentation-offload",
            "generic-segmentation-offload",
        ];
        self.segment = false;
        for line in read("features").unwrap_or_default().lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            // Receive offloads lowtide never had: off is what it already is.
            let rx = [
                "gro",
                "lro",
                "generic-receive-offload",
                "large-receive-offload",
            ];
            if let [feature, "off"] = words.as_slice() {
                if rx.contains(feature) {
                    continue;
                }
                self.segment |= offloads.contains(feature);
                sysctl.report_once(format!(
                    "device feature {feature} off: not modelled (lowtide's stack still builds GSO packets)"
                ));
            }
        }
    }
}
