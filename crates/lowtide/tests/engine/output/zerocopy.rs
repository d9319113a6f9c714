//! `MSG_ZEROCOPY` that does not copy (`Stack::send_zerocopy`): every packet's
//! payload is a slice of the caller's `Bytes` (tcp_sendmsg_locked's
//! `skb_zerocopy_iter_stream`), retransmissions too, and the completion
//! (`__msg_zerocopy_callback`) comes once no skb holds the bytes (acknowledged,
//! or purged by a reset) and the device has let go of them: `ee_code` 0, or
//! `SO_EE_CODE_ZEROCOPY_COPIED` from a device that copies (`skb_orphan_frags_rx`).

use crate::common::*;
use bytes::Bytes;
use lowtide::tcp::errqueue::{SO_EE_CODE_ZEROCOPY_COPIED, SO_EE_ORIGIN_ZEROCOPY};
use lowtide::{Config, SendFlags, SocketHandle, TxPayload};
use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::time::Duration;

/// Where A's data packets' payloads lay: (address range, was it apart from the
/// headers, or copied into the packet).
type Seen = Rc<RefCell<Vec<(Range<usize>, bool)>>>;

/// An established pair with `SO_ZEROCOPY` on A, A's data packets recorded, and
/// the first full data segment dropped on the wire once (so that it is
/// retransmitted).
fn pair() -> (Pair, SocketHandle, SocketHandle, Seen) {
    let (mut p, c, s) = establish(Config::default());
    p.a.socket(c).set_zerocopy(true).unwrap();
    // A device that takes payload apart (NETIF_F_SG): zerocopy possible.
    p.a.set_tx_payload_apart(true);
    let seen: Seen = Rc::default();
    let tap = seen.clone();
    p.local_drop = Some(Box::new(move |d, tx| {
        let ihl = (tx.packet[0] & 0xf) as usize * 4;
        let doff = (tx.packet[ihl + 12] >> 4) as usize * 4;
        let data = tx.len() > ihl + doff;
        if d == Dir::AtoB && (data || !tx.payload.is_empty()) {
            let TxPayload::Bytes(b) = &tx.payload else {
                panic!("stored payload");
            };
            let r = b.as_ptr_range();
            tap.borrow_mut()
                .push((r.start as usize..r.end as usize, !b.is_empty()));
        }
        false
    }));
    let mut dropped = false;
    p.filter = Some(Box::new(move |d, seg| {
        if d == Dir::AtoB && !dropped && seg.len() > 1000 {
            dropped = true;
            return Verdict::Drop;
        }
        Verdict::Pass
    }));
    (p, c, s, seen)
}

/// Sends all of `buf` with `send_zerocopy`, reading at B; returns what B read.
fn transfer(p: &mut Pair, c: SocketHandle, s: SocketHandle, buf: &Bytes) -> Vec<u8> {
    let mut sent = 0;
    let mut got = Vec::new();
    while got.len() < buf.len() {
        if sent < buf.len() {
            if let Ok(n) =
                p.a.send_zerocopy(p.now, c, buf.slice(sent..), SendFlags::default())
            {
                sent += n;
            }
        }
        got.extend(drain(&mut p.b, p.now, s));
        assert!(p.step(), "idle at {} of {}", got.len(), buf.len());
    }
    got
}

/// Every zerocopy completion waiting on A, as (first id, last id, code).
fn completions(p: &mut Pair, c: SocketHandle) -> Vec<(u32, u32, u8)> {
    let mut v = Vec::new();
    while let Some(e) = p.a.socket(c).recv_errqueue().unwrap() {
        assert_eq!(e.ee.origin, SO_EE_ORIGIN_ZEROCOPY);
        v.push((e.ee.info, e.ee.data, e.ee.code));
    }
    v
}

