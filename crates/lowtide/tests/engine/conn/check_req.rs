//! A listener's child still in SYN-RECV (Linux's request sock), as `tcp_check_req`
//! (tcp_minisocks.c) decides each segment for it: a wrong ACK draws the listener's
//! reset, a reset not at `rcv_nxt` an ACK, a reset at `rcv_nxt` or a SYN in the window
//! ends the request (`embryonic_reset`, `TcpExtEmbryonicRsts`), and the final ACK that finds the accept queue full is
//! dropped (`listen_overflow`) or, with `net.ipv4.tcp_abort_on_overflow`, reset.

use crate::common::*;
use lowtide::{Config, Instant, Mib, SocketError, SocketHandle, TcpState};
use lowtide_wire::tcp::{TcpFlags, TcpRepr};
use std::time::Duration;

/// A connects to B's listener on port 80; B's SYN-ACK arrives, A's final ACK is
/// held back: (A's socket, the held ACK). B's child waits in SYN-RECV.
fn held_final_ack(p: &mut Pair) -> (SocketHandle, Vec<u8>) {
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_until(Duration::from_secs(1), |p| {
        p.a.state(c) == Ok(TcpState::Established)
    });
    let mut held = p.take_in_flight(true);
    assert_eq!(held.len(), 1, "the final ACK");
    (c, held.remove(0))
}

/// One request waiting in SYN-RECV on B (listener backlog 8), with A's final ACK
/// held back and a forger that speaks for A; `from` is the wire's length then.
struct Request {
    p: Pair,
    l: SocketHandle,
    c: SocketHandle,
    ack: Vec<u8>,
    forger: Peer,
    from: usize,
}

fn request() -> Request {
    request_with(|_| {})
}

/// [`request`] with `set` applied to both stacks' configuration.
fn request_with(set: impl FnOnce(&mut Config)) -> Request {
    let mut cfg = Config::default();
    set(&mut cfg);
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let (c, ack) = held_final_ack(&mut p);
    let forger = learn(&p, Dir::BtoA);
    let from = p.wire.len();
    Request {
        p,
        l,
        c,
        ack,
        forger,
        from,
    }
}

/// Two connections fill an accept queue of backlog 1 ("more than the backlog",
/// `sk_acceptq_is_full`); a third's final ACK, held until then, arrives: B counts the
/// overflow. Returns (pair, listener, the third's socket on A, the wire's length
/// before the ACK).
fn overflow(cfg: Config) -> (Pair, SocketHandle, SocketHandle, usize) {
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 1).unwrap();
    let c1 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(50));
    let (c3, ack) = held_final_ack(&mut p);
    let c2 = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(50));
    for c in [c1, c2, c3] {
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
    }
    assert_eq!(p.b.socket_ref(l).accept_queue_len(), Ok(2), "full: 2 > 1");
    let before = p.b.counters().get(Mib::TcpExtListenOverflows);
    let from = p.wire.len();
    p.inject(true, &ack);
    let overflows = p.b.counters().get(Mib::TcpExtListenOverflows) - before;
    assert_eq!(overflows, 1, "the final ACK overflowed");
    (p, l, c3, from)
}

