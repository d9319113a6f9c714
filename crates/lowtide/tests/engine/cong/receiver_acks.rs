//! `tcp_ack`'s `no_queue:` path: an ACK that finds nothing in flight skips the
//! recovery state machine and congestion control. A receiver's every data segment
//! carries such an ACK; its congestion control must not run on them.

use crate::common::*;
use lowtide::Config;
use std::time::Duration;

/// A BBR receiver fed one small segment a second for 12 s: BBR never sees those
/// ACKs, so its 10 s min-RTT filter never expires into PROBE_RTT (cwnd 4), and
/// the receiver's window is still the initial one when it answers.
#[test]
fn receiver_congestion_control_sees_no_acks_without_data_in_flight() {
    let cfg = Config {
        tcp_congestion_control: "bbr".into(),
        ..Config::default()
    };
    let mut p = Pair::new(cfg);
    let l = p.b.listen(addr(B, 80), 4).unwrap();
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    let mut child = None;
    p.drive_until(Duration::from_secs(2), |p| {
        child = p.b.accept(l).ok();
        child.is_some()
    });
    let s = child.expect("B accepted");
    let mut buf = [0u8; 2048];
    for _ in 0..12 {
        p.a.send(p.now, c, &[7u8; 100]).unwrap();
        p.drive_for(Duration::from_secs(1));
        assert_eq!(p.b.recv(p.now, s, &mut buf).unwrap(), 100);
    }
    let i = p.b.info(p.now, s).unwrap();
    assert_eq!(i.snd_cwnd, 10, "the receiver's BBR stayed out of PROBE_RTT");
    assert_eq!(i.delivered, 1, "only its SYN-ACK was delivered");
}
