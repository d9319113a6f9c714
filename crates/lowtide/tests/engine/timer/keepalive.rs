//! TCP keepalive as Linux's `tcp_keepalive_timer` runs it: the first probe after
//! `TCP_KEEPIDLE` of silence, then one per `TCP_KEEPINTVL`, and a reset with
//! `ETIMEDOUT` after `TCP_KEEPCNT` unanswered probes (or `TCP_USER_TIMEOUT`).

use crate::common::*;
use lowtide::tcp::keepalive::Keepalive;
use lowtide::{Config, EventKind, Mib, SocketError, SocketHandle};
use lowtide_wire::tcp::TcpFlags;
use std::time::Duration;

const RTT: Duration = Duration::from_millis(20); // common::establish's path

fn ka(idle: u64, intvl: u64, cnt: u8) -> Keepalive {
    Keepalive {
        enabled: true,
        idle: Some(Duration::from_secs(idle)),
        interval: Some(Duration::from_secs(intvl)),
        probes: Some(cnt),
    }
}

/// An established pair recording the wire, with keepalive set on A.
fn pair_with(k: Keepalive) -> (Pair, SocketHandle, SocketHandle) {
    let (mut p, c, s) = establish(Config::default());
    p.record = true;
    p.wire.clear(); // the handshake
    p.a.socket(c).set_keepalive(p.now, k).unwrap();
    (p, c, s)
}

/// A's segments since `from`, with the time they left.
fn a_sent(p: &Pair, from: usize) -> Vec<(Duration, Seg)> {
    p.wire[from..]
        .iter()
        .filter(|(_, d, _)| *d == Dir::AtoB)
        .map(|(t, _, pkt)| (t.saturating_since(lowtide::Instant::ZERO), Seg::parse(pkt)))
        .collect()
}

#[test]
fn idle_connection_is_probed_and_stays_up_while_the_peer_answers() {
    let (mut p, c, _s) = pair_with(ka(10, 2, 3));
    let t0 = p.now.saturating_since(lowtide::Instant::ZERO);
    p.drive_for(Duration::from_millis(9_990));
    assert!(a_sent(&p, 0).is_empty(), "nothing before the idle time");
    p.drive_for(Duration::from_secs(35));
    let probes = a_sent(&p, 0);
    // Each answered probe restarts the idle time from the peer's ACK (rcv_tstamp):
    // probes at 10 s, 20 s + RTT, 30 s + 2 RTT, ... after the keepalive was set,
    // each as late as the timer wheel runs it: the 10 s timer (level 3, 512 ms
    // buckets) and the 2 s one before it (`keepalive_intvl_when`, level 2, 64 ms).
    let at: Vec<Duration> = probes.iter().map(|(t, _)| *t - t0).collect();
    assert_eq!(at.len(), 4, "{at:?}");
    let wheel = Duration::from_millis(512 + 64);
    let first = at[0] - Duration::from_secs(10);
    assert!(first <= Duration::from_millis(512), "{at:?}");
    for w in at.windows(2) {
        let late = (w[1] - w[0]).checked_sub(Duration::from_secs(10) + RTT);
        assert!(late.is_some_and(|l| l <= wheel), "{at:?}");
    }
    let info = p.a.info(p.now, c).unwrap();
    for (_, seg) in &probes {
        // tcp_xmit_probe_skb: a bare ACK one below snd_una.
        assert!(seg.is_pure_ack() && seg.payload.is_empty());
        assert_eq!(info.state, "ESTABLISHED");
    }
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPKeepAlive), 4);
    assert_eq!(info.probes, 0, "each ACK resets icsk_probes_out");
}

