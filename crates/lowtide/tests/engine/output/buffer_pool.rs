//! Packet buffers given back with `Stack::recycle_buffer` build the next packets
//! (issue 14: no allocation and no page faults per 64 KB packet in steady state), and
//! a recycled buffer's old bytes never leak into a packet.

use crate::common::*;
use lowtide::{Config, Transmit};
use lowtide_wire::pool::POOL_MID_LEN;
use std::time::Duration;

/// Moves traffic between the two stacks (A's packets completed at once) until A
/// sends a packet longer than `POOL_MID_LEN` bytes, which is returned undelivered.
struct Flow<'a> {
    c: lowtide::SocketHandle,
    s: lowtide::SocketHandle,
    data: &'a [u8],
    sent: usize,
    got: Vec<u8>,
}

fn next_large(p: &mut Pair, f: &mut Flow) -> Transmit {
    for _ in 0..2000 {
        f.sent += p.a.send(p.now, f.c, &f.data[f.sent..]).unwrap_or(0);
        while let Some(tx) = p.a.poll_transmit(p.now) {
            p.a.handle_tx_complete(p.now, tx.token);
            if tx.packet.len() > POOL_MID_LEN {
                return tx;
            }
            p.b.handle_transmit(p.now, &tx);
        }
        f.got.extend(drain(&mut p.b, p.now, f.s));
        while let Some(ack) = p.b.poll_transmit(p.now) {
            p.a.handle_transmit(p.now, &ack);
        }
        p.now += Duration::from_millis(1);
        p.a.handle_timeout(p.now);
        p.b.handle_timeout(p.now);
    }
    panic!("no large packet");
}

#[test]
fn a_recycled_buffer_builds_the_next_large_packet() {
    let (mut p, c, s) = establish(Config::default());
    let data = pattern(3_000_000, 3);
    let mut f = Flow {
        c,
        s,
        data: &data,
        sent: 0,
        got: Vec::new(),
    };
    let mut first = next_large(&mut p, &mut f);
    p.b.handle_transmit(p.now, &first);
    // Give it back dirty: the next large packet is built in it, and the receiver
    // still gets the right bytes.
    let ptr = first.packet.as_ptr();
    first.packet.iter_mut().for_each(|b| *b = 0xee);
    p.a.recycle_buffer(std::mem::take(&mut first.packet));
    let next = next_large(&mut p, &mut f);
    assert_eq!(next.packet.as_ptr(), ptr, "built in the recycled buffer");
    f.got.extend(drain(&mut p.b, p.now, s));
    let before = f.got.len();
    p.b.handle_transmit(p.now, &next);
    f.got.extend(drain(&mut p.b, p.now, s));
    assert!(f.got.len() > before, "the recycled packet's data arrived");
    assert_eq!(
        f.got[..],
        data[..f.got.len()],
        "the bytes read are the bytes written"
    );
}
