//! Linux's `tcp_ack` at `old_ack:` (issue 12): an ACK below `snd_una`, reordered on
//! the way back, moves nothing, but its SACK blocks still tag the retransmit queue
//! (`tcp_sacktag_write_queue`) and drive loss recovery (`tcp_fastretrans_alert`).

use crate::common::drill::*;

/// A reordered ACK carries the only SACK of segment 5001:6001: Linux tags it
/// (tcpi_sacked 1) and never retransmits it; it moves neither snd_una nor the window.
#[test]
fn an_old_acks_sack_blocks_are_tagged() {
    let mut d = Drill::cubic(ms(100));
    d.write(10_000);
    assert_eq!(d.sent_ranges(), vec![(1, 10_001)]);
    // The newer ACK (2001) overtook the older one (1001) that SACKs 5001:6001.
    d.ack(ms(100), 2001);
    assert_eq!(d.info().sacked, 0);
    let (una, delivered) = (d.info().bytes_acked, d.info().delivered);
    d.ack_sack(ms(1), 1001, &[(5001, 6001)]);
    let i = d.info();
    assert_eq!(i.sacked, 1, "the old ACK's SACK block was ignored");
    assert_eq!(i.bytes_acked, una, "an old ACK moved snd_una");
    // tcp_ack counts sack_state.sack_delivered (tcp_count_delivered) only past
    // old_ack: the segment it SACKed is never counted delivered (Linux 6.18,
    // tests/packetdrill/sack-recovery-old-ack-below-snd-una.pkt's TcpExtTCPDelivered).
    assert_eq!(
        i.delivered, delivered,
        "an old ACK's SACK counted delivered"
    );
    // Later ACKs SACK what follows; 2001:5001 is lost and 5001:6001 is never resent.
    d.ack_sack(ms(1), 2001, &[(6001, 10_001)]);
    d.wait(ms(300));
    let resent = d.sent_ranges();
    assert!(
        resent.iter().any(|&(s, _)| s == 2001),
        "the hole was not retransmitted: {resent:?}"
    );
    assert!(
        !resent.iter().any(|&(s, e)| s < 6001 && e > 5001),
        "SACKed 5001:6001 was retransmitted: {resent:?}"
    );
}

/// An old ACK's SACK blocks are validated against today's snd_una as Linux's
/// `tcp_is_sackblock_valid` does: a block at or below snd_una tags nothing.
#[test]
fn an_old_acks_stale_sack_blocks_tag_nothing() {
    let mut d = Drill::cubic(ms(100));
    d.write(10_000);
    d.ack(ms(100), 4001);
    d.ack_sack(ms(1), 1001, &[(2001, 3001)]);
    assert_eq!(d.info().sacked, 0);
}

/// `tcp_ack` returns at `old_ack:` before `FLAG_UPDATE_TS_RECENT` takes effect: a
/// segment whose ACK is old still delivers its data, but its TSval does not move
/// ts_recent, so the receiver keeps echoing the previous TSval.
#[test]
fn an_old_ack_does_not_move_ts_recent() {
    use crate::common::*;
    use lowtide::Config;
    use lowtide_wire::tcp::TcpFlags;
    let (mut p, a, b) = establish(Config::default());
    // B sends 3000 bytes so that its snd_una is well above its ISN.
    let data = pattern(3000, 1);
    assert_eq!(send_all(&mut p, false, b, a, &data), data);
    p.drive_for(std::time::Duration::from_millis(200));
    let peer = learn(&p, Dir::BtoA); // impersonates A towards B
    let from = p.wire.len();
    let mut forged = peer;
    forged.ts_val = peer.ts_val.wrapping_add(100_000);
    // In sequence, 100 bytes, but acknowledging only 1000 of B's 3000 bytes.
    let seg = forged.seg(
        TcpFlags::ACK | TcpFlags::PSH,
        peer.seq,
        peer.ack.wrapping_sub(2000),
        &[7u8; 100],
    );
    p.inject(true, &seg);
    assert_eq!(drain(&mut p.b, p.now, b), vec![7u8; 100], "data kept");
    p.filter = Some(Box::new(|_, _| Verdict::Drop)); // A must not answer
    p.drive_for(std::time::Duration::from_millis(300));
    let acks = p.sent_since(from, Dir::BtoA);
    let tsecr = acks
        .first()
        .expect("B acknowledged")
        .th
        .options
        .timestamp
        .unwrap()
        .1;
    assert_eq!(
        tsecr,
        peer.ts_val.wrapping_sub(1),
        "ts_recent moved on an old ACK"
    );
}
