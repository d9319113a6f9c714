//! RACK-TLP (RFC 8985), F-RTO (RFC 5682) and undo, as packet stories: a lost tail
//! is repaired by a loss probe instead of an RTO, a reordering path costs (almost) no
//! spurious retransmissions, and an RTO caused by late ACKs is detected and undone.

use crate::common::*;
use lowtide::{Config, Instant, Mib};
use lowtide_wire::tcp::TcpFlags;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// MSS with timestamps on a 1500 MTU.
const MSS: u32 = 1448;

/// Sends `n` bytes A -> B and checks they arrive intact.
fn transfer(p: &mut Pair, c: lowtide::SocketHandle, s: lowtide::SocketHandle, n: usize) {
    let data = pattern(n, 3);
    let got = send_all(p, true, c, s, &data);
    assert_eq!(got, data);
}

/// A data segment's stream offset end (relative to A's ISN + 1) and length.
fn data_end(pkt: &[u8], isn: u32) -> Option<u32> {
    let seg = Seg::parse(pkt);
    (!seg.payload.is_empty())
        .then(|| seg.th.seq.wrapping_sub(isn).wrapping_sub(1) + seg.payload.len() as u32)
}

fn isn_of(p: &Pair) -> u32 {
    let syn = p.sent_since(0, Dir::AtoB);
    syn.iter().find(|s| s.has(TcpFlags::SYN)).unwrap().th.seq
}

#[test]
fn tail_loss_is_repaired_by_a_loss_probe() {
    let (mut p, c, s) = establish(Config::default());
    let isn = isn_of(&p);
    let n = 60 * MSS as usize;
    let tail = n as u32 - 3 * MSS;
    let mut dropped = std::collections::HashSet::new();
    p.filter = Some(Box::new(move |dir, pkt| match data_end(pkt, isn) {
        Some(end) if dir == Dir::AtoB && end > tail && dropped.insert(end) => Verdict::Drop,
        _ => Verdict::Pass,
    }));
    transfer(&mut p, c, s, n);
    let m = p.a.counters();
    assert!(m.get(Mib::TcpExtTCPLossProbes) > 0, "no loss probe");
    assert_eq!(m.get(Mib::TcpExtTCPTimeouts), 0, "an RTO repaired the tail");
    assert!(m.get(Mib::TcpRetransSegs) >= 3);
}

#[test]
fn single_tail_loss_is_the_probe_itself() {
    let (mut p, c, s) = establish(Config::default());
    let isn = isn_of(&p);
    let n = 30 * MSS as usize;
    let mut dropped = false;
    p.filter = Some(Box::new(move |dir, pkt| match data_end(pkt, isn) {
        Some(end) if dir == Dir::AtoB && end == n as u32 && !dropped => {
            dropped = true;
            Verdict::Drop
        }
        _ => Verdict::Pass,
    }));
    transfer(&mut p, c, s, n);
    p.drive_for(Duration::from_millis(500));
    let m = p.a.counters();
    // The probe was the lost segment itself: one probe, one retransmission, no RTO.
    assert_eq!(m.get(Mib::TcpExtTCPLossProbes), 1);
    assert_eq!(m.get(Mib::TcpExtTCPTimeouts), 0);
    assert_eq!(m.get(Mib::TcpRetransSegs), 1);
}

