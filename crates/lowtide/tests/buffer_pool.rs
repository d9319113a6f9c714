//! Packet buffers given back with `Stack::recycle_buffer` build the next packets
//! (issue 14: no allocation and no page faults per 64 KB packet in steady state), and
//! a recycled buffer's old bytes never leak into a packet.

mod common;
use common::*;
use lowtide::{Config, RxChecksum};

#[test]
fn a_recycled_buffer_builds_the_next_large_packet() {
    let (mut p, c, s) = establish(Config::default());
    let data = pattern(200_000, 3);
    let n = p.a.send(p.now, c, &data).unwrap();
    assert!(n > 20_000, "the socket took {n} bytes");
    let mut large = Vec::new();
    while let Some(tx) = p.a.poll_transmit(p.now) {
        if tx.packet.len() >= lowtide_wire::pool::POOL_MIN_LEN {
            large.push(tx);
        }
    }
    assert!(large.len() >= 2, "{} large packets", large.len());
    // Give the first back dirty: the next large packet is built in it, and the
    // receiver still gets the right bytes from it.
    let mut first = large.remove(0);
    let ptr = first.packet.as_ptr();
    p.b.handle_transmit(p.now, &first);
    first.packet.iter_mut().for_each(|b| *b = 0xee);
    p.a.recycle_buffer(std::mem::take(&mut first.packet));
    for tx in &large {
        p.b.handle_packet(p.now, &tx.packet, RxChecksum::Unnecessary);
    }
    // Let the receiver's ACKs open the window, then look at the next large packet.
    while let Some(ack) = p.b.poll_transmit(p.now) {
        p.a.handle_transmit(p.now, &ack);
    }
    let more = pattern(100_000, 4);
    let _ = p.a.send(p.now, c, &more);
    let next = std::iter::from_fn(|| p.a.poll_transmit(p.now))
        .find(|tx| tx.packet.len() >= lowtide_wire::pool::POOL_MIN_LEN)
        .expect("another large packet");
    assert_eq!(next.packet.as_ptr(), ptr, "built in the recycled buffer");
    let mut got = drain(&mut p.b, p.now, s);
    let before = got.len();
    p.b.handle_transmit(p.now, &next);
    got.extend(drain(&mut p.b, p.now, s));
    assert!(got.len() > before, "the recycled packet's data arrived");
    let sent: Vec<u8> = data[..n].iter().chain(&more).copied().collect();
    assert_eq!(
        got[..],
        sent[..got.len()],
        "the bytes read are the bytes written"
    );
}
