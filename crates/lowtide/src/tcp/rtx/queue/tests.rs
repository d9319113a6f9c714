//! The retransmit queue's unit and property tests (both kinds, tree and list,
//! against each other and against their invariants).

use super::*;
use crate::tcp::consts::SKB_OVERHEAD;
use bytes::Bytes;
use proptest::prelude::*;

pub(crate) const MSS: u32 = 100;
pub(crate) const KINDS: [RtxQueueKind; 2] = [RtxQueueKind::Tree, RtxQueueKind::List];

pub(crate) fn skb(seq: u64, len: u32) -> Skb {
    Skb {
        seq,
        end_seq: seq + len as u64,
        data: Bytes::from(
            (0..len)
                .map(|i| (seq + i as u64) as u8)
                .collect::<Vec<u8>>(),
        )
        .into(),
        flags: 0,
        sacked: 0,
        pcount: skb::tso_segs(len, MSS).0,
        gso_size: skb::tso_segs(len, MSS).1,
        tx_time: Instant(seq),
        truesize: len + SKB_OVERHEAD,
        tx: Default::default(),
        fclone: 0,
        zc: None,
        uncharged: 0,
    }
}

pub(crate) fn queue_of(kind: RtxQueueKind, n: u64, len: u32) -> RtxQueue {
    let mut q = RtxQueue::with_kind(kind);
    for i in 0..n {
        q.push(skb(1 + i * len as u64, len));
    }
    q
}

fn queue(n: u64, len: u32) -> RtxQueue {
    queue_of(RtxQueueKind::Tree, n, len)
}

/// Every skb's payload still holds the stream bytes of its range.
pub(crate) fn check_payload(q: &RtxQueue) {
    for s in q.iter_from(0) {
        for (i, b) in s.data.stored().expect("stored").iter().enumerate() {
            assert_eq!(*b, (s.seq + i as u64) as u8, "payload of skb at {}", s.seq);
        }
    }
}

/// `tcp_rack_detect_loss` unlinks what it marks lost from the time-sorted list
/// (`list_del_init(&skb->tcp_tsorted_anchor)`); clearing the lost mark (an undo's
/// `unmark_loss`) does not bring it back, sending it again does
/// (`tcp_update_skb_after_send`).
#[test]
fn rack_marked_skbs_leave_the_time_sorted_index_until_sent_again() {
    let mut q = queue(4, MSS);
    assert_eq!(q.tsorted.len(), 4);
    // Everything sent before the last skb (stamped 301, ending 401) is lost.
    let r = q.rack_detect_loss(Instant(301), 401, |_| -1);
    assert_eq!((r.lost_segs, q.lost_out), (3, 3));
    assert_eq!(q.tsorted.len(), 1);
    for seq in [1, 101, 201] {
        q.update(seq, 0, LOST);
    }
    assert_eq!(q.lost_out, 0);
    assert_eq!(q.tsorted.len(), 1, "an unmarked skb stays off the list");
    assert!(q
        .rack_detect_loss(Instant(301), 401, |_| -1)
        .first
        .is_none());
    q.mark_retransmitted(101, Instant(1_000));
    assert_eq!(q.tsorted.len(), 2);
    let r = q.rack_detect_loss(Instant(2_000), 1_000_000, |_| -1);
    assert_eq!(r.first, Some(101));
    // A split piece of an unlisted skb is unlisted too (tcp_fragment's list_add
    // after an unlinked anchor); an skb lost by other means stays listed.
    let mut q = queue(2, 2 * MSS);
    q.rack_detect_loss(Instant(201), 401, |_| -1);
    q.update(1, 0, LOST);
    q.split_at(101, MSS);
    assert_eq!(q.tsorted.len(), 1);
    q.update(201, LOST, 0);
    q.update(201, 0, LOST);
    assert_eq!(q.tsorted.len(), 1);
}

