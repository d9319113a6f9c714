//! Issue 27 item 3: stack-wide TCP memory under `net.ipv4.tcp_mem`, as Linux's
//! `__sk_mem_raise_allocated` grants it. A host whose `tcp_mem` is tiny still
//! carries its connections' bytes intact: the receiver advertises a zero window
//! for what it cannot take (`ICSK_ACK_NOMEM`) and drops it, the sender's buffer
//! shrinks (`sk_stream_moderate_sndbuf`), and an orphan holding data over the hard
//! limit is reset (`tcp_out_of_memory`).

use crate::common::*;
use lowtide::{Config, Mib, SocketHandle, Stack};
use std::time::Duration;

fn tiny_tcp_mem(pages: [u64; 3]) -> Config {
    Config {
        tcp_mem: pages,
        ..Config::default()
    }
}

/// Reads on `rx` (on A) until `want` bytes arrived, B writing `data` to `tx`.
fn finish(
    p: &mut Pair,
    tx: SocketHandle,
    rx: SocketHandle,
    data: &[u8],
    mut sent: usize,
) -> Vec<u8> {
    let mut got = Vec::new();
    let end = p.now + Duration::from_secs(120);
    while got.len() < data.len() {
        assert!(p.now < end, "stalled at {} of {}", got.len(), data.len());
        if sent < data.len() {
            sent += p.b.send(p.now, tx, &data[sent..]).unwrap_or(0);
        }
        got.extend(drain(&mut p.a, p.now, rx));
        if got.len() < data.len() && !p.step() {
            panic!("idle at {} of {}", got.len(), data.len());
        }
    }
    got
}

fn counter(st: &Stack, m: Mib) -> u64 {
    st.counters().get(m)
}

/// A receiver that does not read, over `tcp_mem[1]`: under pressure, refused
/// beyond its share, it drops in-order data (TcpExtTCPRcvQDrop) and says so with
/// a zero window; its pages stay within the hard limit but for the one segment an
/// empty queue always takes. The sender's retransmissions into that window are
/// probes (`tcp_retransmit_timer`, "receiver dastardly shrinks window"): answered,
/// they never time the connection out, for ten minutes. Once read, the pages go
/// back, the pressure ends, and every byte arrives.
#[test]
fn receiver_over_tcp_mem_offers_a_zero_window_and_recovers() {
    let pair = Pair::with_configs(tiny_tcp_mem([2, 3, 6]), Config::default());
    let (mut p, c, s) = establish_with(pair, A, B);
    let data = pattern(300_000, 5);
    let mut sent = 0;
    let from = p.wire.len();
    let mut most = 0;
    let end = p.now + Duration::from_secs(600);
    while p.now < end {
        sent += p.b.send(p.now, s, &data[sent..]).unwrap_or(0);
        most = most.max(p.a.tcp_memory().pages);
        if !p.step() {
            break;
        }
    }
    assert!(p.a.tcp_memory().pressure, "under pressure");
    assert_eq!(
        p.b.state(s),
        Ok(lowtide::TcpState::Established),
        "still open"
    );
    assert!(
        most <= 6 + 1,
        "pages {most} over tcp_mem[2] and a forced one"
    );
    assert_eq!(counter(&p.a, Mib::TcpExtTCPMemoryPressures), 1);
    assert!(counter(&p.a, Mib::TcpExtTCPRcvQDrop) > 0, "data dropped");
    let zero = p
        .sent_since(from, Dir::AtoB)
        .iter()
        .filter(|s| s.is_pure_ack() && s.th.window == 0)
        .count();
    assert!(zero > 0, "a zero window offered");
    let got = finish(&mut p, s, c, &data, sent);
    assert!(got == data, "bytes intact");
    let m = p.a.tcp_memory();
    assert!(!m.pressure, "pressure ends once read");
    assert!(m.pages <= 1, "pages back: {}", m.pages);
}

/// A sender over the hard limit: the charge of a writer over its send buffer is
/// still granted (it could not block otherwise), but its buffer shrinks to half
/// of what is queued, at least SOCK_MIN_SNDBUF, and no longer grows: the transfer
/// goes on, a few segments at a time, and completes.
#[test]
fn sender_over_tcp_mem_shrinks_its_buffer_and_completes() {
    let pair = Pair::with_configs(tiny_tcp_mem([1, 1, 2]), Config::default());
    let (mut p, c, s) = establish_with(pair, A, B);
    let before = p.a.info(p.now, c).unwrap().sndbuf;
    let data = pattern(400_000, 7);
    assert!(send_all(&mut p, true, c, s, &data) == data, "bytes intact");
    let after = p.a.info(p.now, c).unwrap().sndbuf;
    assert!(after < before / 4, "sndbuf {before} -> {after}");
    assert!(after >= 4608, "at least SOCK_MIN_SNDBUF: {after}");
    assert!(counter(&p.a, Mib::TcpExtTCPMemoryPressures) >= 1);
}

