//! Packet-exchange tests, one module per connection state: forged segments are
//! injected with `Pair::inject` and the replies read off the recorded wire, checked
//! against RFC 9293, RFC 5961, RFC 7323 and what Linux does (packetdrill's tcp/ suite).

use crate::common::*;
use lowtide::{Config, EventKind, Mib, Shutdown, SocketError, SocketHandle, TcpState};
use lowtide_wire::tcp::{SackBlock, TcpFlags as F, TcpRepr};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// Injects `pkt` into A (`to_b` false) or B and returns what that stack sent in reply.
fn poke(p: &mut Pair, to_b: bool, pkt: &[u8]) -> Vec<Seg> {
    let mark = p.wire.len();
    p.inject(to_b, pkt);
    p.sent_since(mark, if to_b { Dir::BtoA } else { Dir::AtoB })
}

fn counter(st: &lowtide::Stack, m: Mib) -> u64 {
    st.counters().get(m)
}

mod syn_sent {
    use super::*;

    /// A in SYN-SENT with B's SYN-ACK lost; returns (pair, A's socket, B's SYN-ACK).
    fn syn_sent() -> (Pair, SocketHandle, Seg) {
        let (mut p, c) = syn_sent_to_b(15 * MS);
        p.filter = None;
        let syn = p.sent_since(0, Dir::AtoB)[0].clone();
        (p, c, syn)
    }

    fn from_b(syn: &Seg, flags: F, seq: u32, ack: u32) -> Vec<u8> {
        let th = TcpRepr {
            seq,
            ack,
            flags,
            window: 65535,
            ..Default::default()
        };
        build(
            std::net::SocketAddr::new(syn.ip.dst, syn.th.dst_port),
            std::net::SocketAddr::new(syn.ip.src, syn.th.src_port),
            &th,
            &[],
            1,
        )
    }

    #[test]
    fn rst_with_acceptable_ack_refuses_the_connection() {
        let (mut p, c, syn) = syn_sent();
        let out = poke(
            &mut p,
            false,
            &from_b(&syn, F::RST | F::ACK, 0, syn.th.seq + 1),
        );
        assert!(out.is_empty(), "no reply to a RST: {out:?}");
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert!(p.events_a.contains(&lowtide::SocketEvent {
            socket: c,
            kind: EventKind::Error(SocketError::ConnectionRefused)
        }));
        assert_eq!(counter(&p.a, Mib::TcpAttemptFails), 1);
    }

    #[test]
    fn rst_with_bad_ack_or_without_ack_is_ignored() {
        let (mut p, c, syn) = syn_sent();
        poke(
            &mut p,
            false,
            &from_b(&syn, F::RST | F::ACK, 0, syn.th.seq + 7),
        );
        poke(&mut p, false, &from_b(&syn, F::RST, 0, 0));
        assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    }

    #[test]
    fn syn_ack_with_bad_ack_gets_reset() {
        let (mut p, c, syn) = syn_sent();
        let bad = syn.th.seq.wrapping_add(1000);
        let out = poke(&mut p, false, &from_b(&syn, F::SYN | F::ACK, 5000, bad));
        assert_eq!(out.len(), 1, "{out:?}");
        // RFC 9293 3.10.7.3: <SEQ=SEG.ACK><CTL=RST>.
        assert!(out[0].has(F::RST) && !out[0].has(F::ACK));
        assert_eq!(out[0].th.seq, bad);
        assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
    }

    #[test]
    fn simultaneous_open_establishes_both_sides() {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let c = p.a.connect(p.now, addr(A, 5000), addr(B, 6000)).unwrap();
        let s = p.b.connect(p.now, addr(B, 6000), addr(A, 5000)).unwrap();
        p.drive_for(5 * MS);
        assert_eq!(p.a.state(c), Ok(TcpState::SynSent));
        p.drive_for(10 * MS);
        // Each got the other's bare SYN: SYN-RECV, answering with SYN-ACK.
        assert_eq!(p.a.state(c), Ok(TcpState::SynRecv));
        assert_eq!(p.b.state(s), Ok(TcpState::SynRecv));
        // tcp_rcv_synsent_state_process: tcp_initialize_rcv_mss from our SYN's
        // window (TCP_MSS_DEFAULT at most); the SYN-ACK is the queued SYN again,
        // sent by the socket (tcp_send_synack): a segment of its own.
        let i = p.a.info(p.now, c).unwrap();
        assert_eq!((i.rcv_mss, i.segs_out), (536, 2));
        p.drive_for(20 * MS);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(p.b.state(s), Ok(TcpState::Established));
        // tcp_ack frees each side's SYN (its SYN-ACK is the same skb) and
        // tcp_newly_delivered counts it.
        for st in [&p.a, &p.b] {
            assert_eq!(st.counters().get(lowtide::Mib::TcpExtTCPDelivered), 1);
        }
        let d = pattern(100_000, 4);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        assert_eq!(send_all(&mut p, false, s, c, &d), d);
    }

    #[test]
    fn close_in_syn_sent_sends_nothing() {
        let (mut p, c, _) = syn_sent();
        let mark = p.wire.len();
        p.a.close(p.now, c).unwrap();
        p.drive_for(Duration::from_secs(5));
        // No SYN retransmission, no FIN (B's SYN-ACK retransmissions get resets).
        let out = p.sent_since(mark, Dir::AtoB);
        assert!(out.iter().all(|s| s.th.flags == F::RST), "{out:?}");
        assert_eq!(p.a.connection_count(), 0);
    }
}

mod syn_recv {
    use super::*;

