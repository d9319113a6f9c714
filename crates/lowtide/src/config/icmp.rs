//! ICMP sysctls: `net.ipv4.icmp_*` (sysctl_net_ipv4.c) and `net.ipv6.icmp.*`
//! (net/ipv6/icmp.c's `ipv6_icmp_table_template`).

use super::parse::{parse_bool, parse_num};
use super::{Config, ConfigError};

impl Config {
    /// Sets one `net.ipv4.icmp_*` or `net.ipv6.icmp.*` sysctl; `Ok(false)` if `n` is none.
    pub(super) fn set_icmp(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            // proc_dointvec_ms_jiffies; proc_dointvec; proc_dointvec_minmax from 0;
            // proc_dou8vec_minmax 0..=1 (sysctl_net_ipv4.c, sysctl_net_ipv6.c).
            "net.ipv4.icmp_ratelimit" => {
                self.icmp_ratelimit = parse_num(n, value, 0, i32::MAX as u32, "milliseconds")?
            }
            "net.ipv6.icmp.ratelimit" => {
                self.icmpv6_ratelimit = parse_num(n, value, 0, i32::MAX as u32, "milliseconds")?
            }
            "net.ipv4.icmp_ratemask" => {
                self.icmp_ratemask =
                    parse_num::<i64>(n, value, i32::MIN.into(), u32::MAX.into(), "a bit mask")?
                        as u32
            }
            "net.ipv4.icmp_msgs_per_sec" => {
                self.icmp_msgs_per_sec = parse_num(n, value, 0, i32::MAX as u32, "0..=2147483647")?
            }
            "net.ipv4.icmp_msgs_burst" => {
                self.icmp_msgs_burst = parse_num(n, value, 0, i32::MAX as u32, "0..=2147483647")?
            }
            "net.ipv4.icmp_echo_ignore_all" => self.icmp_echo_ignore_all = parse_bool(n, value)?,
            "net.ipv4.icmp_echo_ignore_broadcasts" => {
                self.icmp_echo_ignore_broadcasts = parse_bool(n, value)?
            }
            "net.ipv6.icmp.echo_ignore_all" => self.icmpv6_echo_ignore_all = parse_bool(n, value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