/// `tcp_abort_on_overflow` 0 (Linux's default): the ACK is dropped, the request
/// stays, its SYN-ACK timer sends the SYN-ACK again, and A's answer to it, once the
/// application has accepted one connection, makes the child.
#[test]
fn a_final_ack_on_a_full_accept_queue_is_dropped_then_retried() {
    let (mut p, l, c3, from) = overflow(Config::default());
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 0);
    assert_eq!(p.b.connection_count(), 3, "the request stays in SYN-RECV");
    p.drive_for(Duration::from_millis(100));
    assert!(
        p.sent_since(from, Dir::BtoA).is_empty(),
        "no reset, no ACK: {:?}",
        p.sent_since(from, Dir::BtoA)
    );
    assert!(p.b.accept(l).is_ok());
    // The SYN-ACK timer (1 s after the first SYN-ACK) sends it again; A's ACK now
    // finds room.
    p.drive_for(Duration::from_millis(1200));
    let synacks = p
        .sent_since(from, Dir::BtoA)
        .into_iter()
        .filter(|s| s.has(TcpFlags::SYN) && s.has(TcpFlags::ACK))
        .count();
    assert_eq!(synacks, 1, "the SYN-ACK sent again");
    assert_eq!(p.b.socket_ref(l).accept_queue_len(), Ok(2));
    assert!(p.b.accept(l).is_ok());
    let s3 = p.b.accept(l).unwrap();
    assert_eq!(send_all(&mut p, true, c3, s3, b"late"), b"late");
}

/// `tcp_abort_on_overflow` 1: the final ACK that overflows is answered with a reset
/// (its sequence number the ACK's), the request ends (`TcpExtEmbryonicRsts`), and A's
/// connection is reset.
#[test]
fn abort_on_overflow_resets_the_request() {
    let cfg = Config {
        tcp_abort_on_overflow: 1,
        ..Config::default()
    };
    let (mut p, _l, c3, from) = overflow(cfg);
    let sent = p.sent_since(from, Dir::BtoA);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].has(TcpFlags::RST) && !sent[0].has(TcpFlags::ACK));
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtListenDrops), 1);
    assert_eq!(p.b.connection_count(), 2, "the request is gone");
    p.drive_for(Duration::from_millis(10));
    assert_eq!(p.a.socket_error(c3), Ok(Some(SocketError::ConnectionReset)));
}

/// A reset at `rcv_nxt` ends the request (RFC 793's "second check the RST bit" in a
/// non-synchronized state): no reply, the request gone, `TcpAttemptFails` and
/// `TcpExtEmbryonicRsts` counted; A's held ACK then finds only the listener, which
/// resets it.
#[test]
fn a_reset_at_rcv_nxt_ends_a_request_silently() {
    let Request {
        mut p,
        l,
        c,
        ack,
        forger,
        from,
    } = request();
    p.inject(true, &forger.seg(TcpFlags::RST, forger.seq, 0, &[]));
    assert!(p.sent_since(from, Dir::BtoA).is_empty(), "no reply");
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 1);
    assert_eq!(p.b.counters().get(Mib::TcpAttemptFails), 1);
    p.inject(true, &ack);
    p.drive_for(Duration::from_millis(10));
    assert_eq!(p.a.socket_error(c), Ok(Some(SocketError::ConnectionReset)));
    assert_eq!(p.b.accept(l), Err(SocketError::WouldBlock));
}

/// A reset in the window but not at `rcv_nxt` (RFC 5961 section 3.2, as Linux 6.18
/// applies it to a request) draws the request's challenge ACK
/// (`TcpExtTCPChallengeACK`), a second within `tcp_invalid_ratelimit` none
/// (`TcpExtTCPACKSkippedChallenge`), and the request stays: A's held ACK completes
/// it.
#[test]
fn an_in_window_reset_draws_a_rate_limited_ack_and_the_request_stays() {
    let Request {
        mut p,
        l,
        c,
        ack,
        forger,
        from,
    } = request();
    p.inject(
        true,
        &forger.seg(TcpFlags::RST, forger.seq.wrapping_add(1), 0, &[]),
    );
    p.inject(
        true,
        &forger.seg(TcpFlags::RST, forger.seq.wrapping_add(2), 0, &[]),
    );
    let sent = p.sent_since(from, Dir::BtoA);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].is_pure_ack() && sent[0].th.ack == forger.seq);
    let n = |m| p.b.counters().get(m);
    let counted = (
        n(Mib::TcpExtTCPChallengeACK),
        n(Mib::TcpExtTCPACKSkippedChallenge),
        n(Mib::TcpExtTCPACKSkippedSynRecv),
    );
    assert_eq!(counted, (1, 1, 0));
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 0);
    p.inject(true, &ack);
    let s = p.b.accept(l).unwrap();
    assert_eq!(send_all(&mut p, true, c, s, b"ok"), b"ok");
}