    /// A listener's child that inherited SEND_SHUTDOWN sends its FIN when the
    /// final ACK establishes it, after `tcp_ack` took that ACK
    /// (`tcp_rcv_state_process`, SYN-RECV: `tcp_shutdown`): the ACK is no duplicate
    /// ACK of the FIN, so without SACK no Reno reordering is seen (Linux 6.18,
    /// tests/packetdrill/shutdown-unconnected-listener-child-fin.pkt).
    #[test]
    fn a_child_shut_for_writing_sends_its_fin_after_the_final_ack() {
        let cfg = Config {
            tcp_sack: false,
            ..Config::default()
        };
        let mut p = Pair::new(cfg);
        let l = p.b.listen(addr(B, 80), 4).unwrap();
        let opts = lowtide::tcp::sockopt::SockOptions {
            shutdown: 2, // SEND_SHUTDOWN
            ..Default::default()
        };
        p.b.socket(l).set_listener_options(&opts).unwrap();
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(60 * MS);
        let s = p.b.accept(l).unwrap();
        assert_eq!(
            p.b.state(s),
            Ok(TcpState::FinWait2),
            "the FIN went and was acked"
        );
        assert_eq!(p.a.state(c), Ok(TcpState::CloseWait));
        assert_eq!(counter(&p.b, Mib::TcpExtTCPRenoReorder), 0);
        assert_eq!(p.b.info(p.now, s).unwrap().reordering, 3);
    }

    /// B's child in SYN-RECV: A's handshake ACK was lost.
    fn syn_recv() -> (Pair, SocketHandle, SocketHandle) {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let l = p.b.listen(addr(B, 80), 4).unwrap();
        let mut n = 0;
        p.filter = Some(Box::new(move |d, _| {
            if d == Dir::AtoB {
                n += 1;
                if n == 2 {
                    return Verdict::Drop;
                }
            }
            Verdict::Pass
        }));
        let c = p.a.connect(p.now, addr(A, 0), addr(B, 80)).unwrap();
        p.drive_for(25 * MS);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(p.b.accept(l), Err(SocketError::WouldBlock));
        (p, c, l)
    }

    #[test]
    fn bad_ack_gets_reset_and_child_survives() {
        let (mut p, _c, l) = syn_recv();
        let peer = learn(&p, Dir::BtoA);
        let bad = peer.ack.wrapping_add(500);
        let out = poke(&mut p, true, &peer.seg(F::ACK, peer.seq, bad, &[]));
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].has(F::RST));
        assert_eq!(out[0].th.seq, bad);
        assert_eq!(p.b.accept(l), Err(SocketError::WouldBlock));
    }

    #[test]
    fn data_from_client_completes_the_handshake() {
        let (mut p, c, l) = syn_recv();
        p.filter = None;
        p.a.send(p.now, c, b"first data").unwrap();
        p.drive_for(20 * MS);
        let s = p.b.accept(l).unwrap();
        assert_eq!(p.b.state(s), Ok(TcpState::Established));
        assert_eq!(drain(&mut p.b, p.now, s), b"first data");
    }

    #[test]
    fn syn_retransmission_is_answered_with_syn_ack() {
        let (mut p, _c, _l) = syn_recv();
        let syn = p.sent_since(0, Dir::AtoB)[0].clone();
        let pkt = p.wire[0].2.clone();
        assert!(syn.has(F::SYN));
        // Replayed unchanged (same ISN): the client retransmitting its SYN.
        let out = poke(&mut p, true, &pkt);
        assert!(out.iter().all(|s| !s.has(F::RST)), "{out:?}");
    }
}

mod established {
    use super::*;

    #[test]
    fn syn_in_window_gets_challenge_ack() {
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        let out = poke(&mut p, false, &peer.now(F::SYN, &[]));
        assert_eq!(out.len(), 1);
        assert!(out[0].is_pure_ack());
        assert_eq!(out[0].th.ack, peer.seq);
        assert_eq!(counter(&p.a, Mib::TcpExtTCPSYNChallenge), 1);
        assert_eq!(counter(&p.a, Mib::TcpExtTCPChallengeACK), 1);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
    }

    #[test]
    fn out_of_window_data_gets_duplicate_ack() {
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        for delta in [10_000_000u32, 0u32.wrapping_sub(100_000)] {
            let pkt = peer.seg(F::ACK, peer.seq.wrapping_add(delta), peer.ack, b"junk");
            let out = poke(&mut p, false, &pkt);
            assert_eq!(out.len(), 1, "{out:?}");
            assert!(out[0].is_pure_ack());
            assert_eq!(out[0].th.ack, peer.seq);
        }
        assert_eq!(p.a.recv_queue_len(c), Ok(0));
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
    }

