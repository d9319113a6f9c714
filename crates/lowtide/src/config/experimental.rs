//! `experimental.*` switches: lowtide's own, for comparing its seeds' rules (no Linux sysctl).

use super::parse::{bad, parse_flag};
use super::{Config, ConfigError, RtxQueueKind, SizeGoalAt, TsqRule};

impl Config {
    /// Sets one `experimental.*` switch; `Ok(false)` if `n` is none.
    pub(super) fn set_experimental(&mut self, n: &str, value: &str) -> Result<bool, ConfigError> {
        match n {
            "experimental.notsent_wake_hysteresis" => {
                self.notsent_wake_hysteresis = parse_flag(n, value)?
            }
            "experimental.tsq" => self.tsq = parse_flag(n, value)?,
            "experimental.tsq_rule" => {
                self.tsq_rule = match value.trim().trim_matches('"') {
                    "rate" => TsqRule::Rate,
                    "fixed" => TsqRule::Fixed,
                    _ => return Err(bad(n, value, "rate or fixed")),
                }
            }
            "experimental.size_goal_at" => {
                self.size_goal_at = match value.trim().trim_matches('"') {
                    "transmit" => SizeGoalAt::Transmit,
                    "write" => SizeGoalAt::Write,
                    _ => return Err(bad(n, value, "transmit or write")),
                }
            }
            "experimental.rtx_queue" => {
                self.rtx_queue = match value.trim().trim_matches('"') {
                    "tree" => RtxQueueKind::Tree,
                    "list" => RtxQueueKind::List,
                    _ => return Err(bad(n, value, "tree or list")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}
