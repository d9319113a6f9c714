//! Zero-window probing and the write timeout (tcp_timer.c `tcp_probe_timer`,
//! `tcp_write_timeout`, `TCP_USER_TIMEOUT`): a sender stays open while the receiver
//! answers its probes
//! ([RFC 1122 section 4.2.2.17](https://www.rfc-editor.org/rfc/rfc1122#section-4.2.2.17)),
//! and gives up on a receiver that stopped answering or when the user timeout says so.

use crate::common::*;
use lowtide::{Config, EventKind, SocketError, SocketHandle, TcpState};
use std::time::Duration;

/// A connection whose receiver (B) never reads: B's 8 KB buffer (from its first
/// window on) fills, its window closes, and A is left probing with 100 KB queued.
fn zero_window(cfg: Config) -> (Pair, SocketHandle, SocketHandle) {
    let small = Config {
        tcp_rmem: [4096, 8192, 8192],
        tcp_moderate_rcvbuf: false,
        ..cfg.clone()
    };
    let (mut p, c, s) = establish_with(Pair::with_configs(cfg, small), A, B);
    p.a.send(p.now, c, &pattern(100_000, 1)).unwrap();
    p.drive_until(Duration::from_secs(30), |p| {
        let i = p.a.info(p.now, c).unwrap();
        i.snd_wnd == 0 && i.unacked == 0 && i.probes > 0
    });
    (p, c, s)
}

/// The application got an `ETIMEDOUT` error event on `c`.
fn timed_out(p: &Pair, c: SocketHandle) -> bool {
    p.events_a
        .iter()
        .any(|e| e.socket == c && e.kind == EventKind::Error(SocketError::TimedOut))
}