    #[test]
    fn segment_starting_before_the_isn_is_out_of_window() {
        let (mut p, _c, s) = establish(Config::default());
        // B's view of A: A's ISN is peer.seq - 1; start 10 bytes before it.
        let peer = learn(&p, Dir::BtoA);
        let pkt = peer.seg(F::ACK, peer.seq.wrapping_sub(10), peer.ack, &[7; 100]);
        let out = poke(&mut p, true, &pkt);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].th.ack, peer.seq);
        assert_eq!(p.b.recv_queue_len(s), Ok(0));
    }

    #[test]
    fn ack_of_unsent_data_is_dropped_with_a_challenge_ack() {
        // Linux 6.x tcp_ack: SKB_DROP_REASON_TCP_ACK_UNSENT_DATA, answered with a
        // rate-limited challenge ACK in ESTABLISHED too (checked against this
        // machine's kernel: tests/packetdrill/ack-of-unsent-data-challenge.pkt).
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        let pkt = peer.seg(F::ACK, peer.seq, peer.ack.wrapping_add(5000), b"data");
        let out = poke(&mut p, false, &pkt);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].th.ack, peer.seq, "the ACK says what we really have");
        assert_eq!(counter(&p.a, Mib::TcpExtTCPChallengeACK), 1);
        assert_eq!(p.a.recv_queue_len(c), Ok(0), "data must not be accepted");
    }

    #[test]
    fn old_ack_is_accepted_silently_with_its_data() {
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        let old = peer.ack.wrapping_sub(3); // inside what A already had ACKed
        let before = counter(&p.a, Mib::TcpExtTCPChallengeACK);
        poke(
            &mut p,
            false,
            &peer.seg(F::ACK | F::PSH, peer.seq, old, b"more"),
        );
        assert_eq!(counter(&p.a, Mib::TcpExtTCPChallengeACK), before);
        assert_eq!(drain(&mut p.a, p.now, c), b"more");
    }

    #[test]
    fn ack_older_than_the_window_gets_challenge_ack() {
        let (mut p, c, s) = warm();
        // B's window stays at 100 KB (autotuning would grow it past 290 KB).
        p.b.socket(s).set_rcvbuf(100_000).unwrap();
        let d = pattern(300_000, 1);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        p.drive_for(Duration::from_millis(300));
        let peer = learn(&p, Dir::AtoB);
        let too_old = peer.ack.wrapping_sub(290_000);
        let before = counter(&p.a, Mib::TcpExtTCPChallengeACK);
        let out = poke(&mut p, false, &peer.seg(F::ACK, peer.seq, too_old, b"x"));
        assert_eq!(counter(&p.a, Mib::TcpExtTCPChallengeACK), before + 1);
        assert_eq!(out.len(), 1);
        assert_eq!(p.a.recv_queue_len(c), Ok(0));
    }

    #[test]
    fn segment_without_ack_flag_is_dropped() {
        // packetdrill validate/validate-established-no-flags.pkt
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        poke(&mut p, false, &peer.now(F(0), &[1; 100]));
        assert_eq!(p.a.recv_queue_len(c), Ok(0));
        poke(&mut p, false, &peer.now(F::ACK, &[1; 100]));
        assert_eq!(p.a.recv_queue_len(c), Ok(100));
    }

    #[test]
    fn paws_drops_old_timestamp_with_duplicate_ack() {
        let (mut p, c, _s) = warm();
        let mut peer = learn(&p, Dir::AtoB);
        peer.ts_val = peer.ts_val.wrapping_sub(1000);
        let out = poke(&mut p, false, &peer.now(F::ACK, b"stale"));
        assert_eq!(counter(&p.a, Mib::TcpExtPAWSEstab), 1);
        assert_eq!(out.len(), 1);
        assert!(out[0].is_pure_ack());
        assert_eq!(p.a.recv_queue_len(c), Ok(0));
        // The same segment with a current timestamp is taken.
        peer.ts_val = peer.ts_val.wrapping_add(2000);
        poke(&mut p, false, &peer.now(F::ACK, b"fresh"));
        assert_eq!(drain(&mut p.a, p.now, c), b"fresh");
    }

    #[test]
    fn invalid_ack_does_not_update_ts_recent() {
        // packetdrill ts_recent/invalid_ack.pkt: a FIN acking unsent data with a huge
        // TSval is dropped and must not move ts_recent, or the next valid segment
        // would fail PAWS.
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        let mut bad = peer;
        bad.ts_val = peer.ts_val.wrapping_add(200_000);
        poke(
            &mut p,
            false,
            &bad.seg(F::FIN | F::ACK, peer.seq, peer.ack.wrapping_add(9999), &[]),
        );
        let out = poke(&mut p, false, &peer.now(F::ACK, &[5; 1000]));
        assert_eq!(counter(&p.a, Mib::TcpExtPAWSEstab), 0);
        assert_eq!(p.a.recv_queue_len(c), Ok(1000));
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].th.ack, peer.seq.wrapping_add(1000));
        assert_eq!(out[0].th.options.timestamp.unwrap().1, peer.ts_val);
    }

    /// Sends 20 KB A to B, then hands B a copy of A's first data segment: as a
    /// spurious retransmission (fresh timestamp) or a network duplicate (original
    /// timestamp, which PAWS rejects). Returns B's reply and the segment.
    fn duplicate(fresh_ts: bool) -> (Pair, SocketHandle, Vec<Seg>, Seg) {
        let (mut p, c, s) = warm();
        let mark = p.wire.len();
        let d = pattern(20_000, 5);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        p.drive_for(Duration::from_millis(300));
        let (_, _, dup) = p.wire[mark..]
            .iter()
            .find(|(_, dir, pk)| *dir == Dir::AtoB && !Seg::parse(pk).payload.is_empty())
            .cloned()
            .unwrap();
        let seg = Seg::parse(&dup);
        let pkt = if fresh_ts {
            let peer = learn(&p, Dir::BtoA);
            peer.seg(F::ACK, seg.th.seq, peer.ack, &seg.payload)
        } else {
            dup
        };
        let out = poke(&mut p, true, &pkt);
        (p, s, out, seg)
    }

    fn assert_dsack_of(out: &[Seg], seg: &Seg) {
        assert_eq!(out.len(), 1, "{out:?}");
        let o = &out[0].th.options;
        assert!(o.sack_len >= 1, "no D-SACK block");
        // RFC 2883 section 4: the first block reports the duplicate.
        let end = seg.th.seq.wrapping_add(seg.payload.len() as u32);
        assert_eq!(
            o.sack[0],
            SackBlock {
                start: seg.th.seq,
                end
            }
        );
    }

    #[test]
    fn spurious_retransmission_is_dsacked_and_sender_counts_it() {
        let (mut p, s, out, seg) = duplicate(true);
        assert_eq!(counter(&p.b, Mib::TcpExtTCPDSACKOldSent), 1);
        assert_dsack_of(&out, &seg);
        p.drive_for(50 * MS);
        assert_eq!(counter(&p.a, Mib::TcpExtTCPDSACKRecv), 1);
        assert_eq!(
            drain(&mut p.b, p.now, s),
            b"",
            "the duplicate was delivered"
        );
    }

    #[test]
    fn network_duplicate_rejected_by_paws_is_still_dsacked() {
        // Linux's tcp_send_dupack D-SACKs old data whatever the reason for the drop.
        let (p, _s, out, seg) = duplicate(false);
        assert_eq!(counter(&p.b, Mib::TcpExtPAWSEstab), 1);
        assert_dsack_of(&out, &seg);
    }

    #[test]
    fn sack_blocks_are_reported_most_recent_first() {
        let (mut p, _c, s) = warm();
        let peer = learn(&p, Dir::BtoA);
        let base = peer.seq;
        let send = |p: &mut Pair, off: u32, len: usize| {
            let pkt = peer.seg(F::ACK, base.wrapping_add(off), peer.ack, &vec![9; len]);
            // The first three ACKs for one rcv_nxt go at once, later ones when SACK
            // compression's timer fires (rcv/comp_sack.rs): within 1 ms.
            let mark = p.wire.len();
            p.inject(true, &pkt);
            p.drive_for(2 * MS);
            let out = p.sent_since(mark, Dir::BtoA);
            assert_eq!(out.len(), 1, "out-of-order data is ACKed: {out:?}");
            assert_eq!(out[0].th.ack, base);
            out[0]
                .th
                .options
                .sack_blocks()
                .iter()
                .map(|b| (b.start.wrapping_sub(base), b.end.wrapping_sub(base)))
                .collect::<Vec<_>>()
        };
        assert_eq!(send(&mut p, 1000, 100), vec![(1000, 1100)]);
        assert_eq!(send(&mut p, 3000, 100), vec![(3000, 3100), (1000, 1100)]);
        assert_eq!(
            send(&mut p, 5000, 100),
            vec![(5000, 5100), (3000, 3100), (1000, 1100)]
        );
        // Timestamps leave room for three blocks: the oldest drops out.
        assert_eq!(
            send(&mut p, 7000, 100),
            vec![(7000, 7100), (5000, 5100), (3000, 3100)]
        );
        // Extending an old block moves it to the front.
        assert_eq!(
            send(&mut p, 1100, 100),
            vec![(1000, 1200), (7000, 7100), (5000, 5100)]
        );
        assert_eq!(p.b.recv_queue_len(s), Ok(0));
    }

    #[test]
    fn rst_in_window_but_not_exact_is_challenged_and_exact_rst_resets() {
        let (mut p, c, _s) = warm();
        let peer = learn(&p, Dir::AtoB);
        let out = poke(
            &mut p,
            false,
            &peer.seg(F::RST, peer.seq.wrapping_add(1), 0, &[]),
        );
        assert_eq!(out.len(), 1);
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        poke(&mut p, false, &peer.seg(F::RST, peer.seq, 0, &[]));
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
        assert_eq!(counter(&p.a, Mib::TcpEstabResets), 1);
    }
}