#[test]
fn unanswered_probes_reset_after_keepcnt() {
    let (mut p, c, _s) = pair_with(ka(10, 2, 3));
    let t0 = p.now.saturating_since(lowtide::Instant::ZERO);
    p.filter = Some(Box::new(|d, _| match d {
        Dir::AtoB => Verdict::Drop,
        Dir::BtoA => Verdict::Pass,
    }));
    p.drive_for(Duration::from_secs(30));
    // Probes at 10, 12, 14 s; at 16 s the timer finds 3 unanswered: RST, ETIMEDOUT
    // (each timer run late by the wheel: up to 512 ms, then 64 ms each).
    let n = p.a.counters().get(Mib::TcpExtTCPKeepAlive);
    assert_eq!(n, 3);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPAbortOnTimeout), 1);
    assert!(p
        .events_a
        .iter()
        .any(|e| e.socket == c && matches!(e.kind, EventKind::Error(SocketError::TimedOut))));
    let rst = p.dropped_rst_time().expect("an RST");
    let late = (rst - t0).checked_sub(Duration::from_secs(16));
    assert!(
        late.is_some_and(|l| l <= Duration::from_millis(512 + 3 * 64)),
        "{late:?}"
    );
    assert_eq!(p.a.state(c), Ok(lowtide::TcpState::Closed));
}

#[test]
fn user_timeout_replaces_the_probe_count() {
    let (mut p, c, _s) = pair_with(ka(10, 2, 9));
    p.a.socket(c)
        .set_user_timeout(Duration::from_secs(13))
        .unwrap();
    let t0 = p.now.saturating_since(lowtide::Instant::ZERO);
    p.filter = Some(Box::new(|d, _| match d {
        Dir::AtoB => Verdict::Drop,
        Dir::BtoA => Verdict::Pass,
    }));
    p.drive_for(Duration::from_secs(30));
    // Probes at 10 and 12 s; at 14 s 14 s of silence >= 13 s with a probe out
    // (each timer run late by the wheel: up to 512 ms, then 64 ms each).
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPKeepAlive), 2);
    let rst = p.dropped_rst_time().expect("an RST");
    let late = (rst - t0).checked_sub(Duration::from_secs(14));
    assert!(
        late.is_some_and(|l| l <= Duration::from_millis(512 + 2 * 64)),
        "{late:?}"
    );
}

#[test]
fn no_probe_while_data_is_in_flight_and_none_when_off() {
    let (mut p, c, s) = pair_with(ka(1, 1, 1));
    // Data keeps the connection busy: the RTO, not keepalive, owns it.
    let data = pattern(200_000, 1);
    assert_eq!(send_all(&mut p, true, c, s, &data), data);
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPKeepAlive), 0);
    // Turned off, the timer stops.
    p.a.socket(c)
        .set_keepalive(p.now, Keepalive::default())
        .unwrap();
    p.drive_for(Duration::from_secs(60));
    assert_eq!(p.a.counters().get(Mib::TcpExtTCPKeepAlive), 0);
}

#[test]
fn out_of_range_settings_are_refused() {
    let (mut p, c, _s) = establish(Config::default());
    for bad in [
        ka(0, 1, 1),
        ka(32768, 1, 1),
        ka(1, 0, 1),
        ka(1, 1, 0),
        ka(1, 1, 128),
    ] {
        assert_eq!(
            p.a.socket(c).set_keepalive(p.now, bad),
            Err(SocketError::InvalidInput)
        );
    }
    let n = p.now;
    p.a.socket(c)
        .set_keepalive(n, ka(32767, 32767, 127))
        .unwrap();
}

impl Pair {
    /// When A's RST was put on the wire (the filter drops A's segments; with
    /// recording on they land in `dropped`).
    fn dropped_rst_time(&self) -> Option<Duration> {
        self.dropped
            .iter()
            .chain(self.wire.iter())
            .filter(|(_, d, _)| *d == Dir::AtoB)
            .find(|(_, _, pkt)| Seg::parse(pkt).has(TcpFlags::RST))
            .map(|(t, _, _)| t.saturating_since(lowtide::Instant::ZERO))
    }
}