/// A SACKed skb leaves the time-sorted list too (`tcp_sacktag_walk`'s
/// `list_del_init`): taken back by reneging, it stays off until sent again.
#[test]
fn a_sacked_skb_taken_back_stays_off_the_time_sorted_index() {
    let mut q = queue(3, MSS);
    q.sacktag(101, 201);
    assert_eq!(q.tsorted.len(), 2);
    q.clear_sacked();
    assert_eq!((q.sacked_out, q.tsorted.len()), (0, 2));
    q.mark_retransmitted(101, Instant(1_000));
    assert_eq!(q.tsorted.len(), 3);
    q.check_invariants();
}

#[test]
fn default_is_tree() {
    assert_eq!(RtxQueue::default().kind(), RtxQueueKind::Tree);
}

/// 10,000 one-MSS skbs; every 10th of the first 5,000 lost and the 9 after it
/// SACKed (merged into one skb each): 1,000 skbs below the top of the SACKed
/// range.
pub(crate) fn storm(kind: RtxQueueKind) -> RtxQueue {
    let mut q = queue_of(kind, 10_000, MSS);
    let off = |i: u64| 1 + i * MSS as u64;
    for h in (0..5_000).step_by(10) {
        q.sacktag_blocks(&[(off(h + 1), off(h + 10))]);
    }
    q
}

/// `tcp_clean_rtx_queue` finds the head once (`skb_rb_first`) and then steps
/// (`skb_rb_next`) and unlinks (`rb_erase`) the skbs it holds: no search from
/// the tree's root per skb freed.
#[test]
fn clean_walks_from_the_head_once() {
    for kind in KINDS {
        let mut q = queue_of(kind, 1024, MSS);
        let before = q.nodes_visited();
        let c = q.clean(1 + 100 * MSS as u64);
        assert_eq!(c.acked_segs, 100);
        let walked = q.nodes_visited() - before;
        assert!(
            walked <= 2 * 100 + 12,
            "{kind:?}: {walked} nodes to free 100 skbs"
        );
        q.check_invariants();
    }
}

/// RFC 6675's walk resumes at `tp->lost_skb_hint`, a pointer in Linux: the
/// list does not walk from its head to it.
#[test]
fn list_mark_lost_starts_at_the_lost_hint() {
    let off = |i: u64| 1 + i * MSS as u64;
    let mut q = storm(RtxQueueKind::List);
    // The first walk counts the SACKed segments below (Linux: from the head,
    // `lost_cnt_hint` 0); the next one resumes at the hint it left.
    let (hint, _) = q.mark_lost_sacked_above(off(4_990), 2 * MSS as u64);
    assert_eq!(hint, off(4_991));
    q.sacktag_blocks(&[(off(5_001), off(5_010))]);
    let before = q.nodes_visited();
    let (_, marked) = q.mark_lost_sacked_above(hint, 2 * MSS as u64);
    assert_eq!(marked, Some(off(5_000)));
    let walked = q.nodes_visited() - before;
    assert!(walked < 20, "{walked} nodes from the hint");
    q.check_invariants();
}

#[test]
fn clean_trims_head() {
    for kind in KINDS {
        let mut q = queue_of(kind, 2, 1000);
        let c = q.clean(551);
        assert_eq!(c.acked_bytes, 550);
        assert_eq!(q.first().unwrap().seq, 551);
        q.check_invariants();
        let c = q.clean(2001);
        assert_eq!(c.acked_bytes, 1450);
        assert!(q.is_empty());
        assert_eq!(q.packets_out, 0);
        assert_eq!(q.truesize, 0);
    }
}

