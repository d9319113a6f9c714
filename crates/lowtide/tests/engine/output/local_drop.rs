//! A packet the sending host's own device queue drops is not a network loss (Linux:
//! a qdisc's `NET_XMIT_DROP` leaves the skb unsent in `tcp_write_xmit`; it goes out
//! again on the next TSQ completion, ACK or `TCP_RESOURCE_PROBE_INTERVAL`): no loss
//! recovery, no retransmission, no RTO, no backoff, only CWR (`tcp_enter_cwr`, one
//! PRR reduction per window), and every byte still arrives.

use crate::common::drill::INFINITE_SSTHRESH;
use crate::common::*;
use lowtide::{Config, Instant, Mib};
use std::time::Duration;

fn run(drop_nth: Vec<usize>) -> (Pair, lowtide::SocketHandle) {
    let (mut p, c, s) = establish(Config::default());
    let mut n = 0usize;
    p.local_drop = Some(Box::new(move |d, tx| {
        if d != Dir::AtoB || tx.packet.len() < 200 {
            return false;
        }
        n += 1;
        drop_nth.contains(&n)
    }));
    let data = pattern(300_000, 1);
    let start = p.now;
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    let took = p.now.saturating_since(start);
    // 300 KB at 20 ms RTT: 90 ms without drops; with an early CWR (cwnd 10 -> 7, then
    // congestion avoidance) 330-370 ms, and a first flight dropped whole waits one
    // retry after the RTO (tcp_probe0_base) too: 590 ms.
    assert!(took < Duration::from_millis(600), "{took:?}");
    (p, c)
}

#[test]
fn a_locally_dropped_packet_is_no_loss_and_no_rto() {
    for drops in [vec![1], vec![2], vec![1, 2, 3], vec![5, 9]] {
        let (p, c) = run(drops.clone());
        let i = p.a.info(p.now, c).unwrap();
        let n = |m| p.a.counters().get(m);
        assert_eq!(
            i.total_retrans, 0,
            "{drops:?}: sent again, not retransmitted"
        );
        assert_eq!(n(Mib::TcpExtTCPSackRecovery), 0, "{drops:?}");
        assert_eq!(n(Mib::TcpExtTCPTimeouts), 0, "{drops:?}");
        assert_eq!(n(Mib::TcpExtTCPLossProbes), 0, "{drops:?}");
        assert_eq!(i.backoff, 0, "{drops:?}");
        // CWR: ssthresh from the congestion control once (CUBIC: 0.7 * cwnd).
        assert!(i.snd_ssthresh < INFINITE_SSTHRESH, "{drops:?}: CWR");
        assert_ne!(i.ca_state, "Recovery", "{drops:?}");
    }
}

/// The TCP sequence number of an IPv4 packet (a GSO packet's first segment's).
fn tcp_seq(pkt: &[u8]) -> u32 {
    let ihl = (pkt[0] & 0x0f) as usize * 4;
    u32::from_be_bytes(pkt[ihl + 4..ihl + 8].try_into().unwrap())
}

