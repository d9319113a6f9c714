//! SACK compression (tcp/compsack.rs, Linux's `__tcp_ack_snd_check` since 4.18):
//! with out-of-order data held, the receiver sends the first three ACKs for one
//! `rcv_nxt` at once, then holds the rest for 5 % of the RTT (at most 1 ms) or
//! until `tcp_comp_sack_nr` are held, counting each one not sent in
//! `TcpExtTCPAckCompressed`.

use crate::common::*;
use lowtide::{Config, Mib};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Warms a connection up, then loses the first segment of a 40-segment burst from
/// A: returns B's pure ACKs sent while the 39 segments after the hole arrived (up to
/// the retransmission's arrival) and B's counters.
fn ofo_burst(mut cfg: Config) -> (Vec<Duration>, u64) {
    // A fixed receive buffer, so that the window is fully open after the warm-up:
    // while tcp_grow_window still raises rcv_ssthresh, it sets quick-ACK mode and
    // out-of-order data is ACKed at once, as in Linux.
    cfg.set("net.ipv4.tcp_rmem", "4096 262144 262144").unwrap();
    cfg.set("net.ipv4.tcp_moderate_rcvbuf", "0").unwrap();
    let (mut p, c, s) = establish(cfg);
    // Warm up: cwnd large enough for the burst, and RTT samples on both sides.
    let warm = pattern(400_000, 1);
    assert_eq!(send_all(&mut p, true, c, s, &warm).len(), warm.len());
    p.drive_for(200 * MS);
    let mut dropped = false;
    p.filter = Some(Box::new(move |dir, pkt: &mut Vec<u8>| {
        let seg = Seg::parse(pkt);
        if dir == Dir::AtoB && !dropped && !seg.payload.is_empty() {
            dropped = true;
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    let from = p.wire.len();
    let mss = p.a.info(p.now, c).unwrap().snd_mss as usize;
    p.a.send(p.now, c, &pattern(40 * mss, 2)).unwrap();
    // The burst arrives 10 ms later; the retransmission an RTT after the first
    // duplicate ACKs reach A: B's ACKs before then answer the out-of-order data.
    p.drive_for(p.delay + 15 * MS);
    let acks: Vec<Duration> = p.wire[from..]
        .iter()
        .filter(|(_, d, _)| *d == Dir::BtoA)
        .filter(|(_, _, pk)| {
            let s = Seg::parse(pk);
            s.is_pure_ack() && !s.th.options.sack_blocks().is_empty()
        })
        .map(|(t, _, _)| t.saturating_since(p.wire[from].0))
        .collect();
    (acks, p.b.counters().get(Mib::TcpExtTCPAckCompressed))
}

#[test]
fn acks_for_out_of_order_data_are_compressed_after_three() {
    let (acks, compressed) = ofo_burst(Config::default());
    // 39 segments above the hole, all at once: three ACKs at once, and a fourth for
    // the segment that still opened the window (tcp_data_queue_ofo grows it before
    // the skb is charged; tcp_grow_window's quick-ACK); the other 35 held until
    // the timer (5 % of the 20 ms RTT: 1 ms, plus tcp_comp_sack_slack_ns' 100 us,
    // as a soft hrtimer runs) sends one of them.
    assert_eq!(
        acks.len(),
        5,
        "SACKs sent for 39 out-of-order segments: {acks:?}"
    );
    assert_eq!(acks[0], acks[3]);
    assert_eq!(acks[4] - acks[3], MS + MS / 10, "{acks:?}");
    assert_eq!(compressed, 34);
}

#[test]
fn tcp_comp_sack_nr_zero_acks_every_segment() {
    let mut cfg = Config::default();
    cfg.set("net.ipv4.tcp_comp_sack_nr", "0").unwrap();
    let (acks, compressed) = ofo_burst(cfg);
    assert_eq!(acks.len(), 39);
    assert_eq!(compressed, 0);
}