/// `sk_wmem_queued` as Linux moves it: `tcp_fragment` charges the new skb
/// (`SKB_OVERHEAD`, the moved bytes' truesize going with them), and
/// `tcp_trim_head` frees the trimmed bytes only (`delta_truesize`), so a FIN left
/// alone still holds its skb's overhead (`SK_MEMINFO_WMEM_QUEUED` 832 on Linux).
#[test]
fn splits_charge_an_skb_and_trims_free_the_bytes() {
    const OH: u64 = SKB_OVERHEAD as u64;
    for kind in KINDS {
        let mut q = queue_of(kind, 1, 1000);
        assert_eq!(q.truesize, 1000 + OH);
        assert_eq!(q.split_at(301, MSS), OH);
        assert_eq!(q.split_at(301, MSS), 0, "already a boundary");
        assert_eq!(q.truesize, 1000 + 2 * OH);
        assert_eq!(q.get(301).unwrap().truesize as u64, 700 + OH);
        // A partial ACK (tcp_tso_acked) frees the acked bytes, net.
        let c = q.clean(101);
        assert_eq!((c.acked_bytes, c.truesize), (100, 100));
        assert_eq!(q.truesize, 900 + 2 * OH);
        // A retransmission's trim too.
        assert_eq!(q.trim_head(101, 151), 50);
        assert_eq!(q.truesize, 850 + 2 * OH);
        q.check_invariants();
        // Data acked up to the FIN: the FIN's skb keeps its overhead.
        let mut q = queue_of(kind, 1, 200);
        let only = q.store.find(1).unwrap();
        q.modify(only, |s| {
            s.flags |= skb::FLAG_FIN;
            s.end_seq += 1;
        });
        let c = q.clean(201);
        assert_eq!((c.truesize, q.truesize), (200, OH));
        q.check_invariants();
    }
}

/// `tcp_tso_acked`: a trimmed skb's acked segments are the pcount it lost, so a
/// 2,000-byte ACK into a 3,000-byte skb at MSS 988 (4 segments) acks 2 (the
/// rest needs 2), and an ACK that leaves the pcount as it was acks none and
/// gives no RTT sample.
#[test]
fn clean_counts_trimmed_segments_as_tcp_tso_acked() {
    for kind in KINDS {
        let mut q = queue_of(kind, 1, 3000);
        q.modify(q.store.first_pos().unwrap(), |s| s.set_tso_segs(988));
        assert_eq!(q.packets_out, 4);
        let c = q.clean(11);
        assert_eq!((c.acked_bytes, c.acked_segs), (10, 0));
        assert!(c.first_tx.is_none());
        assert_eq!(q.packets_out, 4);
        let c = q.clean(2001);
        assert_eq!((c.acked_bytes, c.acked_segs), (1990, 2));
        assert_eq!(q.packets_out, 2);
        let c = q.clean(3001);
        assert_eq!((c.acked_bytes, c.acked_segs), (1000, 2));
        assert!(q.is_empty());
        q.check_invariants();
    }
}

/// tcp_clean_rtx_queue: an ACK into a one-segment skb leaves it whole (no
/// segment acked, no RTT, the start kept for reordering detection);
/// `__tcp_retransmit_skb` trims it to `snd_una` (`tcp_trim_head`).
#[test]
fn one_segment_skb_stays_whole_until_trimmed_for_retransmission() {
    for kind in KINDS {
        let mut q = queue_of(kind, 2, 60); // one segment each at MSS 100
        let c = q.clean(31);
        assert_eq!((c.acked_segs, c.acked_bytes, c.truesize), (0, 0, 0));
        assert!(c.first_tx.is_none() && c.reord.is_none());
        assert_eq!((q.first().unwrap().seq, q.packets_out), (1, 2));
        let freed = q.trim_head(1, 31);
        assert!(freed > 0);
        assert_eq!((q.first().unwrap().seq, q.first().unwrap().len()), (31, 30));
        check_payload(&q);
        q.check_invariants();
        // Acked whole: counted from its (untrimmed) start.
        let mut q = queue_of(kind, 2, 60);
        q.clean(31);
        let c = q.clean(61);
        assert_eq!((c.acked_segs, c.reord), (1, Some(1)));
        q.check_invariants();
    }
}