/// The request's challenge ACK takes from the stack-wide RFC 5961 budget too
/// (`tcp_send_challenge_ack`: net.ipv4.tcp_challenge_ack_limit): with the
/// per-socket limit off (`tcp_invalid_ratelimit` 0) and a budget of one a second,
/// three resets in the window draw one ACK (Linux 6.18: TcpExtTCPChallengeACK 1,
/// and 3 with the default unlimited budget).
#[test]
fn an_in_window_resets_challenge_ack_takes_from_the_stack_budget() {
    for (limit, acks) in [(1, 1), (i32::MAX as u32, 3)] {
        let Request {
            mut p,
            forger,
            from,
            ..
        } = request_with(|cfg| {
            cfg.tcp_invalid_ratelimit = 0;
            cfg.tcp_challenge_ack_limit = limit;
        });
        for k in 1..=3 {
            let rst = forger.seg(TcpFlags::RST, forger.seq.wrapping_add(k), 0, &[]);
            p.inject(true, &rst);
        }
        let sent = p.sent_since(from, Dir::BtoA);
        assert_eq!(sent.len(), acks, "limit {limit}: {sent:?}");
        assert_eq!(p.b.counters().get(Mib::TcpExtTCPChallengeACK), acks as u64);
    }
}

/// A SYN in the window (not the peer's first SYN again) ends the request with a
/// reset (`embryonic_reset`): RST|ACK acknowledging the SYN.
#[test]
fn an_in_window_syn_ends_a_request_with_a_reset() {
    let Request {
        mut p,
        forger,
        from,
        ..
    } = request();
    let seq = forger.seq.wrapping_add(50);
    p.inject(true, &forger.seg(TcpFlags::SYN, seq, 0, &[]));
    let sent = p.sent_since(from, Dir::BtoA);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].has(TcpFlags::RST) && sent[0].has(TcpFlags::ACK));
    assert_eq!(sent[0].th.ack, seq.wrapping_add(1));
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 1);
    assert_eq!(p.b.counters().get(Mib::TcpAttemptFails), 1);
}

/// `tcp_check_req`'s pure retransmitted SYN is judged on RST, SYN and ACK alone
/// (`flg = tcp_flag_word(th) & (TCP_FLAG_RST|TCP_FLAG_SYN|TCP_FLAG_ACK)`): a SYN at
/// `rcv_isn` that also carries ECE and CWR (an ECN setup SYN), PSH, URG or FIN gets
/// the SYN-ACK again (`inet_rtx_syn_ack`) and the request stays.
#[test]
fn a_retransmitted_syn_with_other_flags_gets_the_synack_again() {
    let other = [
        TcpFlags::ECE | TcpFlags::CWR,
        TcpFlags::PSH,
        TcpFlags::URG,
        TcpFlags::FIN,
    ];
    for extra in other {
        let Request {
            mut p,
            forger,
            from,
            ..
        } = request();
        let isn = forger.seq.wrapping_sub(1);
        p.inject(true, &forger.seg(TcpFlags::SYN | extra, isn, 0, &[]));
        let sent = p.sent_since(from, Dir::BtoA);
        assert_eq!(sent.len(), 1, "{extra:?}: {sent:?}");
        assert!(
            sent[0].has(TcpFlags::SYN) && sent[0].has(TcpFlags::ACK),
            "{extra:?}"
        );
        assert_eq!(sent[0].th.ack, forger.seq, "{extra:?}");
        assert_eq!(p.b.connection_count(), 1, "{extra:?}: the request stays");
        assert_eq!(p.b.counters().get(Mib::TcpExtTCPSynRetrans), 1, "{extra:?}");
    }
}

