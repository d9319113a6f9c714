//! `net.ipv4.tcp_*` sysctls (and `ip_local_port_range`), as sysctl_net_ipv4.c's table.

use super::parse::{
    bad, parse_bool, parse_num, parse_port_list, parse_ports, parse_triple, KEEPALIVE_MAX_S,
};
use super::{Config, ConfigError, CONGESTION_CONTROLS};

impl Config {
    /// Sets one `net.ipv4.tcp_*` sysctl (or `ip_local_port_range`); `Ok(false)` if `n` is none.
    pub(super) fn set_ipv4_tcp(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            "net.ipv4.tcp_wmem" => self.tcp_wmem = parse_triple(n, value)?,
            "net.ipv4.tcp_rmem" => self.tcp_rmem = parse_triple(n, value)?,
            "net.ipv4.tcp_mem" => self.tcp_mem = parse_triple(n, value)?,
            "net.ipv4.tcp_sack" => self.tcp_sack = parse_bool(n, value)?,
            "net.ipv4.tcp_dsack" => self.tcp_dsack = parse_bool(n, value)?,
            // proc_dou8vec_minmax; proc_doulongvec_minmax.
            "net.ipv4.tcp_comp_sack_nr" => {
                self.tcp_comp_sack_nr = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_comp_sack_delay_ns" => {
                self.tcp_comp_sack_delay_ns = parse_num(n, value, 0, u64::MAX, "nanoseconds")?
            }
            "net.ipv4.tcp_comp_sack_slack_ns" => {
                self.tcp_comp_sack_slack_ns = parse_num(n, value, 0, u64::MAX, "nanoseconds")?
            }
            "net.ipv4.tcp_timestamps" => self.tcp_timestamps = parse_bool(n, value)?,
            "net.ipv4.tcp_window_scaling" => self.tcp_window_scaling = parse_bool(n, value)?,
            "net.ipv4.tcp_moderate_rcvbuf" => self.tcp_moderate_rcvbuf = parse_bool(n, value)?,
            "net.ipv4.tcp_slow_start_after_idle" => {
                self.tcp_slow_start_after_idle = parse_bool(n, value)?
            }
            "net.ipv4.tcp_syn_retries" => {
                self.tcp_syn_retries = parse_num(n, value, 1, 127, "1..=127")?
            }
            "net.ipv4.tcp_synack_retries" => {
                self.tcp_synack_retries = parse_num(n, value, 1, 127, "1..=127")?
            }
            // tcp_syn_linear_timeouts_max (sysctl_net_ipv4.c).
            "net.ipv4.tcp_thin_linear_timeouts" => {
                self.tcp_thin_linear_timeouts = parse_bool(n, value)?
            }
            "net.ipv4.tcp_syn_linear_timeouts" => {
                self.tcp_syn_linear_timeouts = parse_num(n, value, 0, 10, "0..=10")?
            }
            "net.ipv4.tcp_retries2" => self.tcp_retries2 = parse_num(n, value, 1, 127, "1..=127")?,
            "net.ipv4.tcp_fin_timeout" => {
                self.tcp_fin_timeout = parse_num(n, value, 1, 3600, "seconds, 1..=3600")?
            }
            // proc_dointvec_jiffies: any positive number of seconds that fits.
            "net.ipv4.tcp_keepalive_time" => {
                self.tcp_keepalive_time = parse_num(n, value, 1, KEEPALIVE_MAX_S, "seconds")?
            }
            "net.ipv4.tcp_keepalive_intvl" => {
                self.tcp_keepalive_intvl = parse_num(n, value, 1, KEEPALIVE_MAX_S, "seconds")?
            }
            "net.ipv4.tcp_keepalive_probes" => {
                self.tcp_keepalive_probes = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_rto_min_us" => {
                self.tcp_rto_min_us = parse_num(n, value, 1, 120_000_000, "microseconds")?
            }
            "net.ipv4.tcp_rto_max_ms" => {
                self.tcp_rto_max_ms = parse_num(n, value, 1000, 120_000, "1000..=120000 ms")?
            }
            "net.ipv4.tcp_reordering" => {
                self.tcp_reordering = parse_num(n, value, 1, 300, "1..=300")?
            }
            // proc_dointvec: any int, read as u32 (min_t(u32, ...)).
            "net.ipv4.tcp_max_reordering" => {
                let v: i32 = parse_num(n, value, i32::MIN, i32::MAX, "an integer")?;
                self.tcp_max_reordering = v as u32;
            }
            "net.ipv4.tcp_recovery" => self.tcp_recovery = parse_num(n, value, 0, 7, "0..=7")?,
            "net.ipv4.tcp_early_retrans" => {
                self.tcp_early_retrans = parse_num(n, value, 0, 4, "0..=4")?
            }
            "net.ipv4.tcp_frto" => self.tcp_frto = parse_num(n, value, 0, 2, "0..=2")?,
            "net.ipv4.tcp_retrans_collapse" => self.tcp_retrans_collapse = parse_bool(n, value)?,
            "net.ipv4.tcp_min_rtt_wlen" => {
                self.tcp_min_rtt_wlen = parse_num(n, value, 0, 86_400, "0..=86400")?
            }
            "net.ipv4.tcp_congestion_control" => {
                let v = value.trim();
                if !CONGESTION_CONTROLS.contains(&v) {
                    return Err(bad(n, value, "one of: reno, cubic, bbr, dctcp"));
                }
                self.tcp_congestion_control = v.into();
            }
            "net.ipv4.ip_local_port_range" => self.ip_local_port_range = parse_ports(n, value)?,
            "net.ipv4.ip_local_reserved_ports" => {
                self.ip_local_reserved_ports = parse_port_list(n, value)?
            }
            "net.ipv4.ip_autobind_reuse" => self.ip_autobind_reuse = parse_bool(n, value)?,
            "net.ipv4.tcp_notsent_lowat" => {
                self.tcp_notsent_lowat = parse_num(n, value, 0, u32::MAX, "bytes")?
            }
            "net.ipv4.tcp_limit_output_bytes" => {
                self.tcp_limit_output_bytes = parse_num(n, value, 0, i32::MAX as u32, "bytes")?
            }
            "net.ipv4.tcp_autocorking" => self.tcp_autocorking = parse_bool(n, value)?,
            "net.ipv4.tcp_stdurg" => self.tcp_stdurg = parse_bool(n, value)?,
            "net.ipv4.tcp_pingpong_thresh" => {
                self.tcp_pingpong_thresh = parse_num(n, value, 1, 255, "1..=255")?
            }
            // 3-5 are AccECN's (tcp/ecn.rs). Linux 6.18 has their code but its
            // sysctl still refuses them (proc_dointvec_minmax up to 2); 6.19 takes 0-5.
            "net.ipv4.tcp_ecn" => self.tcp_ecn = parse_num(n, value, 0, 5, "0..=5")?,
            "net.ipv4.tcp_ecn_option" => self.tcp_ecn_option = parse_num(n, value, 0, 2, "0..=2")?,
            "net.ipv4.tcp_ecn_option_beacon" => {
                self.tcp_ecn_option_beacon = parse_num(n, value, 0, 3, "0..=3")?
            }
            "net.ipv4.tcp_ecn_fallback" => self.tcp_ecn_fallback = parse_bool(n, value)?,
            "net.ipv4.tcp_min_tso_segs" => {
                self.tcp_min_tso_segs = parse_num(n, value, 1, 255, "1..=255")?
            }
            "net.ipv4.tcp_tso_rtt_log" => {
                self.tcp_tso_rtt_log = parse_num(n, value, 0, 15, "0..=15")?
            }
            "net.ipv4.tcp_tso_win_divisor" => {
                self.tcp_tso_win_divisor = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_app_win" => self.tcp_app_win = parse_num(n, value, 0, 31, "0..=31")?,
            "net.ipv4.tcp_reflect_tos" => self.tcp_reflect_tos = parse_bool(n, value)?,
            "net.ipv4.tcp_pacing_ss_ratio" => {
                self.tcp_pacing_ss_ratio = parse_num(n, value, 0, 1000, "percent, 0..=1000")?
            }
            "net.ipv4.tcp_pacing_ca_ratio" => {
                self.tcp_pacing_ca_ratio = parse_num(n, value, 0, 1000, "percent, 0..=1000")?
            }
            "net.ipv4.tcp_orphan_retries" => {
                self.tcp_orphan_retries = parse_num(n, value, 0, 127, "0..=127")?
            }
            "net.ipv4.tcp_challenge_ack_limit" => {
                self.tcp_challenge_ack_limit = parse_num(n, value, 0, u32::MAX, "per second")?
            }
            "net.ipv4.tcp_invalid_ratelimit" => {
                self.tcp_invalid_ratelimit =
                    parse_num(n, value, 0, i32::MAX as u32, "milliseconds")?
            }
            // Linux bounds it by TCP_MIN_SND_MSS (48) and TCP_MIN_GSO_SIZE.
            "net.ipv4.tcp_min_snd_mss" => {
                self.tcp_min_snd_mss = parse_num(n, value, 48, 65535 - 40, "48..=65495")?
            }
            // proc_dou8vec_minmax 0..=2; proc_dointvec (the rest, non-negative here;
            // tcp_mtu_probe_floor proc_dointvec_minmax 48..=TCP_MIN_GSO_SIZE... 65535).
            // proc_dou8vec_minmax with TCP_RETR1_MAX (255).
            "net.ipv4.tcp_retries1" => self.tcp_retries1 = parse_num(n, value, 0, 255, "0..=255")?,
            "net.ipv4.tcp_mtu_probing" => {
                self.tcp_mtu_probing = parse_num(n, value, 0, 2, "0..=2")?
            }
            "net.ipv4.tcp_base_mss" => {
                self.tcp_base_mss = parse_num(n, value, 1, 65535, "1..=65535")?
            }
            "net.ipv4.tcp_mtu_probe_floor" => {
                self.tcp_mtu_probe_floor = parse_num(n, value, 48, 65535, "48..=65535")?
            }
            "net.ipv4.tcp_probe_threshold" => {
                self.tcp_probe_threshold = parse_num(n, value, 0, i32::MAX as u32, "bytes")?
            }
            "net.ipv4.tcp_probe_interval" => {
                self.tcp_probe_interval = parse_num(n, value, 0, u32::MAX, "seconds")?
            }
            // proc_dointvec: a negative value would disable the cap's users' checks
            // in odd ways; 0..=INT_MAX here.
            "net.ipv4.tcp_max_orphans" => {
                self.tcp_max_orphans = parse_num(n, value, 0, i32::MAX as u32, "0..=2147483647")?
            }
            "net.ipv4.tcp_max_tw_buckets" => {
                self.tcp_max_tw_buckets = parse_num(n, value, 0, i32::MAX as u32, "0..=2147483647")?
            }
            "net.ipv4.tcp_tw_reuse" => self.tcp_tw_reuse = parse_num(n, value, 0, 2, "0, 1 or 2")?,
            // proc_douintvec_minmax: 1..=TCP_PAWS_MSL * MSEC_PER_SEC.
            "net.ipv4.tcp_tw_reuse_delay" => {
                self.tcp_tw_reuse_delay = parse_num(n, value, 1, 60_000, "milliseconds, 1..=60000")?
            }
            // proc_dou8vec_minmax without bounds.
            "net.ipv4.tcp_shrink_window" => self.tcp_shrink_window = parse_bool(n, value)?,
            "net.ipv4.tcp_workaround_signed_windows" => {
                self.tcp_workaround_signed_windows = parse_bool(n, value)?
            }
            "net.ipv4.tcp_rfc1337" => self.tcp_rfc1337 = parse_num(n, value, 0, 255, "0..=255")?,
            "net.ipv4.tcp_no_metrics_save" => {
                self.tcp_no_metrics_save = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_no_ssthresh_metrics_save" => {
                self.tcp_no_ssthresh_metrics_save = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_syncookies" => {
                self.tcp_syncookies = parse_num(n, value, 0, 2, "0, 1 or 2")?
            }
            "net.ipv4.tcp_max_syn_backlog" => {
                self.tcp_max_syn_backlog = parse_num(n, value, 0, i32::MAX as u32, "requests")?
            }
            "net.ipv4.tcp_abort_on_overflow" => {
                self.tcp_abort_on_overflow = parse_num(n, value, 0, 255, "0..=255")?
            }
            "net.ipv4.tcp_fastopen" => {
                let v = crate::tcp::fastopen::parse_c_int(value)
                    .filter(|v| i32::try_from(*v).is_ok())
                    .ok_or_else(|| bad(n, value, "an integer (bits, e.g. 0x403)"))?;
                self.tcp_fastopen = v as i32 as u32;
            }
            "net.ipv4.tcp_fastopen_key" => {
                self.tcp_fastopen_key = crate::tcp::fastopen::FastOpenKeys::parse(value)
                    .ok_or_else(|| bad(n, value, "a key 'x-x-x-x' (hex), or 'key,backup'"))?
            }
            "net.ipv4.tcp_fastopen_blackhole_timeout_sec" => {
                self.tcp_fastopen_blackhole_timeout_sec =
                    parse_num(n, value, 0, i32::MAX as u32, "seconds")?
            }
            "net.ipv4.tcp_adv_win_scale" | "net.ipv4.tcp_fack" | "net.ipv4.tcp_low_latency" => {
                obsolete(n, value)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The sysctls Linux 6.18 still takes but reads nowhere: `tcp_adv_win_scale`
/// (proc_dointvec_minmax, -31..=31; the receive window comes from each socket's
/// `scaling_ratio` since dfa2f0483360, Linux 6.6), `tcp_fack` (proc_dou8vec_minmax,
/// "no effect anymore" since RACK, 4.15) and `tcp_low_latency` (proc_dointvec, obsolete
/// since 4.14). A value is checked as Linux's handler checks it and kept nowhere.
fn obsolete(n: &str, value: &str) -> Result<(), ConfigError> {
    match n {
        "net.ipv4.tcp_adv_win_scale" => parse_num(n, value, -31i32, 31, "-31..=31").map(drop),
        "net.ipv4.tcp_fack" => parse_num(n, value, 0u8, u8::MAX, "0..=255").map(drop),
        _ => parse_num(n, value, i32::MIN, i32::MAX, "an integer").map(drop),
    }
}

impl Config {
    /// `inet_is_local_reserved_port`: `net.ipv4.ip_local_reserved_ports` holds
    /// `port`, which the ephemeral searches then pass over.
    pub fn is_local_reserved_port(&self, port: u16) -> bool {
        self.ip_local_reserved_ports
            .iter()
            .any(|&[lo, hi]| (lo..=hi).contains(&port))
    }
}