mod windows {
    use super::*;

    #[test]
    fn busy_and_rwnd_limited_time_are_clocked() {
        // Linux tcp_chrono_*: busy from the first queued byte until nothing is left
        // to send or ACK; rwnd-limited while tcp_write_xmit's window test stops it.
        let (mut p, c, s) = warm();
        let t0 = p.now;
        // warm()'s "hello" was busy for one 20 ms round trip, then the clock stopped.
        let i0 = p.a.info(p.now, c).unwrap();
        assert_eq!((i0.busy_time, i0.rwnd_limited), (20_000, 0));
        let d = pattern(1_000_000, 9);
        let mut sent = 0;
        while p.now < t0 + Duration::from_secs(2) {
            sent += p.a.send(p.now, c, &d[sent..]).unwrap_or(0);
            if !p.step() {
                break;
            }
        }
        let i = p.a.info(p.now, c).unwrap();
        let elapsed = p.now.saturating_since(t0).as_micros() as u64;
        assert!(i.rwnd_limited > 1_000_000, "{i:?}");
        assert!(
            i.busy_time >= i.rwnd_limited && i.busy_time - i0.busy_time <= elapsed,
            "{elapsed} {i:?}"
        );
        // The reader drains everything: once all is ACKed the clocks stop.
        let mut got = 0;
        let end = p.now + Duration::from_secs(30);
        while got < d.len() && p.now < end {
            sent += p.a.send(p.now, c, &d[sent..]).unwrap_or(0);
            got += drain(&mut p.b, p.now, s).len();
            p.step();
        }
        assert_eq!(got, d.len());
        p.drive_for(Duration::from_millis(500));
        let idle1 = p.a.info(p.now, c).unwrap();
        p.drive_for(Duration::from_secs(1));
        let idle2 = p.a.info(p.now, c).unwrap();
        assert_eq!(
            (idle1.busy_time, idle1.rwnd_limited),
            (idle2.busy_time, idle2.rwnd_limited)
        );
        assert!(idle2.busy_time > i.busy_time);
    }

    #[test]
    fn zero_window_is_probed_until_the_reader_reads() {
        let (mut p, c, s) = warm();
        let d = pattern(2_000_000, 6);
        let mut sent = 0;
        // B never reads: the window closes, A must probe.
        let end = p.now + Duration::from_secs(20);
        while p.now < end {
            if let Ok(n) = p.a.send(p.now, c, &d[sent..]) {
                sent += n;
            }
            if !p.step() {
                break;
            }
        }
        assert!(sent < d.len(), "the receiver's buffer should have filled");
        assert!(counter(&p.b, Mib::TcpExtTCPToZeroWindowAdv) >= 1);
        let probes = counter(&p.a, Mib::TcpExtTCPWinProbe);
        assert!(probes >= 3, "only {probes} window probes in 20 s");
        assert_eq!(p.a.state(c), Ok(TcpState::Established));
        // Now the reader wakes up: everything arrives, in order.
        let mut got = Vec::new();
        let end = p.now + Duration::from_secs(60);
        while got.len() < d.len() && p.now < end {
            if let Ok(n) = p.a.send(p.now, c, &d[sent..]) {
                sent += n;
            }
            got.extend(drain(&mut p.b, p.now, s));
            p.step();
        }
        assert_eq!(got.len(), d.len());
        assert!(got == d, "data corrupted across the zero window");
    }

