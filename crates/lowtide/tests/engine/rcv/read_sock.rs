//! `Stack::recv_with` (Linux's `tcp_read_sock`): the reader sees the receive queue's
//! bytes in place, in order, across the queue's wrap, and the socket consumes them
//! as `recv` does (same window updates, same wire traffic, autotuning aside).

use crate::common::*;
use lowtide::Config;
use std::time::Duration;

/// Sends `data` from A to B; B reads with `recv` (`by_ref` false) or `recv_with`
/// in reads of at most `max` bytes whenever something is ready. Returns what B read
/// and every segment on the wire.
fn transfer(data: &[u8], max: usize, with: bool) -> (Vec<u8>, Vec<Vec<u8>>) {
    // Receive-buffer autotuning off: `tcp_recvmsg_locked` measures it after each
    // skb, `tcp_read_sock` once per call, so the buffers (and windows) they grow
    // differ as on Linux.
    let cfg = Config {
        tcp_moderate_rcvbuf: false,
        ..Config::default()
    };
    let (mut p, c, s) = establish(cfg);
    let mut sent = 0;
    let mut got = Vec::new();
    let mut buf = vec![0u8; max];
    let end = p.now + Duration::from_secs(60);
    while got.len() < data.len() {
        assert!(p.now < end, "stalled at {}", got.len());
        if sent < data.len() {
            sent += p.a.send(p.now, c, &data[sent..]).unwrap_or(0);
        }
        loop {
            let r = if with {
                p.b.recv_with(p.now, s, max, |chunk| got.extend_from_slice(chunk))
            } else {
                p.b.recv(p.now, s, &mut buf)
                    .inspect(|&n| got.extend_from_slice(&buf[..n]))
            };
            match r {
                Ok(n) if n > 0 => {
                    assert!(n <= max);
                    // Read in small steps so the queue's ring wraps.
                    if got.len() % 3 == 0 {
                        break;
                    }
                }
                _ => break,
            }
        }
        if !p.step() {
            p.drive_for(Duration::from_millis(1));
        }
    }
    let wire = p.wire.iter().map(|(_, _, s)| s.clone()).collect();
    (got, wire)
}

#[test]
fn recv_with_reads_what_recv_reads_and_sends_the_same_segments() {
    let data = pattern(400_000, 9);
    for max in [1000usize, 4096, 65536] {
        let (by_copy, wire_copy) = transfer(&data, max, false);
        let (in_place, wire_in_place) = transfer(&data, max, true);
        assert_eq!(by_copy, data, "recv, max {max}");
        assert_eq!(in_place, data, "recv_with, max {max}");
        assert_eq!(wire_copy, wire_in_place, "the same traffic, max {max}");
    }
}

/// A packet whose payload lies in shared buffers (a GRO packet's frags) is queued by
/// reference: the reader sees the very buffers, copied nowhere in between.
#[test]
fn frags_reach_the_reader_without_a_copy() {
    let (mut p, c, s) = establish(Config::default());
    p.a.set_tx_payload_apart(true);
    // Two full segments: one GSO packet at once (no Nagle wait).
    let data = pattern(2 * 1448, 4);
    assert_eq!(p.a.send(p.now, c, &data), Ok(data.len()));
    let tx = p.a.poll_transmit(p.now).expect("a data packet");
    assert_eq!(tx.payload.len(), data.len(), "payload kept apart");
    let payload = tx.payload.to_bytes();
    let frags = [payload.slice(..1000), payload.slice(1000..)];
    p.b.handle_packet_frags(p.now, &tx.packet, &frags);
    let mut seen = Vec::new();
    let mut got = Vec::new();
    let n = p.b.recv_with(p.now, s, usize::MAX, |chunk| {
        seen.push(chunk.as_ptr());
        got.extend_from_slice(chunk);
    });
    assert_eq!(n, Ok(data.len()));
    assert_eq!(got, data);
    assert_eq!(seen, vec![frags[0].as_ptr(), frags[1].as_ptr()]);
}