/// tcp_clean_rtx_queue -> tcp_tso_acked: an ACK of all the data of a
/// two-segment skb but not its FIN trims the data off (`tcp_trim_head`): one
/// segment acked, from the skb's start (reordering detection), the FIN alone
/// left as one segment; nothing stays below the ACK for a loss probe to split.
#[test]
fn an_ack_up_to_the_fin_of_a_longer_skb_leaves_the_fin_alone() {
    for kind in KINDS {
        let mut q = queue_of(kind, 1, 200); // two segments at MSS 100
        let only = q.store.find(1).unwrap();
        q.modify(only, |s| {
            s.flags |= skb::FLAG_FIN;
            s.end_seq += 1;
        });
        let c = q.clean(201);
        assert_eq!((c.acked_segs, c.acked_bytes, c.reord), (1, 200, Some(1)));
        let s = q.first().unwrap();
        assert_eq!((s.seq, s.end_seq, s.len(), s.pcount), (201, 202, 0, 1));
        assert_eq!(q.packets_out, 1);
        check_payload(&q);
        q.check_invariants();
        let c = q.clean(202);
        assert_eq!((c.acked_segs, c.fin_acked), (1, true));
        assert!(q.is_empty());
    }
}

/// __tcp_retransmit_skb -> tcp_trim_head: a one-segment skb with a FIN whose
/// data is all acked (snd_una at the FIN) goes again as the FIN alone.
#[test]
fn trim_head_to_the_fin_leaves_the_fin() {
    for kind in KINDS {
        let mut q = queue_of(kind, 2, 60);
        let last = q.store.find(61).unwrap();
        q.modify(last, |s| {
            s.flags |= skb::FLAG_FIN;
            s.end_seq += 1;
        });
        q.clean(61);
        let c = q.clean(121);
        assert_eq!((c.acked_segs, q.packets_out), (0, 1), "FIN not acked");
        let freed = q.trim_head(61, 121);
        assert!(freed > 0);
        let s = q.first().unwrap();
        assert_eq!((s.seq, s.end_seq, s.len(), s.pcount), (121, 122, 0, 1));
        assert_ne!(s.flags & skb::FLAG_FIN, 0);
        assert_eq!(q.packets_out, 1);
        q.check_invariants();
        // Without a FIN there is nothing past the data to keep.
        let mut q = queue_of(kind, 1, 60);
        assert_eq!(q.trim_head(1, 61), 0);
        assert_eq!(q.first().unwrap().seq, 1);
    }
}

/// tcp_retrans_try_collapse: following one-segment skbs join while they fit in
/// `space` and the window; a SACKed skb, one of several segments or the end of a
/// MSG_EOR record stops it (tcp_can_collapse, tcp_skb_can_collapse).
#[test]
fn retrans_collapse_follows_tcp_can_collapse() {
    for kind in KINDS {
        let mut q = queue_of(kind, 5, 40);
        q.update(81, skb::LOST, 0);
        let before = q.truesize;
        let freed = q.retrans_try_collapse(1, 100, 1_000);
        // 1:41 takes 41:81 (80 bytes); 81:121 would pass 100.
        assert_eq!(
            (q.first().unwrap().end_seq, q.len(), q.packets_out),
            (81, 4, 4)
        );
        assert_eq!(q.truesize, before - freed);
        check_payload(&q);
        q.check_invariants();
        // The window ends inside the next skb: nothing joins.
        assert_eq!(q.retrans_try_collapse(81, 100, 150), 0);
        // A lost skb joins and stops counting as lost of its own.
        q.retrans_try_collapse(81, 100, 1_000);
        assert_eq!((q.len(), q.lost_out), (3, 1));
        q.check_invariants();

        let mut q = queue_of(kind, 4, 40);
        q.sacktag(41, 81);
        assert_eq!(q.retrans_try_collapse(1, 100, 1_000), 0, "SACKed next");
        let mut q = queue_of(kind, 4, 40);
        let eor = q.store.first_pos().unwrap();
        q.modify(eor, |s| s.flags |= skb::FLAG_EOR);
        assert_eq!(q.retrans_try_collapse(1, 100, 1_000), 0, "record end");
        // Joining an skb that ends a record ends the merge there, EOR kept.
        let p = q.store.find(81).unwrap();
        q.modify(p, |s| s.flags |= skb::FLAG_EOR);
        q.retrans_try_collapse(41, 1_000, 1_000);
        let s = q.get(41).unwrap();
        assert_eq!((s.end_seq, s.flags & skb::FLAG_EOR), (121, skb::FLAG_EOR));
        q.check_invariants();
    }
}