/// The bytes are never copied: every payload A hands its device, retransmissions
/// included, lies inside the caller's allocation; the completion comes after the
/// peer's ACK, with `ee_code` 0.
#[test]
fn zerocopy_payloads_are_slices_of_the_callers_buffer() {
    let (mut p, c, s, seen) = pair();
    let buf = Bytes::from(pattern(300_000, 7));
    let alloc = buf.as_ptr_range();
    let alloc = alloc.start as usize..alloc.end as usize;
    let got = transfer(&mut p, c, s, &buf);
    assert_eq!(got, buf);
    let seen = seen.borrow();
    let bytes: usize = seen.iter().map(|(r, _)| r.len()).sum();
    assert!(bytes > buf.len(), "the dropped segment went twice: {bytes}");
    for (r, apart) in seen.iter() {
        assert!(*apart, "a payload was copied into its packet");
        assert!(
            alloc.start <= r.start && r.end <= alloc.end,
            "{r:?} outside {alloc:?}"
        );
    }
    p.drive_for(Duration::from_millis(100));
    let done = completions(&mut p, c);
    assert!(!done.is_empty());
    assert!(done.iter().all(|&(_, _, code)| code == 0), "{done:?}");
    assert_eq!(done.first().unwrap().0, 0);
}

/// The completion waits for the ACK and then for the device: while A's device
/// holds packets of the bytes (no TX completion yet), nothing is reported even
/// once all is acknowledged (Linux: the clones' references keep `uarg->refcnt`).
#[test]
fn completion_waits_for_the_ack_and_the_device() {
    let (mut p, c, s) = establish(Config::default());
    p.a.socket(c).set_zerocopy(true).unwrap();
    p.a.set_tx_payload_apart(true);
    p.held_a = Some(Vec::new());
    let buf = Bytes::from(pattern(20_000, 3));
    assert_eq!(
        p.a.send_zerocopy(p.now, c, buf.clone(), SendFlags::default()),
        Ok(20_000)
    );
    p.flush();
    assert_eq!(completions(&mut p, c), [], "not acknowledged yet");
    p.drive_for(Duration::from_millis(100));
    assert_eq!(drain(&mut p.b, p.now, s), buf);
    assert_eq!(
        completions(&mut p, c),
        [],
        "acknowledged, still in the device"
    );
    for t in p.held_a.take().unwrap() {
        p.a.handle_tx_complete(p.now, t);
    }
    assert_eq!(completions(&mut p, c), [(0, 0, 0)]);
}

/// A device that copies every packet (tun's `skb_orphan_frags_rx`,
/// `Stack::set_tx_orphan_frags`) makes the completion say COPIED; so does one
/// that takes no payload apart (no `NETIF_F_SG`: `tcp_sendmsg_locked` copies,
/// `uarg->zerocopy = 0`), whose packets hold their payload.
#[test]
fn a_device_that_copies_reports_copied() {
    for sg in [true, false] {
        let (mut p, c, s, seen) = pair();
        p.a.set_tx_orphan_frags(sg);
        p.a.set_tx_payload_apart(sg);
        let buf = Bytes::from(pattern(50_000, 5));
        assert_eq!(transfer(&mut p, c, s, &buf), buf);
        p.drive_for(Duration::from_millis(100));
        let done = completions(&mut p, c);
        assert!(!done.is_empty());
        assert!(
            done.iter()
                .all(|&(_, _, code)| code == SO_EE_CODE_ZEROCOPY_COPIED),
            "{done:?}"
        );
        let apart = seen.borrow().iter().filter(|(_, apart)| *apart).count();
        assert_eq!(apart > 0, sg, "payload apart only for the SG device");
    }
}

/// A connection reset with the bytes unacknowledged still completes them
/// (`tcp_reset` -> `tcp_write_queue_purge` frees the skbs, the last reference
/// goes): reported, the socket not being closed, with `ee_code` 0 since nothing
/// copied them.
#[test]
fn a_reset_completes_unacknowledged_bytes() {
    let (mut p, c, s) = establish(Config::default());
    p.a.socket(c).set_zerocopy(true).unwrap();
    p.a.set_tx_payload_apart(true);
    p.filter = Some(Box::new(|d, seg| match d == Dir::AtoB && !seg.is_empty() {
        true => Verdict::Drop,
        false => Verdict::Pass,
    }));
    let buf = Bytes::from(pattern(20_000, 9));
    assert_eq!(
        p.a.send_zerocopy(p.now, c, buf, SendFlags::default()),
        Ok(20_000)
    );
    p.drive_for(Duration::from_millis(50));
    assert_eq!(completions(&mut p, c), [], "nothing acknowledged");
    p.b.abort(p.now, s).unwrap();
    p.drive_for(Duration::from_millis(50));
    assert_eq!(completions(&mut p, c), [(0, 0, 0)]);
}