/// An ACK of something B never sent draws the listener's reset (sequence number
/// the ACK's, RFC 793 page 36) and leaves the request as it was: the real final ACK
/// then completes it.
#[test]
fn a_wrong_ack_draws_a_reset_and_the_request_stays() {
    let Request {
        mut p,
        l,
        c,
        ack,
        forger,
        from,
    } = request();
    let wrong = forger.ack.wrapping_add(5);
    p.inject(true, &forger.seg(TcpFlags::ACK, forger.seq, wrong, &[]));
    let sent = p.sent_since(from, Dir::BtoA);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].has(TcpFlags::RST) && sent[0].th.seq == wrong);
    assert_eq!(p.b.connection_count(), 1, "the request stays");
    assert_eq!(p.b.counters().get(Mib::TcpExtEmbryonicRsts), 0);
    p.inject(true, &ack);
    let s = p.b.accept(l).unwrap();
    assert_eq!(send_all(&mut p, true, c, s, b"ok"), b"ok");
}

/// `TCP_DEFER_ACCEPT` of 3 SYN-ACK timeouts (`secs_to_retrans(5)`): the bare final
/// ACK is dropped (`TcpExtTCPDeferAcceptDrop`), no child yet; the request sends no
/// SYN-ACK at its first two timeouts (1 s, 3 s), sends one at the third (7 s; the
/// timer wheel runs it at 7.104 s), and A's first data makes the child, which
/// delivers it.
#[test]
fn defer_accept_drops_the_bare_ack_and_waits_for_data() {
    use lowtide::tcp::sockopt::{retrans_to_secs, secs_to_retrans, SockOptions};
    assert_eq!((secs_to_retrans(5), retrans_to_secs(3)), (3, 7));
    let mut p = Pair::new(Config::default());
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let opts = SockOptions {
        defer_accept: secs_to_retrans(5),
        ..SockOptions::default()
    };
    p.b.socket(l).set_listener_options(&opts).unwrap();
    let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    p.drive_for(Duration::from_millis(100));
    assert_eq!(p.a.state(c), Ok(TcpState::Established));
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPDeferAcceptDrop), 1);
    assert_eq!(p.b.accept(l), Err(SocketError::WouldBlock));
    let from = p.wire.len();
    p.drive_for(Duration::from_millis(6800));
    let synacks = |p: &Pair| {
        p.sent_since(from, Dir::BtoA)
            .iter()
            .filter(|s| s.has(TcpFlags::SYN))
            .count()
    };
    assert_eq!(
        synacks(&p),
        0,
        "no SYN-ACK before the last deferred timeout"
    );
    p.drive_for(Duration::from_millis(300));
    assert_eq!(synacks(&p), 1, "the SYN-ACK at 7.104 s");
    p.a.send(p.now, c, b"data").unwrap();
    p.drive_for(Duration::from_millis(50));
    let s = p.b.accept(l).unwrap();
    assert_eq!(drain(&mut p.b, p.now, s), b"data");
}

/// A connects to B's listener (backlog 8) and only its first SYN gets through
/// (the filter drops the rest, recorded): B holds one request that hears nothing.
fn silent_request(cfg: Config) -> (Pair, SocketHandle) {
    let mut p = Pair::new(cfg);
    p.record = true;
    let l = p.b.listen(addr(B, 80), 8).unwrap();
    let _c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
    let mut first = true;
    p.filter = Some(Box::new(move |_, _| match std::mem::take(&mut first) {
        true => Verdict::Pass,
        false => Verdict::Drop,
    }));
    (p, l)
}