    #[test]
    fn tiny_receive_buffer_is_never_overrun() {
        let mut cb = Config::default();
        cb.set("net.ipv4.tcp_rmem", "4096 4096 4096").unwrap();
        cb.set("net.core.rmem_max", "4194304").unwrap();
        let (mut p, c, s) = establish_with(Pair::with_configs(Config::default(), cb), A, B);
        let d = pattern(300_000, 7);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        // Every data segment from A lies within the window B last advertised. B's
        // window scale is 7 even with a 4 KB buffer: tcp_select_initial_window
        // scales for max(tcp_rmem[2], net.core.rmem_max = 4 MB, this machine's).
        let mut right_edge: Option<u32> = None;
        let mut max_win = 0;
        let mut wscale = 0;
        for (_, dir, pk) in &p.wire {
            let seg = Seg::parse(pk);
            match dir {
                Dir::BtoA if seg.th.flags.contains(F::SYN) => {
                    wscale = seg.th.options.wscale.unwrap_or(0);
                    assert_eq!(wscale, 7);
                    // A SYN's window is never scaled (RFC 7323 section 2.2).
                    right_edge = Some(seg.th.ack.wrapping_add(seg.th.window as u32));
                }
                Dir::BtoA => {
                    let win = (seg.th.window as u32) << wscale;
                    right_edge = Some(seg.th.ack.wrapping_add(win));
                    max_win = max_win.max(win);
                }
                Dir::AtoB if !seg.payload.is_empty() && seg.th.seq != 0 => {
                    let end = seg.th.seq.wrapping_add(seg.payload.len() as u32);
                    let edge = right_edge.unwrap();
                    assert!(
                        (edge.wrapping_sub(end) as i32) >= 0,
                        "segment ends {} beyond the window",
                        end.wrapping_sub(edge)
                    );
                }
                _ => {}
            }
        }
        assert!(max_win <= 4096, "advertised {max_win} with a 4 KB buffer");
    }
}

mod acks {
    use super::*;

    /// (arrival time at B of each A data segment, time of B's next ACK covering it).
    fn ack_delays(p: &Pair, mark: usize) -> Vec<Duration> {
        let mut out = Vec::new();
        for (i, (t, dir, pk)) in p.wire[mark..].iter().enumerate() {
            let seg = Seg::parse(pk);
            if *dir != Dir::AtoB || seg.payload.is_empty() {
                continue;
            }
            let end = seg.th.seq.wrapping_add(seg.payload.len() as u32);
            let arrival = *t + p.delay;
            let ack = p.wire[mark + i..].iter().find(|(_, d, pk)| {
                let a = Seg::parse(pk);
                *d == Dir::BtoA && (a.th.ack.wrapping_sub(end) as i32) >= 0
            });
            out.push(ack.unwrap().0.saturating_since(arrival));
        }
        out
    }

    #[test]
    fn quick_acks_at_start_then_delayed_ack_for_a_lone_small_segment() {
        let (mut p, c, s) = establish(Config::default());
        let mark = p.wire.len();
        for i in 0..24u8 {
            p.a.send(p.now, c, &[i; 100]).unwrap();
            p.drive_for(Duration::from_millis(100));
            drain(&mut p.b, p.now, s);
        }
        let delays = ack_delays(&p, mark);
        assert_eq!(delays.len(), 24);
        assert_eq!(delays[0], Duration::ZERO, "quick-ack at start: {delays:?}");
        // TCP_ATO_MIN (40 ms), run by the timer wheel on the tick after its
        // expiry.
        assert_eq!(
            *delays.last().unwrap(),
            Duration::from_millis(41),
            "{delays:?}"
        );
        assert!(counter(&p.b, Mib::TcpExtDelayedACKs) >= 1);
    }

    #[test]
    fn two_full_segments_are_acked_at_once() {
        let (mut p, c, s) = establish(Config::default());
        // Leave quick-ack mode first.
        for i in 0..24u8 {
            p.a.send(p.now, c, &[i; 100]).unwrap();
            p.drive_for(Duration::from_millis(100));
            drain(&mut p.b, p.now, s);
        }
        let mark = p.wire.len();
        p.a.send(p.now, c, &pattern(2 * 1448, 1)).unwrap();
        p.drive_for(Duration::from_millis(100));
        let delays = ack_delays(&p, mark);
        assert_eq!(delays.len(), 2);
        assert_eq!(delays[1], Duration::ZERO, "{delays:?}");
    }

    #[test]
    fn nagle_coalesces_small_writes_unless_nodelay() {
        for nodelay in [false, true] {
            let (mut p, c, s) = establish(Config::default());
            p.a.socket(c).set_nodelay(nodelay).unwrap();
            let mark = p.wire.len();
            for i in 0..10u8 {
                p.a.send(p.now, c, &[i; 10]).unwrap();
                // The device completes each packet before the next write, so TCP
                // Small Queues never holds one back.
                p.flush();
            }
            p.drive_for(Duration::from_millis(200));
            assert_eq!(drain(&mut p.b, p.now, s).len(), 100);
            let data: Vec<usize> = p
                .sent_since(mark, Dir::AtoB)
                .iter()
                .map(|s| s.payload.len())
                .filter(|&n| n > 0)
                .collect();
            if nodelay {
                assert_eq!(data, vec![10; 10]);
            } else {
                // The first goes at once; the rest wait for its ACK and go as one.
                assert_eq!(data, vec![10, 90]);
            }
        }
    }
}

mod fin_wait_1 {
    use super::*;