#[test]
fn a_locally_dropped_retransmission_was_not_sent() {
    // Linux (tcp_output.c): __tcp_retransmit_skb counts the attempt (total_retrans,
    // TcpRetransSegs) before tcp_transmit_skb, then TCPRetransFail when the qdisc
    // refuses it (NET_XMIT_DROP); tcp_retransmit_skb sets no TCPCB_RETRANS and no
    // retrans_out, tcp_xmit_retransmit_queue counts no TCPFastRetrans and stops with
    // its hint on the skb. So the segment stays lost and out of flight, and the next
    // ACK's walk sends it again, not RACK one RTT later. (The packetdrill script
    // retransmit-local-drop-not-sent.pkt checks tcp_info between the two.)
    use std::cell::Cell;
    use std::rc::Rc;
    let (mut p, c, s) = establish(Config::default());
    p.record = true;
    // A's segments leave one after another (12 us each, 1 Gbit/s), so B's ACKs come
    // apart: the one after the drop is the next, not one of the same instant.
    let mut busy = Instant::ZERO;
    p.extra_delay = Some(Box::new(move |now, d, _| {
        if d != Dir::AtoB {
            return Duration::ZERO;
        }
        busy = busy.max(now) + Duration::from_micros(12);
        busy.saturating_since(now)
    }));
    let victim = Rc::new(Cell::new(None::<u32>));
    let dropped = Rc::new(Cell::new(false));
    let (v, mut n) = (victim.clone(), 0);
    p.filter = Some(Box::new(move |d, seg| {
        if d != Dir::AtoB || Seg::parse(seg).payload.is_empty() {
            return Verdict::Pass;
        }
        n += 1;
        if n != 5 {
            return Verdict::Pass;
        }
        v.set(Some(Seg::parse(seg).th.seq)); // lost on the wire once
        Verdict::Drop
    }));
    let (v, dr) = (victim.clone(), dropped.clone());
    p.local_drop = Some(Box::new(move |d, tx| {
        // Known only once the original was cut into segments: a later packet at that
        // sequence number is its retransmission.
        let hit = d == Dir::AtoB && !dr.get() && v.get() == Some(tcp_seq(&tx.packet));
        dr.set(dr.get() || hit);
        hit
    }));
    let data = pattern(100_000, 3);
    let mut sent = p.a.send(p.now, c, &data).unwrap();
    p.drive_until(Duration::from_secs(2), |_| dropped.get());
    let at = p.now;
    let mut got = drain(&mut p.b, p.now, s);
    while got.len() < data.len() {
        if sent < data.len() {
            sent += p.a.send(p.now, c, &data[sent..]).unwrap_or(0);
        }
        assert!(p.step(), "stalled");
        got.extend(drain(&mut p.b, p.now, s));
    }
    assert_eq!(got, data);
    let v = victim.get().unwrap();
    let resent: Vec<Instant> = p
        .wire
        .iter()
        .filter(|(_, d, pkt)| *d == Dir::AtoB && tcp_seq(pkt) == v)
        .map(|(t, _, _)| *t)
        .collect();
    assert_eq!(
        resent.len(),
        1,
        "one retransmission reached the wire: {resent:?} (drop at {at:?})"
    );
    // The next ACKs of the flight come within the RTT (20 ms); RACK would wait for
    // an ACK of data sent after the dropped copy, a round trip at least.
    let wait = resent[0].saturating_since(at);
    assert!(wait < Duration::from_millis(10), "resent after {wait:?}");
    let i = p.a.info(p.now, c).unwrap();
    let n = |m: &str| p.a.counters().by_name(m);
    assert_eq!(
        (i.total_retrans, i.backoff),
        (2, 0),
        "the attempt and the send"
    );
    assert_eq!(n("TcpExtTCPRetransFail"), Some(1));
    assert_eq!(n("TcpExtTCPFastRetrans"), Some(1), "the send only");
    assert_eq!(n("TcpExtTCPTimeouts"), Some(0));
}

/// A connection whose data A sends is lost on the wire from the start until `heal`
/// is set; `drop_next` drops A's next data packet in its own device queue.
struct Staged {
    p: Pair,
    c: lowtide::SocketHandle,
    s: lowtide::SocketHandle,
    heal: std::rc::Rc<std::cell::Cell<bool>>,
    drop_next: std::rc::Rc<std::cell::Cell<bool>>,
    dropped_at: std::rc::Rc<std::cell::Cell<bool>>,
}

fn staged(cfg: Config, lose: impl Fn(u32) -> bool + 'static) -> Staged {
    use std::cell::Cell;
    use std::rc::Rc;
    let (mut p, c, s) = establish(cfg);
    p.record = true;
    let (heal, drop_next, dropped_at) = (
        Rc::new(Cell::new(false)),
        Rc::new(Cell::new(false)),
        Rc::new(Cell::new(false)),
    );
    let h = heal.clone();
    let mut n = 0u32;
    p.filter = Some(Box::new(move |d, seg| {
        if d != Dir::AtoB || Seg::parse(seg).payload.is_empty() || h.get() {
            return Verdict::Pass;
        }
        n += 1;
        match lose(n) {
            true => Verdict::Drop,
            false => Verdict::Pass,
        }
    }));
    let (dn, da) = (drop_next.clone(), dropped_at.clone());
    p.local_drop = Some(Box::new(move |d, tx| {
        let hit = d == Dir::AtoB && dn.get() && tx.packet.len() > 200;
        if hit {
            dn.set(false);
            da.set(true);
        }
        hit
    }));
    Staged {
        p,
        c,
        s,
        heal,
        drop_next,
        dropped_at,
    }
}

impl Staged {
    /// Sends `data`, drops A's next data packet from `arm` on, and runs until B has
    /// it all; returns when the drop happened and the wire's A-to-B data segments
    /// after it (time, sequence number).
    fn run(&mut self, data: &[u8], arm: Duration) -> (Instant, Vec<(Instant, u32)>) {
        let p = &mut self.p;
        p.a.send(p.now, self.c, data).unwrap();
        p.drive_for(arm);
        self.drop_next.set(true);
        let dropped = self.dropped_at.clone();
        p.drive_until(Duration::from_secs(5), |_| dropped.get());
        let (at, from) = (p.now, p.wire.len());
        self.heal.set(true);
        (at, self.finish(data.len(), from))
    }

