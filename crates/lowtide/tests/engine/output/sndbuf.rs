//! Send buffer autotuning as Linux's tcp_input.c does it: `tcp_sndbuf_expand` runs
//! from `tcp_check_space` only when the writer ran out of room (`SOCK_NOSPACE`) and
//! the flight does not fill cwnd once the push that follows the ACK is done
//! (`tcp_should_expand_sndbuf`), on the Pair harness (common::drill).

use crate::common::drill::*;

/// `tcp_init_buffer_space`'s buffer at MSS 1000: 2 * TCP_INIT_CWND * per_mss, where
/// per_mss = roundup_pow_of_two(1000 + MAX_TCP_HEADER 256 + 320) + 256 = 2304.
const INIT_SNDBUF: u32 = 2 * 10 * 2304;

fn drill() -> Drill {
    let mut d = Drill::with_sndbuf(Drill::cubic_cfg(1000), ms(100), None);
    d.set_win(1 << 20);
    d
}

/// A writer that never waited (no SOCK_NOSPACE): slow start doubles cwnd, the send
/// buffer stays what the connection started with.
#[test]
fn writer_with_room_does_not_grow_the_buffer() {
    let mut d = drill();
    assert_eq!(d.info().sndbuf, INIT_SNDBUF);
    d.write(10_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d.ack(ms(100), 10_001);
    assert_eq!(d.cwnd(), 20);
    assert_eq!(
        d.info().sndbuf,
        INIT_SNDBUF,
        "no tcp_new_space without SOCK_NOSPACE"
    );
}

/// A writer out of room whose queue runs short of cwnd: the buffer grows to
/// 2 * cwnd * per_mss.
#[test]
fn waiting_writer_with_a_short_queue_grows_the_buffer() {
    let mut d = drill();
    // 46080 bytes of buffer take one 45-segment skb and the writer waits.
    d.write(1_000_000);
    assert_eq!(d.sent_ranges(), [(1, 10_001)]);
    d.ack(ms(100), 10_001);
    assert_eq!(d.cwnd(), 20);
    let sb = d.info().sndbuf;
    assert!(sb > INIT_SNDBUF, "sndbuf {sb}");
    assert_eq!(sb % (2 * 2304), 0, "a whole number of segments: {sb}");
}