    /// A shut down writing; B's ACK of the FIN is lost.
    fn fin_wait_1() -> (Pair, SocketHandle, SocketHandle) {
        let (mut p, c, s) = warm();
        p.filter = Some(Box::new(|d, _| match d {
            Dir::BtoA => Verdict::Drop,
            Dir::AtoB => Verdict::Pass,
        }));
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(15 * MS);
        p.filter = None;
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait1));
        (p, c, s)
    }

    #[test]
    fn a_fin_waits_for_cwnd_like_data() {
        // Linux 6.10+ tcp_cwnd_test has no exception for the final FIN ("tcp:
        // remove dubious FIN exception from tcp_cwnd_test()"): with cwnd full the
        // FIN waits until an ACK makes room (Linux 6.18 fails upstream's
        // shutdown/shutdown-rdwr-write-queue-close.pkt so).
        let (mut p, c, _s) = establish(Config::default());
        let info = p.a.info(p.now, c).unwrap();
        let window = (info.snd_cwnd * info.snd_mss) as usize;
        let mark = p.wire.len();
        assert_eq!(p.a.send(p.now, c, &pattern(window, 3)), Ok(window));
        p.drive_for(MS);
        assert_eq!(p.a.info(p.now, c).unwrap().unacked, info.snd_cwnd);
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(MS);
        let sent = p.sent_since(mark, Dir::AtoB);
        assert!(sent.iter().all(|s| !s.has(F::FIN)), "held by a full cwnd");
        // The first ACKs arrive one round trip (20 ms) after the data.
        p.drive_for(30 * MS);
        let sent = p.sent_since(mark, Dir::AtoB);
        let fin = sent
            .iter()
            .find(|s| s.has(F::FIN))
            .expect("FIN sent once an ACK opened cwnd");
        assert!(fin.payload.is_empty());
        let first = sent.iter().find(|s| !s.payload.is_empty()).unwrap();
        assert_eq!(fin.th.seq, first.th.seq.wrapping_add(window as u32));
    }

    #[test]
    fn data_is_still_received() {
        let (mut p, c, _s) = fin_wait_1();
        let peer = learn(&p, Dir::AtoB);
        // Data that does not yet ACK our FIN.
        poke(
            &mut p,
            false,
            &peer.seg(F::ACK, peer.seq, peer.ack.wrapping_sub(1), b"late"),
        );
        assert_eq!(drain(&mut p.a, p.now, c), b"late");
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait1));
    }

    #[test]
    fn fin_without_ack_of_ours_moves_to_closing_then_time_wait() {
        let (mut p, c, _s) = fin_wait_1();
        let peer = learn(&p, Dir::AtoB);
        let una = peer.ack.wrapping_sub(1);
        let out = poke(
            &mut p,
            false,
            &peer.seg(F::FIN | F::ACK, peer.seq, una, &[]),
        );
        assert_eq!(p.a.state(c), Ok(TcpState::Closing));
        assert_eq!(out.last().unwrap().th.ack, peer.seq.wrapping_add(1));
        let mut peer2 = peer;
        peer2.seq = peer.seq.wrapping_add(1);
        poke(&mut p, false, &peer2.now(F::ACK, &[]));
        assert!(in_time_wait(&p.a, c));
    }

    #[test]
    fn ack_of_fin_moves_to_fin_wait_2() {
        let (mut p, c, _s) = fin_wait_1();
        let peer = learn(&p, Dir::AtoB);
        poke(&mut p, false, &peer.now(F::ACK, &[]));
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait2));
    }
}

mod fin_wait_2 {
    use super::*;

    fn fin_wait_2() -> (Pair, SocketHandle, SocketHandle) {
        let (mut p, c, s) = warm();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        // B delays its ACK of the FIN (tcp_fin: pingpong mode, ato 40 ms after the
        // data exchange of warm()), as Linux does: its timer runs on the tick after
        // 40 ms, and the ACK takes 10 ms.
        p.drive_for(70 * MS);
        assert_eq!(p.a.state(c), Ok(TcpState::FinWait2));
        assert_eq!(p.b.state(s), Ok(TcpState::CloseWait));
        (p, c, s)
    }

    #[test]
    fn ack_of_unsent_data_gets_challenge_ack_outside_established() {
        // Linux tcp_rcv_state_process: tcp_ack() < 0 -> tcp_send_challenge_ack.
        let (mut p, c, _s) = fin_wait_2();
        let peer = learn(&p, Dir::AtoB);
        let pkt = peer.seg(F::ACK, peer.seq, peer.ack.wrapping_add(5000), b"data");
        let out = poke(&mut p, false, &pkt);
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].is_pure_ack());
        assert_eq!(out[0].th.ack, peer.seq, "data must not be accepted");
        assert_eq!(counter(&p.a, Mib::TcpExtTCPChallengeACK), 1);
        assert_eq!(p.a.recv_queue_len(c), Ok(0));
    }

    #[test]
    fn half_closed_connection_still_receives() {
        let (mut p, c, s) = fin_wait_2();
        let d = pattern(200_000, 8);
        assert_eq!(send_all(&mut p, false, s, c, &d), d);
        p.b.close(p.now, s).unwrap();
        p.drive_for(30 * MS);
        assert!(in_time_wait(&p.a, c));
        assert_eq!(p.a.recv(p.now, c, &mut [0; 4]), Ok(0));
    }

    #[test]
    fn orphan_receiving_new_data_resets() {
        let (mut p, c, s) = fin_wait_2();
        p.a.close(p.now, c).unwrap();
        let mark = p.wire.len();
        p.b.send(p.now, s, b"nobody reads this").unwrap();
        p.drive_for(30 * MS);
        // The orphan is a FIN-WAIT-2 timewait socket (tcp_time_wait in tcp_close):
        // new data is its TCP_TW_RST, without TcpExtTCPAbortOnData. The reset is
        // tcp_v4_send_reset's: seq = the segment's ACK, RST without ACK.
        assert_eq!(counter(&p.a, Mib::TcpExtTCPAbortOnData), 0);
        let data = p.sent_since(mark, Dir::BtoA);
        let data = data.iter().find(|s| !s.payload.is_empty()).unwrap();
        let rsts: Vec<Seg> = p
            .sent_since(mark, Dir::AtoB)
            .into_iter()
            .filter(|s| s.has(F::RST))
            .collect();
        assert_eq!(rsts.len(), 1, "{rsts:?}");
        assert!(!rsts[0].has(F::ACK), "{rsts:?}");
        assert_eq!(rsts[0].th.seq, data.th.ack);
        assert_eq!(p.a.connection_count(), 0);
    }

    #[test]
    fn orphan_times_out_after_tcp_fin_timeout() {
        let cfg = Config {
            tcp_fin_timeout: 5,
            ..Config::default()
        };
        let (mut p, c, _s) = establish(cfg);
        p.a.close(p.now, c).unwrap();
        p.drive_for(Duration::from_secs(4));
        assert_eq!(p.a.connection_count(), 1);
        p.drive_for(Duration::from_secs(2));
        assert_eq!(p.a.connection_count(), 0);
    }
}

mod close_wait {
    use super::*;

