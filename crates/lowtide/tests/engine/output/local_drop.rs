//! A packet the sending host's own device queue drops is not a network loss (Linux:
//! a qdisc's `NET_XMIT_DROP` leaves the skb unsent in `tcp_write_xmit`; it goes out
//! again on the next TSQ completion, ACK or `TCP_RESOURCE_PROBE_INTERVAL`): no loss
//! recovery, no retransmission, no RTO, no backoff, only CWR (`tcp_enter_cwr`, one
//! PRR reduction per window), and every byte still arrives.

use crate::common::drill::INFINITE_SSTHRESH;
use crate::common::*;
use lowtide::{Config, Mib};
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
