//! Congestion control module parameters (`/sys/module/tcp_cubic/parameters/*`,
//! `/sys/module/tcp_dctcp/parameters/*`), as `module.NAME.PARAM`.

use super::parse::{bad, parse_num};
use super::{Config, ConfigError};

impl Config {
    /// Sets one `module.tcp_cubic.*` or `module.tcp_dctcp.*` parameter; `Ok(false)` if `n` is none.
    pub(super) fn set_module(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            "module.tcp_cubic.hystart_detect" => {
                self.tcp_cubic_hystart_detect = parse_num(n, value, 0, 3, "0..=3 (bits 1, 2)")?
            }
            // tcp_cubic.c's other writable parameters (0644): module_param(..., int)
            // takes any int (param_set_int), hystart a bool (param_set_bool).
            "module.tcp_cubic.hystart" => {
                self.tcp_cubic_hystart = match value.trim() {
                    "1" | "y" | "Y" => true,
                    "0" | "n" | "N" => false,
                    _ => return Err(bad(n, value, "a bool: 0/1/y/n/Y/N")),
                }
            }
            "module.tcp_cubic.hystart_low_window" => {
                let v: i32 = parse_num(n, value, i32::MIN, i32::MAX, "an int")?;
                self.tcp_cubic_hystart_low_window = v as u32;
            }
            "module.tcp_cubic.hystart_ack_delta_us" => {
                self.tcp_cubic_hystart_ack_delta_us =
                    parse_num(n, value, i32::MIN, i32::MAX, "an int")?
            }
            "module.tcp_cubic.fast_convergence" => {
                let v: i32 = parse_num(n, value, i32::MIN, i32::MAX, "an int")?;
                self.tcp_cubic_fast_convergence = v != 0;
            }
            "module.tcp_cubic.tcp_friendliness" => {
                let v: i32 = parse_num(n, value, i32::MIN, i32::MAX, "an int")?;
                self.tcp_cubic_tcp_friendliness = v != 0;
            }
            "module.tcp_cubic.initial_ssthresh" => {
                let v: i32 = parse_num(n, value, i32::MIN, i32::MAX, "an int")?;
                self.tcp_cubic_initial_ssthresh = v as u32;
            }
            // dctcp_shift_g_set: param_set_uint_minmax(val, kp, 0, 10).
            "module.tcp_dctcp.dctcp_shift_g" => {
                self.tcp_dctcp_shift_g = parse_num(n, value, 0, 10, "0..=10")?
            }
            // module_param(dctcp_alpha_on_init, uint): any u32, capped at 1024 at use.
            "module.tcp_dctcp.dctcp_alpha_on_init" => {
                self.tcp_dctcp_alpha_on_init = parse_num(n, value, 0, u32::MAX, "0..=4294967295")?
            }
            // proc_dointvec: any int, in any C base.
            _ => return Ok(false),
        }
        Ok(true)
    }
}
