//! Initial sequence numbers and ephemeral ports an off-path attacker cannot predict
//! (RFC 6528, RFC 6056): keyed by the secret the stack's caller gives, not by its
//! seed, and ISNs moving with a 64 ns clock per 4-tuple as Linux's secure_tcp_seq.

use crate::common::*;
use lowtide::{Config, Instant, Stack};
use std::net::IpAddr;
use std::time::Duration;

/// The SYN a stack sends for a connect at `now`: (source port, ISN).
fn syn(st: &mut Stack, now: Instant) -> (u16, u32) {
    st.connect(now, addr(A, 0), addr(B, 80)).unwrap();
    let tx = st.poll_transmit(now).expect("SYN");
    let s = Seg::parse(&tx.packet);
    (s.th.src_port, s.th.seq)
}

fn stack(seed: u64, secret: Option<[u8; 32]>) -> Stack {
    let mut st = Stack::new(Config::default(), seed);
    if let Some(k) = secret {
        st.set_secret(k);
    }
    st.add_address(A.parse::<IpAddr>().unwrap());
    st
}

#[test]
fn the_secret_not_the_seed_decides_ports_and_isns() {
    let t = Instant::ZERO;
    // Same seed, different secrets: different choices.
    let a = syn(&mut stack(1, Some([1; 32])), t);
    let b = syn(&mut stack(1, Some([2; 32])), t);
    assert_ne!(a.0, b.0, "ports");
    assert_ne!(a.1, b.1, "ISNs");
    // Same secret: the same choices (the engine itself is deterministic).
    assert_eq!(a, syn(&mut stack(7, Some([1; 32])), t));
}

#[test]
fn isn_of_a_tuple_advances_with_the_clock() {
    // Two stacks with one secret open the same 4-tuple 1 ms apart: the second ISN is
    // the first plus 1 ms / 64 ns (secure_tcp_seq's seq_scale).
    let (p1, i1) = syn(&mut stack(3, Some([9; 32])), Instant::ZERO);
    let later = Instant::ZERO + Duration::from_millis(1);
    let (p2, i2) = syn(&mut stack(3, Some([9; 32])), later);
    assert_eq!(p1, p2);
    assert_eq!(i2.wrapping_sub(i1), 1_000_000 / 64);
}

#[test]
fn successive_ports_to_one_destination_are_not_sequential() {
    let mut st = stack(5, Some([4; 32]));
    let ports: Vec<u16> = (0..8).map(|_| syn(&mut st, Instant::ZERO).0).collect();
    let steps: Vec<i32> = ports
        .windows(2)
        .map(|w| w[1] as i32 - w[0] as i32)
        .collect();
    // RFC 6056 Algorithm 4 moves on by at least 2 plus a random jitter.
    assert!(steps.iter().any(|&d| d != steps[0]), "{ports:?}");
    let mut sorted = ports.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ports.len(), "{ports:?}");
}

#[test]
fn connect_with_socket_options_draws_the_same_secure_isn() {
    // The socket layer's connect (options set before connect(2)) opens the same way
    // as Stack::connect: secure_tcp_seq's ISN, not the stack's plain RNG.
    let t = Instant::ZERO;
    let plain = syn(&mut stack(1, Some([1; 32])), t);
    let mut st = stack(1, Some([1; 32]));
    let opts = lowtide::tcp::sockopt::SockOptions::default();
    st.connect_with(t, addr(A, 0), addr(B, 80), &opts).unwrap();
    let s = Seg::parse(&st.poll_transmit(t).expect("SYN").packet);
    assert_eq!((s.th.src_port, s.th.seq), plain);
}