/// `tcp_check_oom` at close: an orphan holding more than SOCK_MIN_SNDBUF while
/// the stack is over `tcp_mem[2]` is reset at once (TcpExtTCPAbortOnMemory).
#[test]
fn orphan_holding_data_over_the_hard_limit_is_reset() {
    let cb = Config {
        tcp_rmem: [4096, 4096, 4096], // B's window closes quickly
        ..Config::default()
    };
    let pair = Pair::with_configs(tiny_tcp_mem([1, 1, 1]), cb);
    let (mut p, c, _s) = establish_with(pair, A, B);
    let data = pattern(200_000, 3);
    let mut sent = 0;
    for _ in 0..50 {
        sent += p.a.send(p.now, c, &data[sent..]).unwrap_or(0);
        p.step();
    }
    let i = p.a.info(p.now, c).unwrap();
    assert!(i.wmem_queued > 4608, "data held: {}", i.wmem_queued);
    let from = p.wire.len();
    p.a.close(p.now, c).unwrap();
    p.drive_for(Duration::from_millis(10));
    assert_eq!(counter(&p.a, Mib::TcpExtTCPAbortOnMemory), 1);
    let rst = p.sent_since(from, Dir::AtoB);
    assert!(rst.iter().any(|s| s.has(lowtide_wire::tcp::TcpFlags::RST)));
    assert_eq!(p.a.tcp_memory().pages, 0, "all pages back");
}

/// The same shrunken window with a receiver gone silent: after twice
/// `TCP_RTO_MAX` without an ACK the sender fails (`tcp_rtx_probe0_timed_out`),
/// not after `tcp_retries2`'s time.
#[test]
fn probes_into_a_shrunken_window_time_out_after_240_s_of_silence() {
    let pair = Pair::with_configs(tiny_tcp_mem([2, 3, 6]), Config::default());
    let (mut p, _c, s) = establish_with(pair, A, B);
    p.b.send(p.now, s, &pattern(100_000, 5)).unwrap();
    p.drive_until(Duration::from_secs(30), |p| {
        p.b.info(p.now, s)
            .is_ok_and(|i| i.snd_wnd == 0 && i.unacked > 0)
    });
    p.filter = Some(Box::new(|d, _| match d {
        Dir::AtoB => Verdict::Drop,
        Dir::BtoA => Verdict::Pass,
    }));
    let silent = p.now;
    p.drive_until(Duration::from_secs(3600), |p| {
        p.b.state(s) != Ok(lowtide::TcpState::Established)
    });
    let took = p.now.saturating_since(silent);
    assert!(took > Duration::from_secs(240), "{took:?}");
    assert!(took < Duration::from_secs(240 + 130), "{took:?}");
    assert_eq!(counter(&p.b, Mib::TcpExtTCPAbortOnTimeout), 1);
}

/// The stack's kept `sk_wmem_queued` sum ([`Stack::wmem_queued`], what the
/// simulator samples in O(1)) follows its sockets through their lives: data queued
/// behind a receiver that does not read, a connection reset by its peer, an abort
/// with data queued, a close into TIME-WAIT; 0 once every socket is gone.
/// (`Pair::step` checks it against a pass over the sockets after every step.)
#[test]
fn kept_wmem_queued_sum_follows_the_sockets() {
    let mut p = Pair::new(Config::default());
    let l = p.b.listen(addr(B, 80), 16).unwrap();
    let c: Vec<SocketHandle> = (0..4)
        .map(|_| p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap())
        .collect();
    p.drive_for(Duration::from_millis(50));
    let s: Vec<SocketHandle> = (0..4).map(|_| p.b.accept(l).unwrap()).collect();
    let data = pattern(400_000, 9);
    for _ in 0..20 {
        for &h in &c {
            let _ = p.a.send(p.now, h, &data);
        }
        p.step();
    }
    let queued = p.a.wmem_queued();
    assert!(queued > 4 * 100_000, "data queued: {queued}");
    p.b.abort(p.now, s[1]).unwrap();
    p.a.abort(p.now, c[0]).unwrap();
    wmem_sum_holds(&p.a);
    p.drive_for(Duration::from_millis(100));
    let left = p.a.wmem_queued();
    assert!(left < queued, "the aborted queue gone: {queued} -> {left}");
    for &h in &[s[2], s[3]] {
        drain(&mut p.b, p.now, h);
    }
    for &h in &[c[2], c[3], c[1]] {
        let _ = p.a.close(p.now, h);
    }
    p.drive_until(Duration::from_secs(60), |p| {
        drain(&mut p.b, p.now, s[2]);
        drain(&mut p.b, p.now, s[3]);
        p.b.state(s[2]) == Ok(lowtide::TcpState::CloseWait)
            && p.b.state(s[3]) == Ok(lowtide::TcpState::CloseWait)
    });
    for &h in &[s[2], s[3]] {
        p.b.close(p.now, h).unwrap();
    }
    p.drive_for(Duration::from_secs(120));
    assert_eq!(p.a.wmem_queued(), 0, "every queue gone");
    assert_eq!(p.b.wmem_queued(), 0, "every queue gone");
}