    #[test]
    fn data_after_the_fin_is_not_delivered() {
        let (mut p, _c, s) = warm();
        let peer = learn(&p, Dir::BtoA);
        poke(&mut p, true, &peer.now(F::FIN | F::ACK, &[]));
        assert_eq!(p.b.state(s), Ok(TcpState::CloseWait));
        let mut after = peer;
        after.seq = peer.seq.wrapping_add(1);
        poke(&mut p, true, &after.now(F::ACK | F::PSH, b"after fin"));
        // RFC 9293 3.10.7.4 step 7: in CLOSE-WAIT "ignore the segment text".
        assert_eq!(p.b.recv(p.now, s, &mut [0; 64]), Ok(0));
    }

    #[test]
    fn may_still_send_then_last_ack_then_closed() {
        let (mut p, c, s) = warm();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(30 * MS);
        let d = pattern(50_000, 3);
        assert_eq!(send_all(&mut p, false, s, c, &d), d);
        p.b.shutdown(p.now, s, Shutdown::Write).unwrap();
        assert_eq!(p.b.state(s), Ok(TcpState::LastAck));
        p.drive_for(30 * MS);
        assert_eq!(p.b.state(s), Ok(TcpState::Closed));
        assert!(in_time_wait(&p.a, c));
    }
}

mod closing {
    use super::*;

    #[test]
    fn retransmitted_fin_is_acked_again() {
        let (mut p, c, s) = warm();
        // Both FINs cross; A's ACK of B's FIN is lost, so B stays in CLOSING.
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.b.shutdown(p.now, s, Shutdown::Write).unwrap();
        p.drive_for(15 * MS);
        assert_eq!(p.a.state(c), Ok(TcpState::Closing));
        let peer = learn(&p, Dir::AtoB);
        // A retransmitted FIN from B (seq one below what A now expects).
        let mut fin = peer;
        fin.seq = peer.seq.wrapping_sub(1);
        let out = poke(
            &mut p,
            false,
            &fin.seg(F::FIN | F::ACK, fin.seq, peer.ack.wrapping_sub(1), &[]),
        );
        assert!(out.iter().any(|s| s.th.ack == peer.seq), "{out:?}");
    }
}

mod last_ack {
    use super::*;

    fn last_ack() -> (Pair, SocketHandle, SocketHandle) {
        let (mut p, c, s) = warm();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(30 * MS);
        p.filter = Some(Box::new(|d, _| match d {
            Dir::AtoB => Verdict::Drop,
            Dir::BtoA => Verdict::Pass,
        }));
        p.b.shutdown(p.now, s, Shutdown::Write).unwrap();
        p.drive_for(15 * MS);
        p.filter = None;
        assert_eq!(p.b.state(s), Ok(TcpState::LastAck));
        (p, c, s)
    }

    #[test]
    fn ack_of_fin_closes() {
        let (mut p, _c, s) = last_ack();
        let peer = learn(&p, Dir::BtoA);
        poke(&mut p, true, &peer.now(F::ACK, &[]));
        assert_eq!(p.b.state(s), Ok(TcpState::Closed));
    }

    #[test]
    fn exact_rst_closes() {
        let (mut p, _c, s) = last_ack();
        let peer = learn(&p, Dir::BtoA);
        poke(&mut p, true, &peer.now(F::RST, &[]));
        assert_eq!(p.b.state(s), Ok(TcpState::Closed));
    }

    #[test]
    fn fin_is_retransmitted_when_unacked() {
        let (mut p, _c, s) = last_ack();
        p.filter = Some(Box::new(|d, _| match d {
            Dir::AtoB => Verdict::Drop,
            Dir::BtoA => Verdict::Pass,
        }));
        let mark = p.wire.len();
        p.drive_for(Duration::from_secs(2));
        let fins = p
            .sent_since(mark, Dir::BtoA)
            .iter()
            .filter(|s| s.has(F::FIN))
            .count();
        assert!(fins >= 1);
        assert_eq!(p.b.state(s), Ok(TcpState::LastAck));
    }
}

mod time_wait {
    use super::*;

    fn time_wait() -> (Pair, SocketHandle, SocketHandle) {
        let (mut p, c, s) = warm();
        p.a.shutdown(p.now, c, Shutdown::Write).unwrap();
        p.drive_for(30 * MS);
        p.b.close(p.now, s).unwrap();
        p.drive_for(30 * MS);
        assert!(in_time_wait(&p.a, c));
        (p, c, s)
    }

    #[test]
    fn retransmitted_fin_is_acked_again() {
        let (mut p, c, _s) = time_wait();
        let peer = learn(&p, Dir::AtoB);
        let fin_seq = peer.seq.wrapping_sub(1);
        let out = poke(
            &mut p,
            false,
            &peer.seg(F::FIN | F::ACK, fin_seq, peer.ack, &[]),
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].is_pure_ack());
        assert_eq!(out[0].th.ack, peer.seq);
        assert!(in_time_wait(&p.a, c));
    }

    #[test]
    fn new_data_is_not_delivered() {
        let (mut p, c, _s) = time_wait();
        let peer = learn(&p, Dir::AtoB);
        let out = poke(&mut p, false, &peer.now(F::ACK | F::PSH, b"ghost"));
        // Linux (tcp_timewait_state_process) answers with an ACK of the FIN.
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0].is_pure_ack());
        assert_eq!(out[0].th.ack, peer.seq);
        assert_eq!(p.a.recv(p.now, c, &mut [0; 16]), Ok(0));
    }

    #[test]
    fn lasts_two_msl_then_closes() {
        let (mut p, c, _s) = time_wait();
        p.drive_for(Duration::from_secs(59));
        assert!(in_time_wait(&p.a, c));
        // 60 s on the timer wheel's level 4 (4.096 s buckets): gone by 64.096 s.
        p.drive_for(Duration::from_millis(5_100));
        assert!(!in_time_wait(&p.a, c));
        assert_eq!(p.a.state(c), Ok(TcpState::Closed));
    }
}

mod closed_and_listen {
    use super::*;

