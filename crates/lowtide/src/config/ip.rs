//! IP-layer sysctls TCP reads: `net.ipv4.ip_default_ttl` (sysctl_net_ipv4.c) and
//! `net.ipv6.conf.all.hop_limit` (addrconf.c's `addrconf_sysctl`).

use super::parse::parse_num;
use super::{Config, ConfigError};

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
            _ => return Ok(false),
        }
        Ok(true)
    }
}
