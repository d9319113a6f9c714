//! The five experiments' setups, at the seeds' scale and reduced (`--quick`).
//!
//! Each follows the seed's own test as far as its commit message describes it
//! (../shared/docs/experiments.md); what the message leaves open (link rate, RTT of
//! a LAN) is chosen here once and printed with the results, never tuned toward the
//! published figure.

use super::{Experiment, PlannedRun, Scale};
use lowtide_link::LinkConfig;
use lowtide_sim::cpu::CpuModel;
use lowtide_sim::timeseries::TimeseriesConfig;
use lowtide_sim::{Scenario, Workload};

const GBIT: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

/// Seeds per simulator variant at the seeds' scale: every (group, variant) runs
/// with seeds `seed .. seed + FULL_REPS` (E4's main comparison with ten, the seed's
/// "10 runs"), so the report gives a mean and a 95 % confidence interval.
pub const FULL_REPS: u32 = 5;

/// Seeds per variant at `--quick` scale (CI), by experiment: as many as keep the
/// whole quick plan about as fast as one seed each was (E1 and E4 are its longest
/// runs, so they keep one; the report says each n).
pub fn quick_reps(e: Experiment) -> u32 {
    match e {
        Experiment::E1 | Experiment::E4 => 1,
        Experiment::E2 => 2,
        Experiment::E3 | Experiment::E5 => 3,
    }
}

/// The runs of `experiments` at `scale`, seeded from `seed`, in a fixed order.
pub fn plan(experiments: &[Experiment], scale: Scale, seed: u64) -> Vec<PlannedRun> {
    let mut b = Builder {
        specs: Vec::new(),
        seed,
        scale,
    };
    for &e in experiments {
        match e {
            Experiment::E1 => e1(&mut b),
            Experiment::E2 => e2(&mut b),
            Experiment::E3 => e3(&mut b),
            Experiment::E4 => e4(&mut b),
            Experiment::E5 => e5(&mut b),
        }
    }
    b.specs
}

struct Builder {
    specs: Vec<PlannedRun>,
    seed: u64,
    scale: Scale,
}

/// A run being described.
#[derive(Clone)]
struct Run {
    experiment: Experiment,
    group: String,
    variant: String,
    rep: u32,
    sc: Scenario,
    params: Vec<(String, String)>,
    keep_series: bool,
}

impl Run {
    fn new(experiment: Experiment, group: &str, variant: &str) -> Run {
        Run {
            experiment,
            group: group.into(),
            variant: variant.into(),
            rep: 0,
            sc: Scenario::default(),
            params: Vec::new(),
            keep_series: false,
        }
    }

    fn param(mut self, k: &str, v: impl Into<String>) -> Run {
        self.params.push((k.into(), v.into()));
        self
    }

    /// `flows` bulk flows for `secs` over `rate_bps` with `rtt_ns`, both ways.
    fn path(mut self, flows: u32, rate_bps: u64, rtt_ns: u64) -> Run {
        let l = LinkConfig {
            rate_bps,
            delay_ns: rtt_ns / 2,
            ..LinkConfig::default()
        };
        self.sc.flows = flows;
        self.sc.link_ab = l.clone();
        self.sc.link_ba = l;
        let r = self
            .param("flows", flows.to_string())
            .param("rate", rate(rate_bps))
            .param("rtt", format!("{} ms", rtt_ns as f64 / 1e6));
        match flows {
            1 => r,
            _ => r.start_jitter(rtt_ns),
        }
    }

    /// Several flows start at random times within `window_ns` (drawn from the seed;
    /// the same for every variant of one seed): what makes the repetitions of a
    /// lossless multi-flow run differ.
    fn start_jitter(mut self, window_ns: u64) -> Run {
        self.sc.start_jitter_ns = window_ns;
        self.param(
            "flow starts",
            format!("uniform in {} ms per seed", window_ns as f64 / 1e6),
        )
    }

    fn bulk(mut self, duration_ns: u64) -> Run {
        self.sc.workload = Workload::Bulk { duration_ns };
        self.param("duration", format!("{} s", duration_ns as f64 / 1e9))
    }