#[test]
fn reordering_path_causes_few_spurious_retransmissions() {
    let (mut p, c, s) = establish(Config::default());
    let mut k = 0u32;
    // Every 10th data segment takes 3 ms longer (RTT 20 ms): later ones overtake it.
    p.extra_delay = Some(Box::new(move |_, dir, pkt| {
        if dir == Dir::AtoB && pkt.len() > 100 {
            k += 1;
            if k.is_multiple_of(10) {
                return Duration::from_millis(3);
            }
        }
        Duration::ZERO
    }));
    let n = 3_000_000;
    transfer(&mut p, c, s, n);
    p.drive_for(Duration::from_millis(500));
    let m = p.a.counters();
    let segs = n as u64 / MSS as u64;
    let retrans = m.get(Mib::TcpRetransSegs);
    let undos = m.get(Mib::TcpExtTCPDSACKUndo)
        + m.get(Mib::TcpExtTCPFullUndo)
        + m.get(Mib::TcpExtTCPPartialUndo)
        + m.get(Mib::TcpExtTCPLossUndo);
    eprintln!(
        "reordering: {retrans} retransmitted of {segs}; undos {undos}; reorder {}; timeouts {}",
        m.get(Mib::TcpExtTCPSACKReorder),
        m.get(Mib::TcpExtTCPTimeouts)
    );
    assert!(
        m.get(Mib::TcpExtTCPSACKReorder) > 0,
        "reordering not detected"
    );
    // The first reordering may cost a retransmission (undone by D-SACK); after
    // that RACK's window of min_rtt/4 (5 ms) absorbs the 3 ms.
    assert!(retrans <= 5, "{retrans} spurious retransmissions");
    assert!(
        retrans == 0 || undos > 0,
        "spurious retransmissions not undone"
    );
    let info = p.a.info(p.now, c).unwrap();
    assert!(info.snd_cwnd > 50, "cwnd {} collapsed", info.snd_cwnd);
}

/// Holds every ACK B sends from `from` on until `until` (an ACK path stall), so
/// A's RTO fires although nothing was lost.
fn spurious_rto(ts: bool) -> lowtide::Counters {
    let cfg = Config {
        tcp_timestamps: ts,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    transfer(&mut p, c, s, 200_000);
    let t0 = p.now + Duration::from_millis(5);
    let until = t0 + Duration::from_millis(700);
    let fired = Rc::new(Cell::new(false));
    let f2 = fired.clone();
    p.extra_delay = Some(Box::new(move |now: Instant, dir, _| {
        if dir == Dir::BtoA && now >= t0 && now < until {
            f2.set(true);
            return until.saturating_since(now);
        }
        Duration::ZERO
    }));
    let before = p.a.counters().get(Mib::TcpExtTCPTimeouts);
    transfer(&mut p, c, s, 2_000_000);
    assert!(fired.get());
    let m = p.a.counters().clone();
    assert!(m.get(Mib::TcpExtTCPTimeouts) > before, "no RTO");
    let info = p.a.info(p.now, c).unwrap();
    assert!(info.snd_cwnd > 10, "cwnd {} not restored", info.snd_cwnd);
    m
}

#[test]
fn spurious_rto_detected_by_frto_and_undone() {
    let m = spurious_rto(false);
    assert!(m.get(Mib::TcpExtTCPSpuriousRTOs) > 0);
    assert!(m.get(Mib::TcpExtTCPLossUndo) > 0);
}

#[test]
fn spurious_rto_undone_by_timestamps() {
    let m = spurious_rto(true);
    assert!(m.get(Mib::TcpExtTCPLossUndo) > 0);
}

/// `tcp_recovery = 0` keeps RACK (Linux 6.17+ has no other loss detection for SACK
/// flows): one drop, one SACK recovery, no probe (`tcp_early_retrans` 0), no RTO.
#[test]
fn recovery_sysctl_zero_still_recovers_by_rack() {
    let cfg = Config {
        tcp_recovery: 0,
        tcp_early_retrans: 0,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    let mut k = 0u32;
    p.filter = Some(Box::new(move |dir, pkt| {
        if dir == Dir::AtoB && pkt.len() > 100 {
            k += 1;
            if k == 40 {
                return Verdict::Drop;
            }
        }
        Verdict::Pass
    }));
    transfer(&mut p, c, s, 200_000);
    let m = p.a.counters();
    assert_eq!(m.get(Mib::TcpExtTCPSackRecovery), 1);
    assert_eq!(m.get(Mib::TcpExtTCPLossProbes), 0);
    assert_eq!(m.get(Mib::TcpExtTCPTimeouts), 0);
}
