//! Urgent data, branch by branch of `tcp_urg`, `tcp_check_urg`, `tcp_recv_urg`,
//! `tcp_recvmsg_locked`'s mark checks and `__tcp_transmit_skb`'s pointer.

use super::*;
use crate::config::Config;
use crate::tcp::TestStack;
use crate::time::Instant;
use bytes::Bytes;

/// An established connection that has received `queued` in-order bytes from
/// offset 1, none read.
fn receiver(cfg: &Config, queued: usize) -> Tcb {
    let mut t = Tcb::for_test(cfg);
    t.state = TcpState::Established;
    t.rcv_nxt = 1 + queued as u64;
    t.copied_seq = 1;
    if queued > 0 {
        t.rcv_queue
            .push(Bytes::from((0..queued as u8).collect::<Vec<_>>()), 1000);
    }
    t
}

fn urg_seg(seq: u64, ptr: u16) -> TcpRepr {
    TcpRepr {
        seq: seq as u32,
        flags: TcpFlags::ACK | TcpFlags::URG,
        urgent: ptr,
        ..TcpRepr::default()
    }
}

/// Runs `tcp_urg` for a segment at `seq` with `payload`.
fn rx(t: &mut Tcb, cfg: &Config, th: &TcpRepr, seq: u64, payload: &[u8]) -> usize {
    let mut st = TestStack::default();
    t.urg(&mut st.ctx(cfg, Instant(1_000_000), true), th, seq, payload);
    st.events.len()
}

#[test]
fn bsd_pointer_names_the_byte_before_it_and_stdurg_the_byte_itself() {
    let mut cfg = Config::default();
    let mut t = receiver(&cfg, 0);
    // Segment 1..11, pointer 10: BSD, the 10th byte (offset 10).
    assert_eq!(rx(&mut t, &cfg, &urg_seg(1, 10), 1, &[7; 10]), 1, "woken");
    assert_eq!(t.urg.seq, 10);
    assert_eq!(t.urg.data, TCP_URG_VALID | 7);
    cfg.tcp_stdurg = true;
    let mut t = receiver(&cfg, 0);
    rx(
        &mut t,
        &cfg,
        &urg_seg(1, 9),
        1,
        &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    );
    assert_eq!((t.urg.seq, t.urg.data), (10, TCP_URG_VALID | 9));
    // A pointer of 0 stays 0 either way (`ptr && !stdurg`).
    cfg.tcp_stdurg = false;
    let mut t = receiver(&cfg, 0);
    rx(&mut t, &cfg, &urg_seg(1, 0), 1, &[5; 3]);
    assert_eq!((t.urg.seq, t.urg.data), (1, TCP_URG_VALID | 5));
}

#[test]
fn a_byte_beyond_the_segment_waits_and_any_later_segment_may_hold_it() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 0);
    assert_eq!(rx(&mut t, &cfg, &urg_seg(1, 20), 1, &[0; 10]), 0);
    assert_eq!((t.urg.seq, t.urg.data), (20, TCP_URG_NOTYET));
    assert_eq!(t.recv_urg(false, 1), Err(SocketError::WouldBlock));
    // The next segment, without URG, holds it (its 9th byte).
    t.rcv_nxt = 11;
    let plain = TcpRepr {
        flags: TcpFlags::ACK,
        ..TcpRepr::default()
    };
    let data: Vec<u8> = (0..10).collect();
    assert_eq!(rx(&mut t, &cfg, &plain, 11, &data), 1);
    assert_eq!(t.urg.data, TCP_URG_VALID | 9);
}

#[test]
fn old_replayed_and_not_newer_pointers_are_ignored() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 10);
    // Before rcv_nxt: "do not replay urg ptr".
    rx(&mut t, &cfg, &urg_seg(1, 5), 1, &[]);
    assert_eq!(t.urg.data, 0);
    // Pending at 30; an older (or equal) pointer changes nothing.
    rx(&mut t, &cfg, &urg_seg(11, 20), 11, &[]);
    assert_eq!((t.urg.seq, t.urg.data), (30, TCP_URG_NOTYET));
    rx(&mut t, &cfg, &urg_seg(11, 15), 11, &[]);
    rx(&mut t, &cfg, &urg_seg(11, 20), 11, &[]);
    assert_eq!(t.urg.seq, 30);
    rx(&mut t, &cfg, &urg_seg(11, 25), 11, &[]);
    assert_eq!(t.urg.seq, 35, "a newer one replaces it");
    // Already read past: ignored.
    let mut t = receiver(&cfg, 0);
    t.copied_seq = 50;
    t.rcv_nxt = 50;
    rx(&mut t, &cfg, &urg_seg(40, 5), 40, &[]);
    assert_eq!(t.urg.data, 0);
}