    fn sysctl(mut self, assignment: &str) -> Run {
        if let Err(e) = self.sc.config.set_assignment(assignment) {
            // The plans are fixed text: a bad one is a bug found by the tests.
            panic!("experiment plan: bad sysctl {assignment}: {e}");
        }
        self.param("sysctl", assignment)
    }

    fn series(mut self, interval_ns: u64) -> Run {
        self.sc.timeseries = Some(TimeseriesConfig {
            interval_ns,
            per_flow: false,
        });
        self.keep_series = true;
        self
    }
}

impl Builder {
    /// Seeds per variant of experiment `e` at this scale.
    fn reps(&self, e: Experiment) -> u32 {
        match self.scale {
            Scale::Full => FULL_REPS,
            Scale::Quick => quick_reps(e),
        }
    }

    /// `r` once per seed (`reps`), repetition k with seed `seed + k`, next to each
    /// other in the plan.
    fn push(&mut self, r: Run) {
        for rep in 0..self.reps(r.experiment) {
            let mut r = r.clone();
            r.rep = rep;
            self.push_one(r);
        }
    }

    /// `r` once, with the seed of its repetition number.
    fn push_one(&mut self, mut r: Run) {
        r.sc.seed = self.seed + r.rep as u64;
        let index = self.specs.len();
        self.specs.push(PlannedRun {
            index,
            experiment: r.experiment,
            group: r.group,
            variant: r.variant,
            rep: r.rep,
            params: r.params,
            scenario: r.sc,
            keep_series: r.keep_series,
            timeseries_dir: None,
        });
    }

    fn quick(&self) -> bool {
        self.scale == Scale::Quick
    }
}

fn rate(bps: u64) -> String {
    match bps {
        b if b >= GBIT && b % GBIT == 0 => format!("{} Gbit/s", b / GBIT),
        b => format!("{} Mbit/s", b / 1_000_000),
    }
}

fn kb(bytes: u32) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{} MB", b >> 20),
        b => format!("{} KB", b >> 10),
    }
}

/// E1 (seed 000): 200 bulk flows with TCP_NOTSENT_LOWAT off vs 128 KB (sysctl, as the
/// seed's `echo 131072 > tcp_notsent_lowat`) and a sweep of other values; one flow.
///
/// At the seed's scale: its single flow did 17.4 Gbit/s on a LAN, with a final
/// send buffer of 1.6 MB (netperf's "Send Socket Size Final"), so its round trip
/// held well under 1 MB: 25 Gbit/s and 100 us here (a 312 KB bandwidth-delay
/// product, 10,000 round trips in 1 s). There the send buffer (tcp_sndbuf_expand:
/// twice cwnd's truesize) leaves room for unsent data, which lowat caps, as in the
/// seed. The full plan keeps the earlier one-flow setting (10 Gbit/s, 10 ms) as
/// the contrast: there the 4 MB tcp_wmem[2] caps the flow below the link, nothing
/// waits unsent, and lowat never binds.
fn e1(b: &mut Builder) {
    let secs = if b.quick() { 1 } else { 3 };
    let lowats: &[u32] = match b.quick() {
        true => &[0, 128 << 10],
        false => &[0, 128 << 10, 32 << 10, 512 << 10, 2 << 20],
    };
    let lan = (E1_RATE, E1_RTT);
    for (i, &l) in lowats.iter().enumerate() {
        let variant = match (i, l) {
            (0, _) => "A: lowat off".to_string(),
            (1, _) => "B: lowat 128 KB".to_string(),
            (_, l) => format!("sweep: lowat {}", kb(l)),
        };
        b.push(e1_run("200 flows", &variant, (200, lan), l, secs));
    }
    let ab = [("A: lowat off", 0), ("B: lowat 128 KB", 128 << 10)];
    for (variant, l) in ab {
        b.push(e1_run("1 flow", variant, (1, lan), l, secs));
    }
    if !b.quick() {
        let wan = (10 * GBIT, 10 * MS);
        for (variant, l) in ab {
            let g = "1 flow, 10 Gbit/s, 10 ms (send-buffer-limited)";
            b.push(e1_run(g, variant, (1, wan), l, 15));
        }
    }
}

/// E1's link at the seed's scale: fast enough for its 17.4 Gbit/s single flow.
const E1_RATE: u64 = 25 * GBIT;
/// E1's round trip at the seed's scale: a LAN's.
const E1_RTT: u64 = 100_000;

