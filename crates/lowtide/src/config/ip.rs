//! IP-layer sysctls TCP reads: `net.ipv4.ip_default_ttl`, `ip_no_pmtu_disc`
//! (sysctl_net_ipv4.c), `net.ipv4.route.min_pmtu`, `route.mtu_expires` (route.c's
//! `ipv4_route_netns_table`), `net.ipv6.route.mtu_expires` (route.c's
//! `ipv6_route_table_template`), `net.ipv6.conf.all.hop_limit` (addrconf.c's
//! `addrconf_sysctl`) and IPv4 reassembly's `ipfrag_*` (ip_fragment.c's
//! `ip4_frags_ns_ctl_table`).

use super::parse::parse_num;
use super::{Config, ConfigError};

/// `proc_dointvec` without bounds: any `int`.
fn parse_int(n: &str, value: &str) -> Result<i32, ConfigError> {
    parse_num(n, value, i32::MIN, i32::MAX, "an int")
}

/// The most seconds `proc_dointvec_jiffies` takes (`INT_MAX / HZ`, HZ 1000).
const JIFFIES_MAX_S: u32 = i32::MAX as u32 / 1000;

impl Config {
    /// Sets one IP sysctl; `Ok(false)` if `n` is none.
    pub(super) fn set_ip(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            // proc_dou8vec_minmax, ip_ttl_min 1 to ip_ttl_max 255.
            "net.ipv4.ip_default_ttl" => {
                self.ip_default_ttl = parse_num(n, value, 1, 255, "1..=255")?
            }
            // proc_dointvec_minmax, SYSCTL_ONE to two_five_five.
            "net.ipv6.conf.all.hop_limit" => {
                self.ipv6_hop_limit = parse_num(n, value, 1, 255, "1..=255")?
            }
            // proc_dou8vec_minmax with no bounds.
            "net.ipv4.ip_no_pmtu_disc" => {
                self.ip_no_pmtu_disc = parse_num(n, value, 0, 255, "0..=255")?
            }
            // proc_dointvec_minmax, extra1 ip_min_valid_pmtu (IPV4_MIN_MTU, 68).
            "net.ipv4.route.min_pmtu" => {
                self.route_min_pmtu = parse_num(n, value, 68, i32::MAX as u32, "at least 68")?
            }
            // proc_dointvec_jiffies: seconds.
            "net.ipv4.route.mtu_expires" => {
                self.route_mtu_expires = parse_num(n, value, 0, JIFFIES_MAX_S, "seconds")?
            }
            "net.ipv6.route.mtu_expires" => {
                self.ipv6_route_mtu_expires = parse_num(n, value, 0, JIFFIES_MAX_S, "seconds")?
            }
            // ip4_frags_ns_ctl_table: proc_doulongvec_minmax, the high at least the
            // low, the low at most the high.
            "net.ipv4.ipfrag_high_thresh" => {
                let low = self.ipfrag_low_thresh;
                self.ipfrag_high_thresh = parse_num(n, value, low, u64::MAX, "at least the low")?
            }
            "net.ipv4.ipfrag_low_thresh" => {
                let high = self.ipfrag_high_thresh;
                self.ipfrag_low_thresh = parse_num(n, value, 0, high, "at most the high")?
            }
            // proc_dointvec_jiffies: seconds.
            "net.ipv4.ipfrag_time" => {
                self.ipfrag_time = parse_num(n, value, 0, JIFFIES_MAX_S, "seconds")?
            }
            "net.ipv6.ip6frag_high_thresh" => {
                let low = self.ip6frag_low_thresh;
                self.ip6frag_high_thresh = parse_num(n, value, low, u64::MAX, "at least the low")?
            }
            "net.ipv6.ip6frag_low_thresh" => {
                let high = self.ip6frag_high_thresh;
                self.ip6frag_low_thresh = parse_num(n, value, 0, high, "at most the high")?
            }
            "net.ipv6.ip6frag_time" => {
                self.ip6frag_time = parse_num(n, value, 0, JIFFIES_MAX_S, "seconds")?
            }
            // ipv6_table_template: proc_dointvec, any int.
            "net.ipv6.max_hbh_opts_number" => self.ipv6_max_hbh_opts = parse_int(n, value)?,
            "net.ipv6.max_dst_opts_number" => self.ipv6_max_dst_opts = parse_int(n, value)?,
            "net.ipv6.max_hbh_length" => self.ipv6_max_hbh_length = parse_int(n, value)?,
            "net.ipv6.max_dst_opts_length" => self.ipv6_max_dst_opts_length = parse_int(n, value)?,
            // ipv6_table_template: proc_dou8vec_minmax to IP6_AUTO_FLOW_LABEL_MAX.
            "net.ipv6.auto_flowlabels" => {
                self.ipv6_auto_flowlabels = parse_num(n, value, 0, 3, "0..=3")?
            }
            "net.ipv6.flowlabel_state_ranges" => {
                self.ipv6_flowlabel_state_ranges = parse_num(n, value, 0u8, 1, "0 or 1")? == 1
            }
            // proc_dointvec_minmax to FLOWLABEL_REFLECT_MASK.
            "net.ipv6.flowlabel_reflect" => {
                self.ipv6_flowlabel_reflect = parse_num(n, value, 0, 7, "0..=7")?
            }
            // proc_dointvec_minmax, extra1 dist_min (0).
            "net.ipv4.ipfrag_max_dist" => {
                self.ipfrag_max_dist = parse_num(n, value, 0, i32::MAX as u32, "0 or more")?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