#[test]
fn a_new_pointer_drops_the_old_byte_under_the_reader() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 10);
    t.urg = crate::tcp::sock::Urg {
        data: TCP_URG_VALID | 3,
        seq: 1,
        ..Default::default()
    };
    rx(&mut t, &cfg, &urg_seg(11, 5), 11, &[]);
    assert_eq!(
        (t.copied_seq, t.rcv_queue.len()),
        (2, 9),
        "the old byte left"
    );
    assert_eq!((t.urg.seq, t.urg.data), (15, TCP_URG_NOTYET));
    // Not with SO_OOBINLINE, nor when nothing follows the reader.
    for (inline, queued) in [(true, 10), (false, 0)] {
        let mut t = receiver(&cfg, queued);
        t.urg.data = TCP_URG_VALID | 3;
        t.urg.seq = 1;
        t.urg.inline = inline;
        let seq = 1 + queued as u64;
        rx(&mut t, &cfg, &urg_seg(seq, 5), seq, &[]);
        assert_eq!(t.copied_seq, 1);
    }
}

#[test]
fn recv_urg_errors_as_tcp_recv_urg() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 0);
    assert_eq!(t.recv_urg(false, 1), Err(SocketError::InvalidInput), "none");
    t.urg.data = TCP_URG_VALID | b'x' as u16;
    t.urg.inline = true;
    assert_eq!(
        t.recv_urg(false, 1),
        Err(SocketError::InvalidInput),
        "inline"
    );
    t.urg.inline = false;
    assert_eq!(
        t.recv_urg(true, 1),
        Ok(OobRead::Byte(b'x')),
        "peek keeps it"
    );
    assert_eq!(t.recv_urg(false, 0), Ok(OobRead::Truncated));
    assert_eq!(t.recv_urg(false, 1), Err(SocketError::InvalidInput), "read");
    t.urg.data = TCP_URG_NOTYET;
    assert_eq!(t.recv_urg(false, 1), Err(SocketError::WouldBlock));
    t.rcv_shutdown = true;
    assert_eq!(t.recv_urg(false, 1), Ok(OobRead::End));
    t.state = TcpState::Closed;
    t.rcv_shutdown = false;
    assert_eq!(t.recv_urg(false, 1), Err(SocketError::NotConnected));
}

/// SO_PEEK_OFF: a peek from an offset (peek_seq) stops at the mark before it and
/// skips the byte at it, as a read from there would; the skipped byte is not
/// counted in the bytes returned (tcp_recvmsg_locked's urg_hole).
#[test]
fn peeks_from_an_offset_stop_at_the_mark_and_skip_the_byte() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 10);
    t.urg.data = TCP_URG_VALID | 4;
    t.urg.seq = 5; // the 5th byte, value 4
    let mut peek = [0u8; 100];
    assert_eq!(t.peek(2, &mut peek), Ok(2));
    assert_eq!(&peek[..2], &[2, 3]);
    assert_eq!(t.peek(4, &mut peek), Ok(5));
    assert_eq!(&peek[..5], &[5, 6, 7, 8, 9], "the urgent byte skipped");
    assert_eq!(t.peek(6, &mut peek[..2]), Ok(2));
    assert_eq!(&peek[..2], &[6, 7]);
    assert_eq!(t.peek(10, &mut peek), Err(SocketError::WouldBlock));
    t.urg.inline = true;
    assert_eq!(t.peek(4, &mut peek[..1]), Ok(1));
    assert_eq!(peek[0], 4, "SO_OOBINLINE: read in line");
}