#[test]
fn rfc6675_marks_holes_below_three_sacked_segments() {
    for kind in KINDS {
        let mut q = queue_of(kind, 10, 100); // ten 1-MSS skbs at 1, 101, ...
        q.sacktag(201, 301); // third SACKed: 1 segment above the first two
        let (_, m) = q.mark_lost_sacked_above(1, 2 * MSS as u64);
        assert_eq!(m, None);
        q.sacktag(301, 501); // three segments SACKed above the head
        let (hint, m) = q.mark_lost_sacked_above(1, 2 * MSS as u64);
        assert_eq!(m, Some(1));
        assert_eq!(q.lost_out, 2);
        assert_eq!(hint, 201);
        assert_eq!(q.next_lost_from_hint(0).lost, Some((1, 1)));
        q.check_invariants();
    }
}

#[test]
fn enter_loss_marks_unsacked() {
    for kind in KINDS {
        let mut q = queue_of(kind, 5, 100);
        q.sacktag(201, 301);
        // A retransmission not known lost (a TLP's) stays in flight as one.
        q.mark_retransmitted(1, Instant(9));
        q.mark_all_lost();
        assert_eq!(q.lost_out, 4);
        assert_eq!(q.retrans_out, 1);
        assert_eq!(q.lost, 4);
        // Lost and retransmitted, then lost again: no longer retransmitted.
        q.mark_all_lost();
        assert_eq!((q.lost_out, q.retrans_out, q.lost), (4, 0, 5));
        q.check_invariants();
    }
}

/// `tcp_retransmit_skb` adds the segments of an skb still marked retransmitted
/// again ("retrans_out leaked"); the decrements follow the mark, so the excess
/// outlives the skb until `tcp_clean_rtx_queue` empties the queue (with SACK).
#[test]
fn retransmission_of_a_marked_skb_leaks_retrans_out() {
    for kind in KINDS {
        let mut q = queue_of(kind, 3, 100);
        q.mark_all_lost();
        q.count_retransmission(1);
        q.count_retransmission(101);
        assert_eq!((q.retrans_out, q.retrans_leaked), (2, 0));
        // An undo unmarks the losses: R without L. An RTO marks the head lost
        // and keeps R, then sends it again: counted twice.
        q.unmark_all_lost();
        q.mark_all_lost();
        assert_eq!((q.lost_out, q.retrans_out), (3, 2));
        q.count_retransmission(1);
        assert_eq!((q.retrans_out, q.retrans_leaked), (3, 1));
        q.check_invariants();
        // Its ACK takes one; a lost retransmission lost again takes one more.
        q.clean(101);
        assert_eq!(q.retrans_out, 2);
        q.mark_all_lost();
        assert_eq!((q.retrans_out, q.lost_out, q.retrans_leaked), (1, 2, 1));
        q.check_invariants();
        // Something still in flight: the counters stay.
        q.clear_leaked_counts();
        assert_eq!(q.retrans_out, 1);
        q.clean(301);
        assert_eq!((q.packets_out, q.retrans_out), (0, 1));
        q.clear_leaked_counts();
        assert_eq!((q.retrans_out, q.retrans_leaked), (0, 0));
        q.check_invariants();
    }
}

/// Operations on both queue kinds, for the comparison below.
#[derive(Debug, Clone)]
enum Op {
    Sack(Vec<(u64, u64)>),
    Ack(u64),
    MarkLost(u64, u64),
    Retransmit(u64),
    EnterLoss,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec((0u64..6000, 1u64..900), 1..4).prop_map(|v| Op::Sack(
            v.into_iter().map(|(s, l)| (1 + s, 1 + s + l)).collect()
        )),
        1 => (0u64..6000).prop_map(Op::Ack),
        2 => (0u64..6000, 0u64..400).prop_map(|(f, t)| Op::MarkLost(f, t)),
        1 => (0u64..6000).prop_map(Op::Retransmit),
        1 => Just(Op::EnterLoss),
    ]
}