/// `reqsk_timer_handler`: a request whose peer never answers sends its SYN-ACK
/// again at 1, 3, 7, 15 and 31 s (`tcp_synack_retries` 5; the timer wheel runs
/// these at 1.024, 3.072, 7.104, 15.36 and 31.744 s), counts each timeout
/// (`tcp_syn_ack_timeout`: `TcpExtTCPTimeouts`), and at the sixth (63 s, run at
/// 64 s) goes without a reset and without `TcpExtTCPAbortOnTimeout`, which only a
/// socket that timed out counts.
#[test]
fn a_silent_request_expires_quietly_after_its_synack_retries() {
    let (mut p, _l) = silent_request(Config::default());
    p.drive_for(Duration::from_millis(63_900));
    assert_eq!(p.b.connection_count(), 1);
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPSynRetrans), 5);
    p.drive_for(Duration::from_millis(200));
    assert_eq!(p.b.connection_count(), 0, "expired at 64 s");
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPTimeouts), 6);
    assert_eq!(p.b.counters().get(Mib::TcpExtTCPAbortOnTimeout), 0);
    assert_eq!(p.b.counters().get(Mib::TcpOutRsts), 0);
}

/// `reqsk_timer_handler`'s pruning: 12 silent requests on a backlog of 16 fill more
/// than half of it, and once their first timeouts have made them all old (none
/// `young`), a request keeps 2 SYN-ACK retries instead of 5: at 7 s (1 + 2 + 4; the
/// timer wheel runs it at 7.104 s) they expire one by one until 8 are left, no more
/// than half the backlog, which keep all 5 (63 s, run at 64 s). Four such requests
/// never clog it.
#[test]
fn old_requests_that_clog_the_queue_lose_their_retries() {
    for (n, left_at_7s) in [(12usize, 8usize), (4, 4)] {
        let mut p = Pair::new(Config::default());
        let _l = p.b.listen(addr(B, 80), 16).unwrap();
        // Each first SYN reaches B; nothing else gets through either way.
        let mut syns = n;
        p.filter = Some(Box::new(move |d, _| match d {
            Dir::AtoB if syns > 0 => {
                syns -= 1;
                Verdict::Pass
            }
            _ => Verdict::Drop,
        }));
        for _ in 0..n {
            p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        }
        p.drive_for(Duration::from_millis(6_900));
        assert_eq!(p.b.connection_count(), n, "{n}: all there before 7 s");
        p.drive_for(Duration::from_millis(400));
        assert_eq!(p.b.connection_count(), left_at_7s, "{n}: left after 7 s");
        p.drive_for(Duration::from_millis(56_500));
        assert_eq!(p.b.connection_count(), left_at_7s, "{n}: before 64 s");
        p.drive_for(Duration::from_millis(400));
        assert_eq!(p.b.connection_count(), 0, "{n}: gone at 64 s");
    }
}

/// `reqsk_timer_handler` re-arms a request's timer with `reqsk_timeout(req,
/// TCP_RTO_MAX)`: its SYN-ACKs back off 1, 2, 4, 8, 16 s whatever
/// `net.ipv4.tcp_rto_max_ms` says (Linux 6.18 bounds a Fast Open child's SYN-ACK
/// timer by `icsk_rto_max`, not a request's), each on the timer wheel's tick.
#[test]
fn a_requests_synack_backoff_ignores_tcp_rto_max_ms() {
    let cfg = Config {
        tcp_rto_max_ms: 1000,
        ..Config::default()
    };
    let (mut p, _l) = silent_request(cfg);
    p.drive_for(Duration::from_secs(40));
    let synacks: Vec<Instant> = p
        .dropped
        .iter()
        .filter(|(_, d, pk)| *d == Dir::BtoA && Seg::parse(pk).has(TcpFlags::SYN))
        .map(|(t, _, _)| *t)
        .collect();
    let start = synacks[0];
    let times: Vec<u64> = synacks
        .iter()
        .map(|t| t.saturating_since(start).as_millis() as u64)
        .collect();
    let delays = [1, 2, 4, 8, 16].map(|s| s * 1000);
    assert_eq!(times, wheel_chain(start, &delays));
}