fn e1_run(
    group: &str,
    variant: &str,
    (flows, (rate_bps, rtt_ns)): (u32, (u64, u64)),
    lowat: u32,
    secs: u64,
) -> Run {
    let r = Run::new(Experiment::E1, group, variant)
        .path(flows, rate_bps, rtt_ns)
        .bulk(secs * S)
        .series(match rtt_ns < MS {
            true => 10 * MS,
            false => 50 * MS,
        });
    match lowat {
        0 => r,
        l => r.sysctl(&format!("net.ipv4.tcp_notsent_lowat={l}")),
    }
}

/// E2 (seed 001): 100 BBR flows at 100 ms RTT, `tcp_wmem` max 64 MB, on 10 Gbit/s
/// (100 Mbit/s per flow); A without lowat, B lowat 2 MB with the lowat/2 wakeup
/// rule, C (ablation) without the rule. Then A alone over 2 link rates x 2 flow
/// counts (25-400 Mbit/s per flow), one group each ("sweep: ..."), to test what
/// sets A's memory.
fn e2(b: &mut Builder) {
    // Quick: a fifth of the flows on a fifth of the rate, the same per flow.
    let (secs, flows, rate_bps) = match b.quick() {
        true => (4, 20, 2 * GBIT),
        false => (10, 100, 10 * GBIT),
    };
    let group = format!("{flows} BBR flows");
    let variants = [
        ("A: lowat off", None),
        ("B: lowat 2 MB, wake at lowat/2", Some(true)),
        ("C: lowat 2 MB, wake below lowat (ablation)", Some(false)),
    ];
    for (v, rule) in variants {
        let mut r = Run::new(Experiment::E2, &group, v)
            .path(flows, rate_bps, 100 * MS)
            .bulk(secs * S)
            .sysctl("net.ipv4.tcp_congestion_control=bbr")
            .sysctl("net.ipv4.tcp_wmem=4096 262144 64000000")
            .series(100 * MS);
        if let Some(rule) = rule {
            r = r
                .sysctl("net.ipv4.tcp_notsent_lowat=2097152")
                .sysctl(&format!("experimental.notsent_wake_hysteresis={rule}"));
        }
        b.push(r);
    }
    // What sets A's memory: a sweep of the per-flow rate (so of the per-flow
    // bandwidth-delay product) over link rates and flow counts, without lowat.
    let (secs, rates, counts): (u64, &[u64], &[u32]) = match b.quick() {
        true => (4, &[GBIT], &[5, 20]),
        false => (10, &[GBIT, 4 * GBIT], &[10, 40]),
    };
    for &rate_bps in rates {
        for &flows in counts {
            let group = format!("sweep: {}, {flows} BBR flows", rate(rate_bps));
            let r = Run::new(Experiment::E2, &group, "A: lowat off")
                .path(flows, rate_bps, 100 * MS)
                .bulk(secs * S)
                .sysctl("net.ipv4.tcp_congestion_control=bbr")
                .sysctl("net.ipv4.tcp_wmem=4096 262144 64000000");
            b.push(r);
        }
    }
}

