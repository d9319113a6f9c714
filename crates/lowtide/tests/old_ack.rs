//! Linux's `tcp_ack` at `old_ack:` (issue 12): an ACK below `snd_una`, reordered on
//! the way back, moves nothing, but its SACK blocks still tag the retransmit queue
//! (`tcp_sacktag_write_queue`) and drive loss recovery (`tcp_fastretrans_alert`).

mod common;
use common::drill::*;

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
    let una = d.info().bytes_acked;
    d.ack_sack(ms(1), 1001, &[(5001, 6001)]);
    let i = d.info();
    assert_eq!(i.sacked, 1, "the old ACK's SACK block was ignored");
    assert_eq!(i.bytes_acked, una, "an old ACK moved snd_una");
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
