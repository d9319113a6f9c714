//! `net.core.*` sysctls, as net/core/sysctl_net_core.c's table.

use super::parse::{bad, parse_num};
use super::{Config, ConfigError, QDISCS};
use crate::tcp::consts::{SOCK_MIN_RCVBUF, SOCK_MIN_SNDBUF};

impl Config {
    /// Sets one `net.core.*` sysctl; `Ok(false)` if `n` is none.
    pub(super) fn set_core(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            "net.core.somaxconn" => self.somaxconn = parse_num(n, value, 1, 65535, "1..=65535")?,
            // proc_dointvec_minmax, extra1 = SYSCTL_ZERO.
            "net.core.optmem_max" => {
                self.optmem_max = parse_num(n, value, 0, i32::MAX as u32, "bytes, 0..=2147483647")?
            }
            // proc_dointvec_minmax, extra1 = SYSCTL_ZERO.
            "net.core.busy_poll" => {
                self.busy_poll_us =
                    parse_num(n, value, 0, i32::MAX as u32, "microseconds, 0..=2147483647")?
            }
            // proc_dointvec_minmax, extra1 = min_rcvbuf / min_sndbuf.
            "net.core.rmem_max" => {
                self.rmem_max =
                    parse_num(n, value, SOCK_MIN_RCVBUF, i32::MAX as u32, "bytes, 2304..")?
            }
            "net.core.wmem_max" => {
                self.wmem_max =
                    parse_num(n, value, SOCK_MIN_SNDBUF, i32::MAX as u32, "bytes, 4608..")?
            }
            // proc_dou8vec_minmax, 0..=1 (SOCK_TXREHASH_DISABLED/ENABLED).
            "net.core.txrehash" => self.txrehash = parse_num(n, value, 0, 1, "0 or 1")? == 1,
            "net.core.default_qdisc" => match QDISCS.contains(&value.trim()) {
                true => self.default_qdisc = value.trim().into(),
                false => {
                    return Err(bad(
                        n,
                        value,
                        "a qdisc: pfifo_fast, pfifo, bfifo, fq, fq_codel, sfq, noqueue",
                    ))
                }
            },
            _ => return Ok(false),
        }
        Ok(true)
    }
}
