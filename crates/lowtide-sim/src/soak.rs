//! Randomized transfers (`lowtide sim soak`): a generator of fixed-size transfer
//! scenarios over every impairment and behaviour-changing sysctl, a liveness
//! deadline derived from each scenario's parameters, and the check of every flow.
//!
//! A case is a function of `(soak seed, run index)` alone, and it is expressed in
//! `lowtide sim stream` flags ([`SoakCase::args`]), so any failing run is reproduced
//! by one command.

use crate::hostile::Attack;
use crate::payload::PayloadMode;
use crate::scenario::{RunResults, Scenario, Workload};
use lowtide::{Config, ConfigError};
use lowtide_link::LinkConfig;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::Serialize;
use std::time::Duration;

/// Linux's `TCP_RTO_MAX` (120 s): the longest backed-off retransmission timeout.
const TCP_RTO_MAX_S: f64 = 120.0;
/// Linux's `TCP_TIMEOUT_INIT` (1 s): the RTO before any RTT sample
/// ([RFC 6298 2.1](https://www.rfc-editor.org/rfc/rfc6298#section-2.1)).
const TCP_TIMEOUT_INIT_S: f64 = 1.0;
/// Most bytes a case moves in total (keeps a run around a second of CPU or less).
const MAX_TOTAL_BYTES: u64 = 24_000_000;
/// Chance, over a whole soak, that a healthy run still misses its deadline because
/// of an unlucky run of consecutive losses of one segment (the deadline allows for
/// the run of losses this rare).
const CONSECUTIVE_LOSS_TAIL: f64 = 1e-9;
/// Share of the runs with a hostile peer beside the flows ([`crate::hostile`]).
const HOSTILE_SHARE: f64 = 0.2;

/// One randomized transfer: `flows` flows of `bytes` each from A to B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakCase {
    /// Index of the run in its soak.
    pub run: u64,
    /// The scenario's seed (stacks, link impairments, payload).
    pub seed: u64,
    /// Concurrent flows.
    pub flows: u32,
    /// Bytes per flow.
    pub bytes: u64,
    /// Link rate, both directions (bit/s).
    pub rate_bps: u64,
    /// Round-trip propagation delay (µs).
    pub rtt_us: u64,
    /// Loss on A->B (data).
    pub loss: f64,
    /// Loss on B->A (ACKs).
    pub loss_reverse: f64,
    /// Mean loss burst length in segments (1: independent losses).
    pub loss_burst: f64,
    /// A->B jitter (µs).
    pub jitter_us: u64,
    /// A->B reordering, duplication and corruption probabilities.
    pub reorder: f64,
    /// See `reorder`.
    pub duplicate: f64,
    /// See `reorder`.
    pub corrupt: f64,
    /// NIC queue limit (packets).
    pub queue: u64,
    /// MSS, if not the default.
    pub mss: Option<u32>,
    /// GRO on both hosts.
    pub gro: bool,
    /// `TCP_NOTSENT_LOWAT` on the senders, if set.
    pub notsent_lowat: Option<u32>,
    /// `name=value` sysctls for both hosts, in order.
    pub sysctls: Vec<String>,
    /// Liveness bound: the run must finish within this much simulated time (s).
    pub deadline_s: u64,
    /// How the senders hand over their bytes (`--payload`; not drawn: the soak's
    /// choice for every run, reported only when not the default).
    #[serde(skip_serializing_if = "PayloadMode::is_stored")]
    pub payload: PayloadMode,
    /// A hostile peer attacking the receiving host beside the flows (`--hostile`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostile: Option<Attack>,
}

/// What one run's check found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SoakOutcome {
    /// Every flow connected and delivered every byte intact within the deadline.
    pub ok: bool,
    /// One line per failing flow (and the run's own stop reason), empty if `ok`.
    pub reasons: Vec<String>,
    /// Bytes delivered and verified over all flows.
    pub bytes_delivered: u64,
    /// Simulated time the run took (s).
    pub sim_s: f64,
    /// Segments retransmitted over all flows.
    pub retrans_segs: u64,
    /// Flows reset by the receiver's listener after a failed SYN cookie check,
    /// accepted as Linux behaviour in runs that exercise cookies (see
    /// [`SoakCase::check`]); counted here, never hidden.
    pub cookie_resets: u64,
    /// The hostile peer's figures and the victim's bound, in a run with one.
    pub hostile: Option<crate::hostile::HostileResult>,
}