/// Applies `op` as the engine would (blocks validated against the queue's range)
/// and returns its visible result.
fn apply(q: &mut RtxQueue, op: &Op, una: &mut u64) -> String {
    let nxt = q.last().map_or(*una, |s| s.end_seq);
    match op {
        Op::Sack(b) => {
            let valid: Vec<_> = b
                .iter()
                .map(|&(s, e)| (s, e.min(nxt)))
                .filter(|&(s, e)| s >= *una && s < e)
                .collect();
            format!("{:?}", q.sacktag_blocks(&valid))
        }
        Op::Ack(a) => {
            *una = (*a).clamp(*una, nxt);
            let c = q.clean(*una);
            format!(
                "{} {} {} {:?} {:?}",
                c.acked_segs, c.acked_sacked_segs, c.acked_bytes, c.first_tx, c.last_tx
            )
        }
        Op::MarkLost(f, t) => format!("{:?}", q.mark_lost_sacked_above(*f, *t)),
        Op::Retransmit(f) => {
            let seq = q.next_lost_from_hint(*f).lost.map(|(s, _)| s);
            if let Some(s) = seq {
                q.split_at(s + 2 * MSS as u64, MSS);
                q.mark_retransmitted(s, Instant(1_000_000));
            }
            format!("{seq:?}")
        }
        Op::EnterLoss => {
            q.mark_all_lost();
            String::new()
        }
    }
}

fn snapshot(q: &RtxQueue) -> Vec<(u64, u64, u8, u32, u32, Instant, Bytes)> {
    q.iter_from(0)
        .map(|s| {
            (
                s.seq,
                s.end_seq,
                s.sacked,
                s.pcount,
                s.truesize,
                s.tx_time,
                s.data.stored().cloned().unwrap_or_default(),
            )
        })
        .collect()
}

fn sizes() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::vec(prop_oneof![Just(100u32), Just(1000), 1u32..700], 1..12)
}

proptest! {
    #[test]
    fn random_sacks_keep_invariants(blocks in proptest::collection::vec((0u64..5000, 1u64..800), 1..30), ack in 0u64..5000) {
        let mut q = queue(5, 1000);
        for (s, l) in blocks {
            let start = 1 + s;
            let end = (start + l).min(5001);
            if start < end {
                q.sacktag(start, end);
                q.check_invariants();
            }
        }
        q.mark_lost_sacked_above(1, 300);
        q.check_invariants();
        q.clean(1 + ack);
        q.check_invariants();
        check_payload(&q);
    }

    /// The tree and the list give the same skbs, counters and results after
    /// every operation of a random SACK/ACK sequence.
    #[test]
    fn tree_and_list_agree(sizes in sizes(), ops in proptest::collection::vec(op(), 1..40)) {
        let mut tree = RtxQueue::with_kind(RtxQueueKind::Tree);
        let mut list = RtxQueue::with_kind(RtxQueueKind::List);
        let mut seq = 1;
        for len in sizes {
            tree.push(skb(seq, len));
            list.push(skb(seq, len));
            seq += len as u64;
        }
        let (mut una_t, mut una_l) = (1, 1);
        for op in &ops {
            let rt = apply(&mut tree, op, &mut una_t);
            let rl = apply(&mut list, op, &mut una_l);
            prop_assert_eq!(rt, rl, "{:?}", op);
            prop_assert_eq!(snapshot(&tree), snapshot(&list));
            let counters = |q: &RtxQueue| (q.packets_out, q.sacked_out, q.lost_out, q.retrans_out, q.sacked_bytes, q.truesize, q.len());
            prop_assert_eq!(counters(&tree), counters(&list));
            tree.check_invariants();
            list.check_invariants();
        }
        check_payload(&tree);
    }
}