/// Any error event on `c`.
fn failed(p: &Pair, c: SocketHandle) -> bool {
    p.events_a
        .iter()
        .any(|e| e.socket == c && matches!(e.kind, EventKind::Error(_)))
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The receiver goes silent: after `tcp_retries2` (15) unanswered probes the sender
/// fails with ETIMEDOUT (before, it probed forever).
#[test]
fn unanswered_probes_abort_after_tcp_retries2() {
    let (mut p, c, _s) = zero_window(Config::default());
    p.filter = Some(Box::new(|d, _| match d {
        Dir::BtoA => Verdict::Drop,
        Dir::AtoB => Verdict::Pass,
    }));
    let start = p.now;
    p.drive_until(secs(3 * 3600), |p| failed(p, c));
    assert!(timed_out(&p, c));
    let took = p.now.saturating_since(start);
    // Probes back off from the RTO to 120 s: 15 of them take minutes, not hours.
    assert!(took > secs(300) && took < secs(1800), "{took:?}");
    assert!(p.a.counters().get(lowtide::Mib::TcpExtTCPAbortOnTimeout) == 1);
}

/// A receiver that answers every probe keeps the connection open indefinitely.
#[test]
fn answered_probes_keep_the_connection_open() {
    let (mut p, c, _s) = zero_window(Config::default());
    p.drive_for(secs(3600));
    assert_eq!(p.a.state(c), Ok(TcpState::Established));
    assert!(!failed(&p, c));
    assert!(
        p.a.info(p.now, c).unwrap().probes <= 1,
        "each ACK resets probes_out"
    );
}

/// `TCP_USER_TIMEOUT` bounds how long the window may stay closed, answered or not.
#[test]
fn user_timeout_bounds_a_closed_window() {
    let (mut p, c, _s) = zero_window(Config::default());
    p.a.socket(c).set_user_timeout(secs(30)).unwrap();
    assert_eq!(p.a.socket_ref(c).user_timeout(), Ok(secs(30)));
    let start = p.now;
    p.drive_until(secs(600), |p| failed(p, c));
    assert!(timed_out(&p, c));
    let took = p.now.saturating_since(start);
    assert!(took >= secs(25) && took <= secs(35), "{took:?}");
}

/// `TCP_USER_TIMEOUT` bounds how long sent data may stay unacknowledged: 5 s, not
/// the ~15 minutes of `tcp_retries2`.
#[test]
fn user_timeout_bounds_retransmissions() {
    let (mut p, c, _s) = establish(Config::default());
    p.a.socket(c).set_user_timeout(secs(5)).unwrap();
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    p.a.send(p.now, c, &pattern(10_000, 2)).unwrap();
    let start = p.now;
    p.drive_until(secs(120), |p| failed(p, c));
    assert!(timed_out(&p, c));
    let took = p.now.saturating_since(start);
    assert!(took >= secs(5) && took <= secs(7), "{took:?}");
}

/// Without a user timeout, lost data times out after tcp_retries2's modelled time
/// (`tcp_model_timeout`: 924.6 s from TCP_RTO_MIN), counted from the first
/// retransmission.
#[test]
fn retransmissions_time_out_after_the_model_time() {
    let (mut p, c, _s) = establish(Config::default());
    p.filter = Some(Box::new(|_, _| Verdict::Drop));
    p.a.send(p.now, c, &pattern(10_000, 3)).unwrap();
    let start = p.now;
    p.drive_until(secs(3600), |p| failed(p, c));
    assert!(timed_out(&p, c));
    let took = p.now.saturating_since(start);
    assert!(
        took >= Duration::from_millis(924_600) && took < secs(1100),
        "{took:?}"
    );
}

/// `tcp_send_probe0` backs off with `icsk_backoff` alone: `tcpi_rto` stays the RTO
/// the connection had (only `tcp_retransmit_timer` doubles `icsk_rto`) while
/// `tcpi_backoff` counts the probes and their interval doubles from it
/// (`tcp_probe0_when`); once the window takes the send head, `tcp_ack_probe`
/// clears the backoff and the RTO is still the same.
#[test]
fn probes_back_off_without_doubling_the_rto() {
    let (mut p, c, s) = zero_window(Config::default());
    let rto = p.a.info(p.now, c).unwrap().rto;
    p.drive_until(secs(60), |p| p.a.info(p.now, c).unwrap().backoff >= 3);
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!(i.rto, rto, "tcpi_rto unchanged by probes");
    assert!(i.backoff >= 3);
    // The receiver reads: the window opens, the probes end.
    drain(&mut p.b, p.now, s);
    p.drive_until(secs(60), |p| p.a.info(p.now, c).unwrap().backoff == 0);
    p.drive_for(Duration::from_millis(200));
    let i = p.a.info(p.now, c).unwrap();
    assert_eq!((i.backoff, i.probes), (0, 0));
    assert!(i.bytes_acked > 8192, "sending again: {}", i.bytes_acked);
}

/// `tcp_ack_probe`: an ACK that leaves the window closed times the next probe
/// `tcp_probe0_when` from that ACK, not from the last probe.
#[test]
fn a_late_probe_ack_times_the_next_probe_from_itself() {
    let (mut p, _c, _s) = zero_window(Config::default());
    // Every ACK from B arrives 300 ms late.
    p.extra_delay = Some(Box::new(|_, d, _| match d {
        Dir::BtoA => Duration::from_millis(300),
        Dir::AtoB => Duration::ZERO,
    }));
    let from = p.wire.len();
    p.drive_for(secs(20));
    let probes: Vec<_> = p.wire[from..]
        .iter()
        .filter(|(_, d, pkt)| *d == Dir::AtoB && Seg::parse(pkt).payload.is_empty())
        .map(|(t, _, _)| *t)
        .collect();
    assert!(probes.len() >= 4, "{probes:?}");
    // Each gap: the 320 ms the probe and its ACK took, then tcp_probe0_when,
    // which doubles from probe to probe, as the timer wheel runs it: never early,
    // at most a level's granularity late (under 1/7 of the delay).
    let rtt = Duration::from_millis(320);
    let when: Vec<_> = probes
        .windows(2)
        .map(|w| w[1].saturating_since(w[0]).checked_sub(rtt))
        .collect();
    for w in when.windows(2) {
        let (a, b) = (
            w[0].expect("a gap").as_micros(),
            w[1].expect("a gap").as_micros(),
        );
        assert!(2 * a * 7 / 8 <= b && b <= 2 * a * 8 / 7, "{when:?}");
    }
}