    #[test]
    fn ack_to_listener_gets_reset_from_its_ack() {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let _l = p.b.listen(addr(B, 80), 4).unwrap();
        let th = TcpRepr {
            seq: 100,
            ack: 5555,
            flags: F::ACK,
            window: 1000,
            ..Default::default()
        };
        let out = poke(
            &mut p,
            true,
            &build(addr(A, 4000), addr(B, 80), &th, &[], 1),
        );
        assert_eq!(out.len(), 1);
        assert!(out[0].has(F::RST) && !out[0].has(F::ACK));
        assert_eq!(out[0].th.seq, 5555);
    }

    #[test]
    fn rst_to_listener_or_closed_port_is_ignored() {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let _l = p.b.listen(addr(B, 80), 4).unwrap();
        for port in [80, 81] {
            let th = TcpRepr {
                seq: 1,
                flags: F::RST,
                ..Default::default()
            };
            let out = poke(
                &mut p,
                true,
                &build(addr(A, 4000), addr(B, port), &th, &[], 1),
            );
            assert!(out.is_empty());
        }
    }

    #[test]
    fn data_to_closed_port_gets_rst_ack_covering_it() {
        let mut p = Pair::new(Config::default());
        p.record = true;
        let th = TcpRepr {
            seq: 1000,
            flags: F::PSH | F::FIN,
            ..Default::default()
        };
        let out = poke(
            &mut p,
            true,
            &build(addr(A, 4000), addr(B, 81), &th, b"12345", 1),
        );
        assert_eq!(out.len(), 1);
        assert!(out[0].has(F::RST) && out[0].has(F::ACK));
        assert_eq!(out[0].th.ack, 1006);
    }
}

mod ipv6 {
    use super::*;

    #[test]
    fn transfer_over_ipv6_is_byte_exact() {
        let mut p = Pair::new(Config::default());
        p.a.add_address(A6.parse().unwrap());
        p.b.add_address(B6.parse().unwrap());
        let (mut p, c, s) = establish_with(p, A6, B6);
        let ia = p.a.info(p.now, c).unwrap();
        // 1500 - 40 (IPv6) - 20 (TCP) - 12 (timestamps).
        assert_eq!(ia.snd_mss, 1428);
        let d = pattern(500_000, 11);
        assert_eq!(send_all(&mut p, true, c, s, &d), d);
        assert_eq!(send_all(&mut p, false, s, c, &d), d);
        assert!(p.wire.iter().all(|(_, _, pk)| pk[0] >> 4 == 6));
    }
}

mod loss {
    use super::*;

    /// A tiny deterministic generator for loss patterns.
    fn lcg(seed: u64) -> impl FnMut() -> u32 {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as u32
        }
    }

    #[test]
    fn lossy_transfers_are_byte_exact_for_many_seeds() {
        for seed in 0..12u64 {
            let (mut p, c, s) = establish(Config::default());
            let mut rnd = lcg(seed);
            // Loss in both directions: 1 % to 6 %, plus bursts of 3 every so often.
            let rate = 1 + (seed % 6) as u32;
            let mut burst = 0;
            p.filter = Some(Box::new(move |_, _| {
                if burst > 0 {
                    burst -= 1;
                    return Verdict::Drop;
                }
                let r = rnd() % 1000;
                if r < 3 {
                    burst = 2;
                    Verdict::Drop
                } else if r < rate * 10 {
                    Verdict::Drop
                } else {
                    Verdict::Pass
                }
            }));
            let d = pattern(400_000, seed as u8);
            let a_sends = seed % 2 == 0;
            let got = if a_sends {
                send_all(&mut p, true, c, s, &d)
            } else {
                send_all(&mut p, false, s, c, &d)
            };
            assert!(got == d, "seed {seed}: data corrupted");
            let tx = if a_sends { &p.a } else { &p.b };
            assert!(
                counter(tx, Mib::TcpRetransSegs) > 0,
                "seed {seed}: no loss?"
            );
        }
    }
}

mod closed {
    use super::*;
    use lowtide::{Instant, RxChecksum, Stack};
    use lowtide_wire::ip::IpRepr;

    /// The segment to B's closed port 80 from `peer`, its TOS / traffic class byte
    /// set to `tos` (ECN bits included).
    fn segment_with_tos(peer: &str, local: &str, th: &TcpRepr, tos: u8) -> Vec<u8> {
        let mut pkt = build(addr(peer, 4000), addr(local, 80), th, &[], 1);
        set_dsfield(&mut pkt, tos);
        pkt
    }

    /// tcp_v4_send_reset / tcp_v6_send_reset: a reset to a closed port carries the
    /// segment's TOS / traffic class less its ECN bits (Linux 6.18:
    /// tests/packetdrill/rst-reflects-tos.pkt, in all three IP modes).
    #[test]
    fn a_reset_reflects_the_segments_tos_without_ecn() {
        for (peer, local) in [("10.0.0.1", B), ("fd00::1", "fd00::2")] {
            let mut st = Stack::new(Config::default(), 2);
            st.add_address(local.parse().unwrap());
            for (flags, tos, want) in [
                (F::SYN, 0x2b, 0x28),
                (F::ACK, 0x49, 0x48),
                (F::ACK, 0xb8, 0xb8),
                (F::SYN, 0x00, 0x00),
            ] {
                let th = TcpRepr {
                    src_port: 4000,
                    dst_port: 80,
                    seq: 100,
                    ack: 300,
                    flags,
                    window: 1000,
                    ..Default::default()
                };
                let pkt = segment_with_tos(peer, local, &th, tos);
                st.handle_packet(Instant::ZERO, &pkt, RxChecksum::Verify);
                let tx = st.poll_transmit(Instant::ZERO).expect("a reset");
                let ip = IpRepr::parse(&tx.packet, true).unwrap();
                assert_eq!(ip.tos, want, "{peer} {flags:?} tos {tos:#x}");
                assert_eq!(ip.ecn, 0, "a reset is not ECT");
                st.handle_tx_complete(Instant::ZERO, tx.token);
            }
        }
    }
}