/// E3 (seed 002): bulk senders through a pfifo NIC queue (1000 packets) on 1 Gbit/s
/// and 100 Mbit/s, TSO on, 1 and 4 flows, LAN RTT (1 ms): TSQ off (A), TSQ with
/// today's limit (B: `max(2 * truesize, pacing_rate >> 10)`, capped at
/// `tcp_limit_output_bytes`), and TSQ as seed 002 had it (C: a fixed
/// `tcp_limit_output_bytes` of 128 KB, `experimental.tsq_rule = fixed`).
fn e3(b: &mut Builder) {
    let secs = if b.quick() { 3 } else { 10 };
    let variants: [(&str, &[&str]); 3] = [
        ("A: TSQ off", &["experimental.tsq=false"]),
        ("B: TSQ on", &["experimental.tsq=true"]),
        (
            "C: TSQ as in seed 002 (fixed 128 KB)",
            &[
                "experimental.tsq=true",
                "experimental.tsq_rule=fixed",
                "net.ipv4.tcp_limit_output_bytes=131072",
            ],
        ),
    ];
    for rate_bps in [GBIT, 100_000_000] {
        for flows in [1, 4] {
            let group = format!("{}, {} flow{}", rate(rate_bps), flows, plural(flows));
            for (v, sysctls) in variants {
                let mut r = Run::new(Experiment::E3, &group, v)
                    .path(flows, rate_bps, MS)
                    .bulk(secs * S);
                for s in sysctls {
                    r = r.sysctl(s);
                }
                b.push(r.series(5 * MS));
            }
        }
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// E4 (seed 003): 150 ms RTT, 1 % loss on the data path, receiver without GRO, BBR,
/// a receive buffer that never limits the sender ([`E4_RCVBUF`]), host A's CPU
/// modeled (`lowtide_sim::cpu`); list vs
/// tree, 10 runs x 30 s on 10 Gbit/s; then a sweep of link rates (so of packets in
/// flight), one run each.
fn e4(b: &mut Builder) {
    // The seed's ten runs at full scale (interleaved list, tree, list, ...).
    let (reps, secs, rate_bps) = match b.quick() {
        true => (quick_reps(Experiment::E4), 5, 2 * GBIT),
        false => (2 * FULL_REPS, 30, 10 * GBIT),
    };
    for rep in 0..reps {
        for (v, kind) in [("A: list", "list"), ("B: tree", "tree")] {
            let mut r = e4_run(&rate(rate_bps), v, kind, rate_bps, secs);
            r.rep = rep;
            b.push_one(r);
        }
    }
    let (sweep, sweep_secs): (&[u64], u64) = match b.quick() {
        true => (&[GBIT / 2], 5),
        false => (&[GBIT / 2, GBIT, 2 * GBIT, 5 * GBIT], 10),
    };
    for &r in sweep {
        for (v, kind) in [("A: list", "list"), ("B: tree", "tree")] {
            b.push(e4_run(
                &format!("sweep {}", rate(r)),
                v,
                kind,
                r,
                sweep_secs,
            ));
        }
    }
}

/// Gives E4's runs in `specs` the CPU model `model` (measured on this machine by
/// `lowtide experiment calibrate`; `source` says so in the runs' parameters) in
/// place of the built-in constants.
pub fn use_cpu_model(specs: &mut [PlannedRun], model: &CpuModel, source: &str) {
    for r in specs.iter_mut().filter(|r| r.experiment == Experiment::E4) {
        r.scenario.cpu = Some(*model);
        for (k, v) in r.params.iter_mut() {
            if k == "cpu model" {
                *v = source.to_string();
            }
        }
    }
}

/// E4's sensitivity sweep (`lowtide experiment e4 --sensitivity`), one list/tree
/// pair per setting on E4's path (10 Gbit/s for 10 s; `--quick`: 2 Gbit/s for
/// 5 s), seed `seed`, around the CPU model `model` (`source` names it in the runs'
/// parameters):
/// - the model as given;
/// - the per-ACK costs (per packet and per SACK block) x0.5 and x2;
/// - the per-node costs (tree and list) x0.5 and x2;
/// - the sender's socket backlog as Linux sizes it for the seed's sender: its
///   `sk_rcvbuf` at the default (SO_RCVBUF 64 KB, so 128 KB, `tcp_rmem[1]` of
///   today's Linux, where E4 shares the receiver's 1 GiB; 4.14's was 85 KB), with
///   `tcp_wmem[2]` 256 MB (E4's), 64, 32 and 16 MB: `tcp_add_backlog`'s limit,
///   `2 * sk_rcvbuf + sk_sndbuf / 2 + 64 KB` on a `sk_backlog.len` that grows until
///   the backlog drains, falls from about 2.2 GB (E4: no drops) to about 128 MB down
///   to 8 MB, the seed's regime, where a saturated list's backlog overflows
///   ("massively dropping packets"). A smaller
///   send buffer also caps the window (16 MB per 150 ms is about 850 Mbit/s of
///   payload at most), which the report's tree/list ratio then shows too.
///
/// Groups start with "sweep" (the direction checks leave them out).
pub fn e4_sensitivity(scale: Scale, seed: u64, model: &CpuModel, source: &str) -> Vec<PlannedRun> {
    let mut b = Builder {
        specs: Vec::new(),
        seed,
        scale,
    };
    let (secs, rate_bps) = match b.quick() {
        true => (5, 2 * GBIT),
        false => (10, 10 * GBIT),
    };
    let scaled = |ack: f64, node: f64| {
        let mut m = *model;
        m.per_packet_in_ns *= ack;
        m.per_sack_block_ns *= ack;
        m.per_tree_node_ns *= node;
        for p in m.list_node_ns.iter_mut() {
            p.1 *= node;
        }
        m
    };
    let mut settings: Vec<(String, CpuModel, Option<u32>)> = vec![
        ("model as measured".into(), *model, None),
        ("per-ACK costs x0.5".into(), scaled(0.5, 1.0), None),
        ("per-ACK costs x2".into(), scaled(2.0, 1.0), None),
        ("per-node costs x0.5".into(), scaled(1.0, 0.5), None),
        ("per-node costs x2".into(), scaled(1.0, 2.0), None),
    ];
    for mb in [256u32, 64, 32, 16] {
        settings.push((
            format!("sender rcvbuf 128 KB, wmem max {mb} MB"),
            *model,
            Some(mb << 20),
        ));
    }
    for (what, m, wmem) in settings {
        for (v, kind) in [("A: list", "list"), ("B: tree", "tree")] {
            let group = format!("sweep sensitivity: {what}");
            let mut r = e4_run(&group, v, kind, rate_bps, secs);
            r.sc.cpu = Some(m);
            if let Some(w) = wmem {
                (r.params).retain(|(k, v)| !(k == "sysctl" && v.starts_with("net.ipv4.tcp_wmem=")));
                r = r
                    .sysctl(&format!("net.ipv4.tcp_wmem=4096 16384 {w}"))
                    .param("sender SO_RCVBUF", "65536 (sk_rcvbuf 131072)");
                r.sc.sender_rcvbuf = Some(65_536);
            }
            for (_, v) in r.params.iter_mut().filter(|(k, _)| k == "cpu model") {
                *v = format!("{source}, scaled as the group says");
            }
            b.push_one(r);
        }
    }
    b.specs
}

/// netem's jitter in seed 003's test (`delay 150ms 200us`): without a distribution
/// table netem draws each packet's delay uniformly in `mu - sigma .. mu + sigma`
/// (`tabledist`) and its tfifo releases packets by `time_to_send`, so packets a few
/// microseconds apart overtake each other.
const E4_JITTER_SIGMA_NS: u64 = 200_000;

/// E4's receive buffer, from the start (`tcp_rmem[1]`) and at most (`tcp_rmem[2]`):
/// 1 GiB, Linux's largest window (65535 << 14) when scaled by the payload's share of
/// truesize.
///
/// Seed 003 measured the sender: its SACK processing, with the receiver's buffer
/// out of the way. With `tcp_rmem` 4096 131072 256 MiB (what E4 had before), the
/// receiver limited the flow twice, as Linux's would with those buffers: in
/// STARTUP, its window grows by DRS (`tcp_rcv_space_adjust`) one round trip at a
/// time from 128 KB, and BBR leaves STARTUP when its bandwidth stops growing for
/// three rounds, receive-window-limited or not, so where a loss in the ramp falls
/// decides at which rate the 5 s quick run settles (goodput 46-662 Mbit/s over
/// seeds 1-8 of one `sim stream`); at 10 Gbit/s the out-of-order data held above
/// the losses filled the 256 MiB buffer, so the window stalled the sender 9-16 s of
/// 30 (docs/experiments/README.md, "E4's simulator stalls"). Starting at 1 GiB,
/// the window is limited only by `rcv_ssthresh`'s growth (two segments per segment
/// received, ahead of slow start) and holds 2x the bandwidth-delay product at 10
/// Gbit/s (BBR's cwnd gain) even at the default 50 % `scaling_ratio`.
pub const E4_RCVBUF: u32 = 1 << 30;

fn e4_run(group: &str, variant: &str, kind: &str, rate_bps: u64, secs: u64) -> Run {
    let mut r = Run::new(Experiment::E4, group, variant)
        .path(1, rate_bps, 150 * MS)
        .bulk(secs * S)
        .sysctl("net.ipv4.tcp_congestion_control=bbr")
        .sysctl(&format!("net.ipv4.tcp_rmem=4096 {E4_RCVBUF} {E4_RCVBUF}"))
        .sysctl("net.ipv4.tcp_wmem=4096 16384 268435456")
        .sysctl(&format!("experimental.rtx_queue={kind}"))
        // The seed's receivers (Linux 4.14) predate SACK compression (4.18): they
        // sent a SACK for every out-of-order segment, the storm the seed measured.
        .sysctl("net.ipv4.tcp_comp_sack_nr=0")
        .param("loss", "1 % (data direction)")
        .param("jitter", "uniform +-200 us (data direction, netem 200us)")
        .param("gro", "off")
        .param(
            "cpu model",
            "built-in constants (lowtide_sim::cpu::CpuModel::calibrated)",
        );
    r.sc.link_ab.loss = 0.01;
    // netem sat on the receiver's ingress: only data packets were delayed by
    // mu +- sigma; the sim's link draws 0..jitter on top of its delay, so the data
    // direction's delay moves down by sigma and the mean RTT stays 150 ms.
    r.sc.link_ab.delay_ns -= E4_JITTER_SIGMA_NS;
    r.sc.link_ab.jitter_ns = 2 * E4_JITTER_SIGMA_NS;
    r.sc.gro = false;
    r.sc.cpu = Some(CpuModel::calibrated());
    r.sc.timeseries = Some(TimeseriesConfig {
        interval_ns: 100 * MS,
        per_flow: true,
    });
    r
}

/// E5 (seed 004): one 2,000,000-byte transfer at 40 ms RTT with a 1 MB send buffer
/// (`netperf -l -2000000 -- -s 1000000`), skbs sized at write vs at transmit time.
///
/// The seed does not give its NIC rate. Its counters do tell how its receiver saw
/// the packets: IpInReceives (ACKs at the sender) followed IpOutRequests before and
/// after (600/599, 221/232), one ACK per TSO packet, so the receiver's GRO got each
/// TSO packet whole, which needs its segments to arrive within one NAPI poll: true
/// on the 10 Gbit/s NICs of the seed's time (a 64 KB TSO packet is 52 us on the
/// wire), not at 1 Gbit/s (520 us, ~2 segments per 20 us poll, so the ACK count
/// does not follow the sender's packet sizes). The main group therefore runs at
/// 10 Gbit/s; the 1 Gbit/s group shows that dependence.
fn e5(b: &mut Builder) {
    for (group, rate_bps) in [
        ("2,000,000 bytes", 10 * GBIT),
        ("2,000,000 bytes, 1 Gbit/s NIC", GBIT),
    ] {
        for (v, at) in [
            ("A: size at write", "write"),
            ("B: size at transmit", "transmit"),
        ] {
            let mut r = Run::new(Experiment::E5, group, v)
                .path(1, rate_bps, 40 * MS)
                .sysctl(&format!("experimental.size_goal_at={at}"))
                .param("bytes", "2000000")
                .param("SO_SNDBUF", "1000000");
            r.sc.workload = Workload::Bytes {
                bytes: 2_000_000,
                time_limit_ns: 60 * S,
            };
            r.sc.sndbuf = Some(1_000_000);
            b.push(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_deterministic_and_indexed() {
        for scale in [Scale::Quick, Scale::Full] {
            let p = plan(&Experiment::ALL, scale, 1);
            let q = plan(&Experiment::ALL, scale, 1);
            assert_eq!(p.len(), q.len());
            for (i, (a, b)) in p.iter().zip(&q).enumerate() {
                assert_eq!(a.index, i);
                assert_eq!(a.label(), b.label());
            }
        }
        let full = plan(&[Experiment::E4], Scale::Full, 1);
        let main = full.iter().filter(|r| !r.group.starts_with("sweep"));
        assert_eq!(main.count(), 20, "E4: 10 runs of list and tree");
    }

    /// At full scale every (experiment, group, variant) runs with at least five
    /// different seeds; at quick scale with the experiment's `quick_reps`.
    #[test]
    fn every_variant_runs_over_several_seeds() {
        for scale in [Scale::Quick, Scale::Full] {
            let p = plan(&Experiment::ALL, scale, 7);
            let mut seeds: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
            for r in &p {
                let key = format!("{} {} / {}", r.experiment.name(), r.group, r.variant);
                seeds.entry(key).or_default().push(r.scenario.seed);
            }
            for (k, s) in seeds {
                let e = Experiment::parse(&k[..2]).unwrap();
                let want = match scale {
                    Scale::Full => FULL_REPS as usize,
                    Scale::Quick => quick_reps(e) as usize,
                };
                let mut distinct = s.clone();
                distinct.sort();
                distinct.dedup();
                assert_eq!(distinct.len(), s.len(), "{k}: a seed twice");
                assert!(s.len() >= want, "{k}: {} seeds", s.len());
                assert!(s.iter().all(|&x| x >= 7), "{k}: seeds from the base");
            }
        }
    }

    /// E4's receiver never limits the sender: its buffer starts at its maximum (no
    /// DRS ramp) and half of it (the window at the default `scaling_ratio`) holds
    /// twice the bandwidth-delay product of the fastest run (BBR's cwnd gain).
    #[test]
    fn e4_receive_window_covers_twice_the_path() {
        for scale in [Scale::Quick, Scale::Full] {
            for r in plan(&[Experiment::E4], scale, 1) {
                let rmem = r.scenario.config.tcp_rmem;
                assert_eq!(rmem[1], rmem[2], "{}", r.label());
                let rtt_ns = r.scenario.link_ab.delay_ns + r.scenario.link_ba.delay_ns;
                let bdp = r.scenario.link_ab.rate_bps as u128 * rtt_ns as u128 / 8 / S as u128;
                assert!(rmem[1] as u128 / 2 >= 2 * bdp, "{}", r.label());
            }
        }
    }

    /// The sensitivity sweep: a list/tree pair per setting, every group left out of
    /// the checks, the costs scaled as named, the backlog rows with the sender's own
    /// receive buffer and a smaller send buffer.
    #[test]
    fn e4_sensitivity_scales_what_it_names() {
        let m = CpuModel::calibrated();
        let p = e4_sensitivity(Scale::Quick, 3, &m, "built-in");
        assert_eq!(p.len(), 18);
        assert!(p.iter().all(|r| r.group.starts_with("sweep")));
        assert!(p
            .iter()
            .enumerate()
            .all(|(i, r)| r.index == i && r.scenario.seed == 3));
        let of = |g: &str| p.iter().find(|r| r.group.ends_with(g)).unwrap();
        let ack = of("per-ACK costs x2").scenario.cpu.unwrap();
        assert_eq!(ack.per_packet_in_ns, 2.0 * m.per_packet_in_ns);
        assert_eq!(ack.per_tree_node_ns, m.per_tree_node_ns);
        let node = of("per-node costs x0.5").scenario.cpu.unwrap();
        assert_eq!(node.list_node_ns[4].1, 0.5 * m.list_node_ns[4].1);
        assert_eq!(node.per_packet_in_ns, m.per_packet_in_ns);
        let small = of("wmem max 16 MB");
        assert_eq!(small.scenario.sender_rcvbuf, Some(65_536));
        assert_eq!(small.scenario.config.tcp_wmem[2], 16 << 20);
        let wmem: Vec<_> = (small.params.iter())
            .filter(|(k, v)| k == "sysctl" && v.starts_with("net.ipv4.tcp_wmem"))
            .collect();
        assert_eq!(wmem.len(), 1, "{wmem:?}");
        assert_eq!(of("model as measured").scenario.sender_rcvbuf, None);
    }

    /// E4's data direction has netem's `delay 150ms 200us` of seed 003 (uniform in
    /// 150 ms +- 200 us over the round trip), the ACK direction none.
    #[test]
    fn e4_has_the_seed_jitter_on_the_data_direction() {
        for scale in [Scale::Quick, Scale::Full] {
            for r in plan(&[Experiment::E4], scale, 1) {
                let (ab, ba) = (&r.scenario.link_ab, &r.scenario.link_ba);
                assert_eq!(ab.jitter_ns, 400_000);
                assert_eq!(ba.jitter_ns, 0);
                assert_eq!(ab.delay_ns + ba.delay_ns, 150 * MS - 200_000);
                assert_eq!(ab.loss, 0.01);
            }
        }
    }
}