    fn finish(&mut self, len: usize, from: usize) -> Vec<(Instant, u32)> {
        let p = &mut self.p;
        let mut got = drain(&mut p.b, p.now, self.s);
        while got.len() < len {
            assert!(p.step(), "stalled");
            got.extend(drain(&mut p.b, p.now, self.s));
        }
        p.wire[from..]
            .iter()
            .filter(|(_, d, pkt)| *d == Dir::AtoB && !Seg::parse(pkt).payload.is_empty())
            .map(|(t, _, pkt)| (*t, tcp_seq(pkt)))
            .collect()
    }
}

#[test]
fn a_locally_dropped_rto_retransmission_retries_after_the_resource_interval() {
    // tcp_retransmit_timer: "Retransmission failed because of local congestion":
    // the timer again after TCP_RESOURCE_PROBE_INTERVAL (500 ms), no backoff
    // (icsk_retransmits and TCPTimeouts count the timeout already).
    let cfg = Config {
        tcp_early_retrans: 0, // no loss probe first
        ..Config::default()
    };
    let mut st = staged(cfg, |_| true);
    // The flight is lost by 10 ms; the RTO (about 220 ms) comes later.
    let (at, sent) = st.run(&pattern(5_000, 5), Duration::from_millis(50));
    let p = &st.p;
    let n = |m: &str| p.a.counters().by_name(m);
    assert_eq!(n("TcpExtTCPRetransFail"), Some(1));
    // The head twice by the timer (tcp_retransmit_timer counts no MIB), the other
    // three skbs by the walk of Loss.
    assert_eq!(n("TcpExtTCPSlowStartRetrans"), Some(3));
    let first = sent.first().expect("sent again");
    // As the timer wheel runs a 500 ms timer (level 1, 8 ms buckets).
    let due = lowtide::time::timer_list_runs(at, at + Duration::from_millis(500));
    assert_eq!(
        first.0.saturating_since(at),
        due.saturating_since(at),
        "TCP_RESOURCE_PROBE_INTERVAL, not a backed-off RTO"
    );
    assert_eq!(n("TcpExtTCPTimeouts"), Some(2));
}

#[test]
fn a_locally_dropped_loss_probe_was_no_probe() {
    // tcp_send_loss_probe: a failed __tcp_retransmit_skb goes to rearm_timer: no
    // tlp_high_seq, no TCPLossProbes, the RTO from the head's send (tcp_rearm_rto
    // with the probe's timer pending), which then repairs the tail.
    let mut st = staged(Config::default(), |n| n == 4); // the tail of 4 segments
    let (at, sent) = st.run(&pattern(5_000, 7), Duration::from_millis(50));
    let p = &st.p;
    let n = |m: &str| p.a.counters().by_name(m);
    assert_eq!(n("TcpExtTCPRetransFail"), Some(1));
    assert_eq!(n("TcpExtTCPLossProbes"), Some(0), "no probe left the host");
    assert_eq!(n("TcpExtTCPTimeouts"), Some(1), "the RTO repaired the tail");
    let rto = p.a.info(at, st.c).unwrap().rto;
    let first = sent.first().expect("sent again");
    assert!(
        first.0.saturating_since(at) >= Duration::from_millis(200),
        "the RTO, {:?} after the drop (rto {rto} us)",
        first.0.saturating_since(at)
    );
}

#[test]
fn a_locally_dropped_reorder_timeout_retransmission_leaves_the_rto_armed() {
    // tcp_write_timer_handler runs tcp_rack_reo_timeout with icsk_pending still
    // ICSK_TIME_REO_TIMEOUT: tcp_xmit_retransmit_queue does not restart the timer
    // for the head, and the handler's tcp_rearm_rto arms the RTO whatever became of
    // the retransmission. The rtx queue's head is lost on the wire, one segment
    // after it is SACKed, the reorder timer marks it lost and its retransmission is
    // dropped in A's own device queue: the RTO must still repair it (lowtide once cleared
    // the flag first, armed the RTO for the head's retransmission and, when that
    // was dropped, put back the timer it replaced: none, so the flow stalled).
    // The third of 4 segments: the first two are ACKed, one is SACKed after it
    // (below the duplicate threshold), so RACK's timer decides.
    let mut st = staged(Config::default(), |n| n == 3);
    // The SACKs arrive after one 20 ms RTT; the reorder window (min_rtt / 4) later
    // the timer fires.
    let (at, sent) = st.run(&pattern(5_000, 11), Duration::from_millis(15));
    let p = &st.p;
    let n = |m: &str| p.a.counters().by_name(m);
    assert_eq!(n("TcpExtTCPRetransFail"), Some(1));
    assert_eq!(
        n("TcpExtTCPLossProbes"),
        Some(0),
        "the reorder timer came first"
    );
    assert_eq!(n("TcpExtTCPTimeouts"), Some(1), "the RTO repaired the head");
    let first = sent.first().expect("sent again");
    assert!(
        first.0.saturating_since(at) >= Duration::from_millis(200),
        "the RTO, {:?} after the drop",
        first.0.saturating_since(at)
    );
}