#[test]
fn reads_stop_at_the_mark_and_skip_the_byte_from_it() {
    let cfg = Config::default();
    let mut st = TestStack::default();
    let mut t = receiver(&cfg, 10);
    t.urg.data = TCP_URG_VALID | 4;
    t.urg.seq = 5; // the 5th byte, value 4
    let mut b = [0u8; 100];
    let mut peek = [0u8; 100];
    assert_eq!(t.peek(0, &mut peek), Ok(4));
    let read = |t: &mut Tcb, st: &mut TestStack, b: &mut [u8]| {
        t.recvmsg(&mut st.ctx(&cfg, Instant(1_000_000), true), b)
    };
    assert_eq!(read(&mut t, &mut st, &mut b), Ok(4));
    assert_eq!(&b[..4], &[0, 1, 2, 3]);
    assert!(t.at_mark());
    assert_eq!(t.peek(0, &mut peek[..2]), Ok(2));
    assert_eq!(&peek[..2], &[5, 6], "peek skips it too");
    // A one-byte read at the mark: the skip does not count against it.
    assert_eq!(read(&mut t, &mut st, &mut b[..1]), Ok(1));
    assert_eq!(b[0], 5);
    assert_eq!(t.urg.data, 0, "past the byte, the urgent state ends");
    assert_eq!(read(&mut t, &mut st, &mut b), Ok(4));
    // With SO_OOBINLINE the byte is read in order, the read still stops before it.
    let mut t = receiver(&cfg, 10);
    t.urg.data = TCP_URG_VALID | 4;
    t.urg.seq = 5;
    t.urg.inline = true;
    assert_eq!(read(&mut t, &mut st, &mut b), Ok(4));
    assert_eq!(read(&mut t, &mut st, &mut b), Ok(6));
    assert_eq!(b[0], 4);
}

#[test]
fn read_sock_stops_at_the_mark_for_good() {
    let cfg = Config::default();
    let mut st = TestStack::default();
    let mut t = receiver(&cfg, 10);
    t.urg.data = TCP_URG_VALID | 9;
    t.urg.seq = 10;
    let mut got = Vec::new();
    let mut read = |t: &mut Tcb| {
        t.read_sock(&mut st.ctx(&cfg, Instant(1_000_000), true), 100, |c| {
            got.extend_from_slice(c)
        })
    };
    assert_eq!(read(&mut t), Ok(9));
    assert_eq!(read(&mut t), Ok(0), "stuck at the mark");
    t.urg.inline = true;
    assert_eq!(read(&mut t), Ok(0), "inline or not");
    assert_eq!(t.rcv_queue.len(), 1);
}

#[test]
fn inq_counts_up_to_a_mark_ahead_in_the_queue() {
    let cfg = Config::default();
    let mut t = receiver(&cfg, 10);
    assert_eq!(t.status(&cfg, false).inq, 10);
    t.urg.data = TCP_URG_VALID;
    t.urg.seq = 4;
    let st = t.status(&cfg, false);
    assert_eq!((st.inq, st.at_mark, st.urg_valid), (3, false, true));
    t.urg.inline = true;
    assert_eq!(t.status(&cfg, false).inq, 10);
    t.urg.inline = false;
    t.urg.seq = 11; // not received yet: everything counts
    assert_eq!(t.status(&cfg, false).inq, 10);
    // At the mark, the byte alone is not readable for poll (target + 1).
    let mut t = receiver(&cfg, 1);
    t.urg.data = TCP_URG_VALID;
    t.urg.seq = 1;
    (t.rcvbuf, t.rcv_wnd, t.rcv_wup, t.ack.rcv_mss) = (1 << 20, 65535, 2, 1000);
    let st = t.status(&cfg, false);
    assert!(st.at_mark && !st.readable);
    assert!(t.status(&cfg, true).readable, "memory pressure wakes it");
}

#[test]
fn the_pointer_on_segments_before_snd_up_capped_at_0xffff() {
    let cfg = Config::default();
    let mut t = Tcb::for_test(&cfg);
    t.snd_una = 1;
    t.snd_nxt = 1;
    assert_eq!(t.urgent_field(1), None, "not in urgent mode");
    t.write_seq = 3001;
    t.mark_urg();
    assert_eq!(t.urgent_field(1), Some(3000));
    assert_eq!(t.urgent_field(2001), Some(1000));
    assert_eq!(t.urgent_field(3001), None, "at snd_up");
    t.urg.snd_up = 1 + 0x20000;
    assert_eq!(t.urgent_field(1), Some(0xFFFF), "far ahead, snd_nxt near");
    t.snd_nxt = 0x10001;
    assert_eq!(t.urgent_field(1), None, "more than 0xFFFF below snd_nxt");
    // The ACK of snd_up ends urgent mode; one short of it does not.
    t.urg.snd_up = 3001;
    t.snd_una = 3000;
    t.urg_acked(1);
    assert!(t.urg_mode());
    t.snd_una = 4001;
    t.urg_acked(3000);
    assert!(!t.urg_mode());
    assert_eq!(t.urg.snd_up, 4001);
}