/// A uniform draw in `[0, 1)`.
fn unit(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Log-uniform in `[lo, hi]`.
fn log_uniform(rng: &mut ChaCha8Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + unit(rng) * (hi.ln() - lo.ln())).exp()
}

fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    unit(rng) < p
}

fn pick<'a>(rng: &mut ChaCha8Rng, xs: &[&'a str]) -> &'a str {
    xs[(rng.next_u64() % xs.len() as u64) as usize]
}

/// A probability rounded to 6 decimals (so the flag text is the exact value).
fn prob(p: f64) -> f64 {
    (p * 1e6).round() / 1e6
}

/// The seed of run `run` of a soak seeded `soak_seed` (splitmix64 of both).
pub fn case_seed(soak_seed: u64, run: u64) -> u64 {
    let mut z = soak_seed
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(run.wrapping_add(1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SoakCase {
    /// Draws run `run` of the soak seeded `soak_seed`.
    pub fn generate(soak_seed: u64, run: u64) -> SoakCase {
        let seed = case_seed(soak_seed, run);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let r = &mut rng;
        let flows = match unit(r) {
            x if x < 0.55 => 1 + (r.next_u64() % 4) as u32,
            x if x < 0.9 => 5 + (r.next_u64() % 46) as u32,
            _ => 51 + (r.next_u64() % 150) as u32,
        };
        let bytes = log_uniform(r, 1.0, 3e6) as u64;
        let bytes = bytes.clamp(1, MAX_TOTAL_BYTES / flows as u64);
        let rate_bps = log_uniform(r, 1e6, 1e10) as u64;
        let rtt_us = log_uniform(r, 10.0, 400_000.0) as u64;
        let lossy = |r: &mut ChaCha8Rng, p: f64| match chance(r, p) {
            true => prob(log_uniform(r, 1e-4, 0.3)),
            false => 0.0,
        };
        let loss = lossy(r, 0.6);
        let loss_reverse = lossy(r, 0.3);
        let loss_burst = match chance(r, 0.3) && loss.max(loss_reverse) > 0.0 {
            true => ((1.0 + unit(r) * 4.0) * 10.0).round() / 10.0,
            false => 1.0,
        };
        let jitter_us = match chance(r, 0.2) {
            true => r.next_u64() % (rtt_us / 2 + 1),
            false => 0,
        };
        let reorder = if chance(r, 0.2) {
            prob(unit(r) * 0.2)
        } else {
            0.0
        };
        let duplicate = if chance(r, 0.15) {
            prob(unit(r) * 0.1)
        } else {
            0.0
        };
        let corrupt = if chance(r, 0.15) {
            prob(unit(r) * 0.05)
        } else {
            0.0
        };
        let queue = match unit(r) {
            x if x < 0.2 => 1 + r.next_u64() % 10,
            x if x < 0.3 => 100_000,
            _ => log_uniform(r, 10.0, 3000.0) as u64,
        };
        let mss = chance(r, 0.3).then(|| log_uniform(r, 88.0, 9000.0) as u32);
        let gro = chance(r, 0.5);
        let notsent_lowat = chance(r, 0.15).then(|| log_uniform(r, 1.0, 1e6) as u32);
        // Drops in the NIC queue are likely when it holds fewer packets than flows.
        let lossy = loss.max(loss_reverse) > 0.0 || corrupt > 0.0 || queue < 4 * flows as u64;
        // A hostile peer's packets share host B's queue with the flows' ACKs.
        let hostile = hostile(seed);
        let sysctls = sysctls(r, lossy || hostile.is_some(), flows);
        let mut c = SoakCase {
            run,
            seed,
            flows,
            bytes,
            rate_bps,
            rtt_us,
            loss,
            loss_reverse,
            loss_burst,
            jitter_us,
            reorder,
            duplicate,
            corrupt,
            queue,
            mss,
            gro,
            notsent_lowat,
            sysctls,
            deadline_s: 0,
            payload: PayloadMode::Stored,
            hostile,
        };
        c.deadline_s = c.liveness_deadline_s();
        c
    }

    /// The stacks' configuration: defaults, then the MSS, then each sysctl (the
    /// order `lowtide sim stream` applies them in).
    pub fn config(&self) -> Result<Config, ConfigError> {
        let mut cfg = Config::default();
        if let Some(mss) = self.mss {
            cfg.mtu = mss + 40;
        }
        for s in &self.sysctls {
            cfg.set_assignment(s)?;
        }
        Ok(cfg)
    }

    /// The scenario, exactly as `lowtide sim stream` builds it from [`SoakCase::args`].
    pub fn scenario(&self) -> Result<Scenario, ConfigError> {
        let one_way = (Duration::from_micros(self.rtt_us) / 2).as_nanos() as u64;
        let base = LinkConfig {
            rate_bps: self.rate_bps,
            delay_ns: one_way,
            loss_burst: self.loss_burst,
            ..LinkConfig::default()
        };
        Ok(Scenario {
            seed: self.seed,
            flows: self.flows,
            workload: Workload::Bytes {
                bytes: self.bytes,
                time_limit_ns: self.deadline_s * 1_000_000_000,
            },
            link_ab: LinkConfig {
                loss: self.loss,
                jitter_ns: self.jitter_us * 1_000,
                reorder: self.reorder,
                duplicate: self.duplicate,
                corrupt: self.corrupt,
                ..base.clone()
            },
            link_ba: LinkConfig {
                loss: self.loss_reverse,
                ..base
            },
            queue_limit: self.queue as usize,
            gro: self.gro,
            config: self.config()?,
            notsent_lowat: self.notsent_lowat,
            payload: self.payload,
            hostile: self.hostile,
            ..Scenario::default()
        })
    }

    /// The `lowtide sim stream` flags of this case (after `lowtide sim stream`).
    pub fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            format!("--flows={}", self.flows),
            format!("--bytes={}", self.bytes),
            format!("--rate={}", self.rate_bps),
            format!("--rtt={}us", self.rtt_us),
        ];
        let mut opt = |name: &str, on: bool, v: String| {
            if on {
                a.push(format!("--{name}={v}"));
            }
        };
        opt("loss", self.loss > 0.0, self.loss.to_string());
        opt(
            "loss-reverse",
            self.loss_reverse > 0.0,
            self.loss_reverse.to_string(),
        );
        opt(
            "loss-burst",
            self.loss_burst > 1.0,
            self.loss_burst.to_string(),
        );
        opt(
            "jitter",
            self.jitter_us > 0,
            format!("{}us", self.jitter_us),
        );
        opt("reorder", self.reorder > 0.0, self.reorder.to_string());
        opt(
            "duplicate",
            self.duplicate > 0.0,
            self.duplicate.to_string(),
        );
        opt("corrupt", self.corrupt > 0.0, self.corrupt.to_string());
        opt("queue", true, self.queue.to_string());
        opt("mss", self.mss.is_some(), self.mss.unwrap_or(0).to_string());
        opt("gro", true, if self.gro { "on" } else { "off" }.into());
        let lowat = self.notsent_lowat.unwrap_or(0);
        opt(
            "notsent-lowat",
            self.notsent_lowat.is_some(),
            lowat.to_string(),
        );
        opt("seed", true, self.seed.to_string());
        opt("time-limit", true, format!("{}s", self.deadline_s));
        for s in &self.sysctls {
            a.push(format!("--sysctl={s}"));
        }
        if self.payload == PayloadMode::Pattern {
            a.push("--payload=pattern".into());
        }
        if let Some(h) = self.hostile {
            a.push(format!("--hostile={h}"));
        }
        a
    }

    /// One shell command that reruns this case.
    pub fn repro(&self) -> String {
        let mut s = String::from("lowtide sim stream");
        for a in self.args() {
            s.push(' ');
            match a.contains(' ') {
                true => s.push_str(&format!("'{a}'")),
                false => s.push_str(&a),
            }
        }
        s
    }

    /// The liveness bound (s of simulated time), from the parameters:
    /// - the transfer itself: all bytes (plus headers) through the link rate, four
    ///   times over (slow start, recovery, the NIC queue), a window per round trip
    ///   four times over (the buffers' maxima), plus slow start's rounds of the RTT
    ///   (and the jitter and reordering hold);
    /// - a first receive window below one segment (tiny `tcp_rmem`, big MSS): a
    ///   persist timeout per segment, as sender SWS avoidance waits; below two
    ///   segments: a delayed ACK (200 ms at most) per segment;
    /// - retransmissions: every segment of a flow may need an RTO (at least
    ///   `tcp_rto_min`, or 2 RTTs) once per expected loss, backed off for as long as
    ///   its retransmissions are expected to be lost again, the first ones at the
    ///   initial 1 s RTO;
    /// - connection setup through a NIC queue or a listen backlog shorter than the
    ///   number of flows: `flows / queue` rounds of SYNs, backing off together;
    /// - the worst run of consecutive losses of one segment that is not
    ///   astronomically unlikely (`CONSECUTIVE_LOSS_TAIL` over all segments), with
    ///   exponential backoff up to `TCP_RTO_MAX`, for the SYN as for data;
    /// - a slack of 30 s (the receiver's FIN handshake, delayed ACKs, probes).
    pub fn liveness_deadline_s(&self) -> u64 {
        let mss = self.mss.unwrap_or(1460).max(48) as f64;
        let segs = (self.bytes as f64 / mss).ceil().max(1.0);
        let wire = self.flows as f64 * segs * (mss + 100.0) * 8.0;
        let rtt = self.rtt_us as f64 / 1e6;
        let hold = self.jitter_us as f64 / 1e6
            + if self.reorder > 0.0 {
                rtt / 2.0 + 1e-4
            } else {
                0.0
            };
        // A flow moves at most a window per round trip: a quarter of the smaller
        // buffer maximum (the receive window is half the buffer, and the send buffer
        // holds the unacknowledged data), 64 KB without window scaling.
        let cfg = self.config().unwrap_or_default();
        let mut wnd = (cfg.tcp_rmem[2].min(cfg.tcp_wmem[2]) as f64 / 4.0).max(2.0 * mss);
        // A connection flood makes the flows connect through SYN cookies, which
        // carry window scaling only inside the timestamp option.
        let flood = self.hostile == Some(Attack::ConnFlood);
        if !cfg.tcp_window_scaling || (flood && !cfg.tcp_timestamps) {
            wnd = wnd.min(65_535.0);
        }
        let mut window_bound = 4.0 * self.bytes as f64 / wnd * (rtt + hold);
        let queue_rtt = self.queue.min(1 << 16) as f64 * (mss + 100.0) * 8.0 / self.rate_bps as f64;
        let rto_min = cfg.tcp_rto_min_us as f64 / 1e6;
        let rto = rto_min.max(2.0 * (rtt + hold + queue_rtt)) + 0.04;
        let first_wnd = (cfg.tcp_rmem[1] / 2) as f64;
        if first_wnd <= mss {
            // A first receive window below one segment: the sender's SWS avoidance
            // (RFC 1122 4.2.3.4) waits for its persist timer for each segment.
            window_bound += segs * 4.0 * rto;
        } else if first_wnd < 2.0 * mss {
            // Room for one segment only: the receiver delays the ACK of a single
            // segment (RFC 1122 4.2.3.2; up to 200 ms in Linux) before the next.
            window_bound += segs * (0.2 + rtt + hold);
        }
        let transfer = 4.0 * wire / self.rate_bps as f64
            + window_bound
            + (segs.log2() + 12.0) * (2.0 * rtt + hold);
        // A data segment or its ACK is lost (or corrupted), or dropped by a NIC queue
        // holding fewer packets than there are flows (a GSO packet counts once, so
        // each flow may need a slot): one attempt fails.
        let fwd = (self.loss + self.corrupt).min(1.0);
        let local = (1.0 - self.queue as f64 / self.flows as f64).max(0.0);
        let p = 1.0 - (1.0 - fwd) * (1.0 - self.loss_reverse) * (1.0 - local);
        // With bursts, a retransmission sent right after a loss is lost again with
        // the chance of staying in the bad state.
        let p_again = match self.loss_burst > 1.0 {
            true => p.max(1.0 - 1.0 / self.loss_burst),
            false => p,
        };
        // One loss episode: an RTO, then another (doubled) each time the
        // retransmission is lost again, up to `TCP_RTO_MAX`.
        let episode: f64 = (0..200)
            .map(|i| p_again.powi(i) * (rto * 2f64.powi(i.min(30))).min(TCP_RTO_MAX_S))
            .sum();
        let retrans =
            segs * p / (1.0 - p).max(0.05) * 3.0 * episode + TCP_TIMEOUT_INIT_S * 8.0 * p.sqrt();
        let total_segs = segs * self.flows as f64 + 2.0 * self.flows as f64;
        let k = match p_again > 0.0 {
            true => ((CONSECUTIVE_LOSS_TAIL / total_segs).ln() / p_again.ln())
                .ceil()
                .clamp(1.0, 10_000.0),
            false => 0.0,
        };
        let backoff: f64 = (0..k as u32)
            .map(|i| (TCP_TIMEOUT_INIT_S.max(rto) * 2f64.powi(i.min(30) as i32)).min(TCP_RTO_MAX_S))
            .sum();
        // Synchronized SYNs into a short queue: `queue` of them get through per
        // round, and the rounds back off together (1 s, 2 s, ... up to 120 s).
        // The same for a listen backlog (`somaxconn` caps the simulator's
        // `max(flows, 128)`) shorter than the flows: SYNs beyond it are dropped.
        let backlog = (cfg.somaxconn as u64).min((self.flows as u64).max(128));
        // A flood's SYN queue (backlog + 1 requests, their SYN-ACKs sent again on the
        // same backed-off schedule as the flows' SYNs) and its silent handshakes
        // share host B's queue with the flows' SYN-ACKs.
        let hostile_syns = match flood {
            true => backlog + 1 + crate::hostile::FLOOD_SILENT as u64,
            false => 0,
        };
        let syn_rounds =
            (self.flows as u64 + hostile_syns).div_ceil(self.queue.min(backlog).max(1)) as u32;
        let syn: f64 = (0..syn_rounds.min(10_000))
            .map(|i| (TCP_TIMEOUT_INIT_S * 2f64.powi(i.min(30) as i32)).min(TCP_RTO_MAX_S))
            .sum();
        let total = 30.0 + transfer + retrans + backoff + 4.0 * queue_rtt + syn;
        total.ceil().min(1e7) as u64
    }

    /// Whether the case deliberately exercises SYN cookies: a listen backlog
    /// (`somaxconn`) shorter than its flows, with `tcp_syncookies` on.
    pub fn exercises_cookies(&self) -> bool {
        let flood = self.hostile == Some(Attack::ConnFlood);
        self.config().is_ok_and(|c| {
            ((c.somaxconn as u64) < self.flows as u64 || flood) && c.tcp_syncookies != 0
        })
    }

    /// Checks a run's results: every flow connected, delivered `bytes` intact, and
    /// the run ended within the deadline; otherwise one reason per failing flow.
    ///
    /// One exception, Linux's behaviour under SYN cookies: a segment that reaches the
    /// listener before the ACK that completes a cookie handshake (reordered by jitter,
    /// or after that ACK was lost) fails the cookie check (its sequence number is not
    /// the cookie's ISN + 1), and the listener answers it with a RST, which resets the
    /// client (`cookie_v4_check` returns the listener, `tcp_rcv_state_process` in
    /// LISTEN returns 1 for an ACK, `tcp_v4_do_rcv` sends the reset). In a case that
    /// exercises cookies, a flow that failed *only* by a reset passes if the receiver
    /// sent it a listener's RST (without ACK, `FlowResult::listener_resets`) and the
    /// receiver counted at least as many failed cookie checks (`TcpExtSyncookiesFailed`,
    /// each answered by one such RST) as there are such flows; they are reported as
    /// `cookie_resets`. Any other failure, a reset in another case or by the
    /// connection itself, or more resets than failed cookie checks fails the run.
    pub fn check(&self, r: &RunResults) -> SoakOutcome {
        let mut reasons = Vec::new();
        // Reset flows that the receiver's listener had sent a RST (without ACK).
        let by_listener = |flow: u32| {
            r.per_flow
                .iter()
                .any(|f| f.flow == flow && f.listener_resets > 0)
        };
        let resets: Vec<u32> = r
            .verdict
            .failed
            .iter()
            .filter(|f| f.failure == crate::verdict::FlowFailure::Reset && by_listener(f.flow))
            .map(|f| f.flow)
            .collect();
        let cookie_failures = r
            .counters_receiver
            .get(lowtide::Mib::TcpExtSyncookiesFailed);
        let cookie_resets = match self.exercises_cookies() {
            true if resets.len() as u64 <= cookie_failures => resets,
            true if !resets.is_empty() => {
                reasons.push(format!(
                    "{} flows reset but only {cookie_failures} failed SYN cookie checks",
                    resets.len()
                ));
                Vec::new()
            }
            _ => Vec::new(),
        };
        // The run's verdict (crate::verdict) judges each flow: connected, every byte
        // intact, the end of stream after exactly `bytes`.
        for f in &r.per_flow {
            if cookie_resets.contains(&f.flow) {
                continue;
            }
            if !f.verified || f.bytes_delivered != self.bytes {
                let why = f.failure.clone().unwrap_or_else(|| {
                    format!("delivered {} of {} bytes", f.bytes_delivered, self.bytes)
                });
                reasons.push(format!("flow {}: {why}", f.flow));
            }
        }
        if r.per_flow.len() != self.flows as usize {
            reasons.push(format!(
                "{} flow results for {} flows",
                r.per_flow.len(),
                self.flows
            ));
        }
        if !r.verdict.ok && reasons.is_empty() && r.verdict.failed.len() > cookie_resets.len() {
            reasons.push(format!("run: {}", r.verdict.summary()));
        }
        reasons.extend(self.check_hostile(r));
        if reasons.iter().any(|r| r.contains("time limit")) {
            reasons.push(format!(
                "liveness deadline of {} s of simulated time (from the parameters) passed",
                self.deadline_s
            ));
        }
        SoakOutcome {
            ok: reasons.is_empty(),
            reasons,
            bytes_delivered: r.per_flow.iter().map(|f| f.bytes_delivered).sum(),
            sim_s: r.duration_s,
            retrans_segs: r.per_flow.iter().map(|f| f.retrans_segs).sum(),
            cookie_resets: cookie_resets.len() as u64,
            hostile: r.hostile.clone(),
        }
    }

    /// The victim's bound under the hostile peer, and that the attack took place.
    fn check_hostile(&self, r: &RunResults) -> Vec<String> {
        let mut reasons = Vec::new();
        match (self.hostile, &r.hostile) {
            (None, None) => {}
            (Some(a), Some(h)) => {
                if let Some(v) = &h.violation {
                    reasons.push(format!("victim under {a}: {v}"));
                }
                if let Some(why) = &h.not_run {
                    reasons.push(format!("hostile peer ({a}) did not attack: {why}"));
                }
            }
            (want, got) => reasons.push(format!(
                "hostile peer: {want:?} asked for, {:?} ran",
                got.as_ref().map(|h| &h.attack)
            )),
        }
        reasons
    }

    /// Runs the case and checks it.
    pub fn run(&self) -> SoakOutcome {
        let sc = match self.scenario() {
            Ok(sc) => sc,
            Err(e) => return self.invalid(e.to_string()),
        };
        match sc.run() {
            Ok(r) => self.check(&r),
            Err(e) => self.invalid(e.to_string()),
        }
    }

    fn invalid(&self, why: String) -> SoakOutcome {
        SoakOutcome {
            ok: false,
            reasons: vec![format!("scenario not run: {why}")],
            bytes_delivered: 0,
            sim_s: 0.0,
            retrans_segs: 0,
            cookie_resets: 0,
            hostile: None,
        }
    }
}

/// Whether run `seed` has a hostile peer, and which: drawn from a stream of its own,
/// so that the rest of every case is the same with or without the hostile runs.
fn hostile(seed: u64) -> Option<Attack> {
    let mut r = ChaCha8Rng::seed_from_u64(crate::payload::splitmix64(seed ^ 0x4057_11e0));
    chance(&mut r, HOSTILE_SHARE).then(|| Attack::ALL[(r.next_u64() % 3) as usize])
}

/// Behaviour-changing sysctls, each drawn on or off; `lossy` runs (loss,
/// corruption, a NIC queue short for the flows, or a hostile peer) and runs whose listen backlog
/// (`somaxconn`) is shorter than the flows also get the retry limits (orphans'
/// included) raised, so that giving up (a correct outcome there) does not mask what
/// the soak looks for: lost bytes and stalls.
fn sysctls(r: &mut ChaCha8Rng, lossy: bool, flows: u32) -> Vec<String> {
    let mut s = Vec::new();
    let mut maybe = |r: &mut ChaCha8Rng, p: f64, v: String| {
        if chance(r, p) {
            s.push(v);
        }
    };
    let cc = pick(r, &["reno", "cubic", "bbr"]);
    maybe(r, 1.0, format!("net.ipv4.tcp_congestion_control={cc}"));
    maybe(r, 0.25, "net.ipv4.tcp_sack=0".into());
    maybe(r, 0.2, "net.ipv4.tcp_dsack=0".into());
    maybe(r, 0.25, "net.ipv4.tcp_timestamps=0".into());
    maybe(r, 0.25, "net.ipv4.tcp_window_scaling=0".into());
    maybe(r, 0.15, "net.ipv4.tcp_moderate_rcvbuf=0".into());
    maybe(r, 0.15, "net.ipv4.tcp_slow_start_after_idle=0".into());
    let rec = r.next_u64() % 8;
    maybe(r, 0.25, format!("net.ipv4.tcp_recovery={rec}"));
    let er = r.next_u64() % 5;
    maybe(r, 0.15, format!("net.ipv4.tcp_early_retrans={er}"));
    let frto = r.next_u64() % 3;
    maybe(r, 0.2, format!("net.ipv4.tcp_frto={frto}"));
    let reo = 1 + r.next_u64() % 300;
    maybe(r, 0.1, format!("net.ipv4.tcp_reordering={reo}"));
    let wmem = pick(
        r,
        &[
            "4096 8192 16384",
            "4096 16384 65536",
            "4096 1048576 67108864",
        ],
    );
    maybe(r, 0.25, format!("net.ipv4.tcp_wmem={wmem}"));
    let rmem = pick(
        r,
        &[
            "4096 8192 16384",
            "4096 65536 131072",
            "4096 1048576 67108864",
        ],
    );
    maybe(r, 0.25, format!("net.ipv4.tcp_rmem={rmem}"));
    let lowat = log_uniform(r, 1.0, 1e6) as u32;
    maybe(r, 0.1, format!("net.ipv4.tcp_notsent_lowat={lowat}"));
    let lob = log_uniform(r, 1.0, 1e7) as u32;
    maybe(r, 0.1, format!("net.ipv4.tcp_limit_output_bytes={lob}"));
    let mts = 1 + r.next_u64() % 16;
    maybe(r, 0.1, format!("net.ipv4.tcp_min_tso_segs={mts}"));
    let div = 1 + r.next_u64() % 8;
    maybe(r, 0.1, format!("net.ipv4.tcp_tso_win_divisor={div}"));
    let ss = 100 + r.next_u64() % 300;
    maybe(r, 0.1, format!("net.ipv4.tcp_pacing_ss_ratio={ss}"));
    let ca = 100 + r.next_u64() % 200;
    maybe(r, 0.1, format!("net.ipv4.tcp_pacing_ca_ratio={ca}"));
    let rto_min = log_uniform(r, 1_000.0, 1_000_000.0) as u32;
    maybe(r, 0.1, format!("net.ipv4.tcp_rto_min_us={rto_min}"));
    let rtt_log = r.next_u64() % 16;
    maybe(r, 0.1, format!("net.ipv4.tcp_tso_rtt_log={rtt_log}"));
    let somaxconn = 1 + r.next_u64() % 64;
    let short_backlog = chance(r, 0.1) && somaxconn < flows as u64;
    // At least 2 ports per possible flow, so that connect() always finds one.
    let lo = 1024 + r.next_u64() % 60_000;
    maybe(
        r,
        0.1,
        format!("net.ipv4.ip_local_port_range={lo} {}", lo + 400),
    );
    maybe(r, 0.2, "experimental.notsent_wake_hysteresis=false".into());
    maybe(r, 0.2, "experimental.tsq=false".into());
    maybe(r, 0.2, "experimental.size_goal_at=write".into());
    maybe(r, 0.3, "experimental.rtx_queue=list".into());
    maybe(r, 0.2, "net.ipv4.tcp_autocorking=0".into());
    if short_backlog {
        s.push(format!("net.core.somaxconn={somaxconn}"));
    }
    if lossy || short_backlog {
        s.push("net.ipv4.tcp_syn_retries=127".into());
        s.push("net.ipv4.tcp_synack_retries=127".into());
        s.push("net.ipv4.tcp_retries2=127".into());
        // A receiver that closed (LAST-ACK, orphaned) gives up after
        // tcp_orphan_retries, not tcp_retries2; then the sender's next
        // retransmission draws the listener's RST (run 7954).
        s.push("net.ipv4.tcp_orphan_retries=127".into());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_deterministic_and_valid() {
        for run in 0..300 {
            let a = SoakCase::generate(7, run);
            assert_eq!(a, SoakCase::generate(7, run));
            assert!(a.scenario().is_ok(), "run {run}: {:?}", a.scenario().err());
            assert!((1..=200).contains(&a.flows));
            assert!(a.loss <= 0.3 && a.loss_reverse <= 0.3);
            assert!(a.deadline_s >= 30);
        }
        assert_ne!(SoakCase::generate(7, 0), SoakCase::generate(8, 0));
    }

    #[test]
    fn deadline_grows_with_bytes_loss_and_rtt() {
        let mut c = SoakCase::generate(1, 0);
        c.sysctls.clear();
        (c.flows, c.bytes, c.rate_bps, c.rtt_us, c.mss) = (1, 1_000_000, 10_000_000, 10_000, None);
        (
            c.loss,
            c.loss_reverse,
            c.loss_burst,
            c.corrupt,
            c.jitter_us,
            c.reorder,
        ) = (0.0, 0.0, 1.0, 0.0, 0, 0.0);
        c.queue = 1000;
        let clean = c.liveness_deadline_s();
        c.bytes *= 10;
        let more = c.liveness_deadline_s();
        c.loss = 0.1;
        let lossy = c.liveness_deadline_s();
        c.loss_burst = 4.0;
        let bursty = c.liveness_deadline_s();
        assert!(
            clean < more && more < lossy && lossy < bursty,
            "{clean} {more} {lossy} {bursty}"
        );
        // A clean 1 MB at 10 Mbit/s needs 0.8 s; the bound is not absurdly loose.
        assert!(clean < 60, "{clean}");
    }

    #[test]
    fn a_clean_small_case_passes_its_check() {
        let mut c = SoakCase::generate(3, 0);
        c.sysctls.clear();
        (
            c.flows,
            c.bytes,
            c.rate_bps,
            c.rtt_us,
            c.mss,
            c.notsent_lowat,
        ) = (2, 50_000, 100_000_000, 2_000, None, None);
        (
            c.loss,
            c.loss_reverse,
            c.loss_burst,
            c.corrupt,
            c.jitter_us,
            c.reorder,
            c.duplicate,
        ) = (0.02, 0.0, 1.0, 0.0, 0, 0.0, 0.0);
        c.queue = 100;
        c.deadline_s = c.liveness_deadline_s();
        let out = c.run();
        assert!(out.ok, "{:?}", out.reasons);
        assert_eq!(out.bytes_delivered, 100_000);
    }

    /// Soak run 7666 (seed 1): 8 flows behind `somaxconn=2`, 65 ms of jitter on a
    /// 262 ms path. A data segment overtakes the ACK that completes a cookie
    /// handshake, fails the cookie check and draws the listener's RST, which resets
    /// its flow, as in Linux. The check accepts that reset only while the receiver
    /// counted a failed cookie check for it, the RST was a listener's, and the case
    /// exercises cookies.
    #[test]
    fn a_cookie_reset_passes_only_when_the_listener_counted_it() {
        // The run as it was found, without the hostile peer its seed draws now.
        let case = SoakCase {
            hostile: None,
            ..SoakCase::generate(1, 7666)
        };
        assert!(case.exercises_cookies());
        let r = case.scenario().unwrap().run().unwrap();
        assert_eq!(r.verdict.failed.len(), 1, "{:?}", r.verdict);
        let out = case.check(&r);
        assert!(out.ok, "{:?}", out.reasons);
        assert_eq!(out.cookie_resets, 1);
        let mut uncounted = r.clone();
        uncounted.counters_receiver = lowtide::Counters::default();
        let out = case.check(&uncounted);
        assert!(!out.ok);
        assert!(
            out.reasons[0].contains("only 0 failed SYN cookie checks"),
            "{:?}",
            out.reasons
        );
        let mut by_connection = r.clone();
        by_connection
            .per_flow
            .iter_mut()
            .for_each(|f| f.listener_resets = 0);
        assert!(!case.check(&by_connection).ok);
        let mut no_cookies = case.clone();
        no_cookies.sysctls.retain(|s| !s.contains("somaxconn"));
        assert!(!no_cookies.exercises_cookies());
        let out = no_cookies.check(&r);
        assert!(!out.ok && out.cookie_resets == 0, "{:?}", out);
    }

    /// A deadline shorter than the transfer needs is reported as a liveness failure,
    /// per flow, not as success.
    #[test]
    fn a_missed_deadline_fails_with_reasons() {
        let mut c = SoakCase::generate(3, 0);
        c.sysctls.clear();
        (
            c.flows,
            c.bytes,
            c.rate_bps,
            c.rtt_us,
            c.mss,
            c.notsent_lowat,
        ) = (1, 2_000_000, 1_000_000, 2_000, None, None);
        (
            c.loss,
            c.loss_reverse,
            c.loss_burst,
            c.corrupt,
            c.jitter_us,
            c.reorder,
            c.duplicate,
        ) = (0.0, 0.0, 1.0, 0.0, 0, 0.0, 0.0);
        c.queue = 100;
        c.deadline_s = 1;
        let out = c.run();
        assert!(!out.ok);
        assert!(
            out.reasons.iter().any(|r| r.starts_with("flow 0: stalled")),
            "{:?}",
            out.reasons
        );
        assert!(
            out.reasons.iter().any(|r| r.contains("liveness deadline")),
            "{:?}",
            out.reasons
        );
    }
}