/// `tcp_create_openreq_child` after SYN-ACK timeouts (`req->num_timeout`): the
/// child's `tcpi_total_rto` is the timeouts, `tcpi_total_rto_recoveries` 1, and
/// `tcpi_total_rto_time` runs from the first SYN-ACK (`snt_synack`) to the child's
/// making, not from the first timeout; `tcpi_total_retrans` counts every SYN-ACK
/// sent again (`req->num_retrans`). Here B's timer resends at 1 and 3 s, and A's
/// SYN at 4 s draws one more, which completes the handshake.
#[test]
fn a_requests_child_counts_its_synack_timeouts_from_the_first_synack() {
    let (mut p, l) = silent_request(Config::default());
    p.drive_for(Duration::from_millis(3_500));
    p.filter = None;
    p.drive_for(Duration::from_millis(1_000));
    let s = p.b.accept(l).expect("the handshake completed");
    let first_synack = p
        .dropped
        .iter()
        .find(|(_, d, pk)| *d == Dir::BtoA && Seg::parse(pk).has(TcpFlags::SYN))
        .map(|(t, _, _)| *t)
        .unwrap();
    let final_ack = p
        .wire
        .iter()
        .find(|(_, d, pk)| *d == Dir::AtoB && Seg::parse(pk).is_pure_ack())
        .map(|(t, _, _)| *t + p.delay)
        .unwrap();
    let info = p.b.info(p.now, s).unwrap();
    let ms = final_ack.as_millis() - first_synack.as_millis();
    assert!(ms > 4_000, "{ms}");
    let got = (
        info.total_retrans,
        info.total_rto,
        info.total_rto_recoveries,
        info.total_rto_time,
    );
    assert_eq!(got, (3, 2, 1, ms));
}

/// A request's wrong ACK goes to its listener (`tcp_check_req`'s `return sk`),
/// whose `tcp_v4_cookie_check` runs first once the SYN queue has overflowed into
/// cookies: the ACK fails as a cookie (TcpExtSyncookiesFailed), then the listener
/// resets it. A reset or a SYN-ACK skips the check (`cookie_v4_check`'s `th->rst`,
/// `tcp_v4_cookie_check`'s `!th->syn`); without a recent overflow none is made.
#[test]
fn a_wrong_ack_to_a_request_fails_the_listeners_cookie_check_after_an_overflow() {
    for overflow in [false, true] {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let l = p.b.listen(addr(B, 80), 0).unwrap();
        let (_c, ack) = held_final_ack(&mut p);
        let forger = learn(&p, Dir::BtoA);
        if overflow {
            // Another SYN finds the SYN queue (1 request, backlog 0) full: a cookie.
            let syn = TcpRepr {
                seq: 5000,
                flags: TcpFlags::SYN,
                window: 65535,
                ..Default::default()
            };
            p.inject(true, &build(addr(A, 4444), addr(B, 80), &syn, &[], 1));
            assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesSent), 1);
        }
        let from = p.wire.len();
        let wrong = forger.ack.wrapping_add(5);
        for flags in [TcpFlags::ACK | TcpFlags::RST, TcpFlags::ACK | TcpFlags::SYN] {
            p.inject(true, &forger.seg(flags, forger.seq, wrong, &[]));
        }
        assert_eq!(p.b.counters().get(Mib::TcpExtSyncookiesFailed), 0);
        p.inject(true, &forger.seg(TcpFlags::ACK, forger.seq, wrong, &[]));
        let failed = p.b.counters().get(Mib::TcpExtSyncookiesFailed);
        assert_eq!(failed, u64::from(overflow), "overflow {overflow}");
        let resets = p.sent_since(from, Dir::BtoA);
        assert!(resets.iter().all(|s| s.has(TcpFlags::RST)), "{resets:?}");
        assert_eq!(resets.len(), 2, "the SYN-ACK's and the ACK's");
        p.inject(true, &ack);
        assert!(p.b.accept(l).is_ok(), "the request stays");
    }
}
