//! `net.ipv4.tcp_reflect_tos` (tcp_ipv4.c, tcp_ipv6.c): a request's SYN-ACK and the
//! child it makes carry the SYN's TOS / traffic class less its ECN bits
//! (`tcp_v4_send_synack`, `tcp_v4_syn_recv_sock` and their IPv6 twins); a SYN
//! cookie's child takes the ACK's (`cookie_tcp_reqsk_init`), a Fast Open child its
//! SYN's at once. A request's ACK reflects the segment it answers either way
//! (`tcp_v4_reqsk_send_ack`). Linux 6.18: tests/packetdrill/reflect-tos-*.pkt.

use crate::common::*;
use lowtide::{Config, Instant, RxChecksum, SocketHandle, Stack};
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{TcpFlags as F, TcpOptions, TcpRepr};

const ISN: u32 = 100;

/// The peer and the local address of each family's test.
const FAMILIES: [(&str, &str); 2] = [("10.0.0.1", "10.0.0.2"), ("fd00::1", "fd00::2")];

/// A stack at `local` listening on port 80 with `sysctls` set.
fn listening(local: &str, sysctls: &[(&str, &str)]) -> (Stack, SocketHandle) {
    let mut st = Stack::new(Config::default(), 2);
    st.add_address(local.parse().unwrap());
    for (name, value) in sysctls {
        st.set_sysctl(Instant::ZERO, name, value).unwrap();
    }
    let l = st.listen(addr(local, 80), 8).unwrap();
    (st, l)
}

/// [`listening`] with `tcp_reflect_tos` 1 and `also`.
fn reflecting(local: &str, also: (&str, &str)) -> (Stack, SocketHandle) {
    listening(local, &[("net.ipv4.tcp_reflect_tos", "1"), also])
}

/// Delivers `th` (and `payload`) from `peer`:4000 to `local`:80 with the DS field
/// `tos` (ECN bits included) and returns what the stack sends in reply.
fn inject(
    st: &mut Stack,
    (peer, local): (&str, &str),
    th: &TcpRepr,
    payload: &[u8],
    tos: u8,
) -> Vec<Seg> {
    let th = TcpRepr {
        src_port: 4000,
        dst_port: 80,
        ..*th
    };
    let mut pkt = build(addr(peer, 4000), addr(local, 80), &th, payload, 1);
    set_dsfield(&mut pkt, tos);
    st.handle_packet(Instant::ZERO, &pkt, RxChecksum::Verify);
    take(st)
}

/// Everything the stack has to send now, parsed.
fn take(st: &mut Stack) -> Vec<Seg> {
    let mut out = Vec::new();
    while let Some(tx) = st.poll_transmit(Instant::ZERO) {
        out.extend(tx.segments().iter().map(|p| Seg::parse(p)));
        st.handle_tx_complete(Instant::ZERO, tx.token);
    }
    out
}

/// The DS field of a parsed packet, ECN bits included.
fn ds(ip: &IpRepr) -> u8 {
    ip.tos | ip.ecn
}

fn syn() -> TcpRepr {
    TcpRepr {
        seq: ISN,
        flags: F::SYN,
        window: 32792,
        options: TcpOptions {
            mss: Some(1000),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A segment from the peer in the handshake's sequence space, acknowledging the
/// SYN-ACK `sa`.
fn after(sa: &TcpRepr, flags: F, seq_off: u32) -> TcpRepr {
    TcpRepr {
        seq: ISN + 1 + seq_off,
        ack: sa.seq.wrapping_add(1),
        flags,
        window: 32792,
        ..Default::default()
    }
}

/// The handshake with the SYN's DS field 0x2b (AF31 with CE) and the final ACK's
/// 0xb9: with the sysctl the SYN-ACK and the child's data carry 0x28, without it
/// the listener's 0. The final ACK's own TOS never counts.
#[test]
fn the_synack_and_the_child_reflect_the_syn() {
    for (reflect, want) in [("1", 0x28), ("0", 0x00)] {
        for fam in FAMILIES {
            let (mut st, l) = listening(fam.1, &[("net.ipv4.tcp_reflect_tos", reflect)]);
            let out = inject(&mut st, fam, &syn(), &[], 0x2b);
            assert_eq!(out.len(), 1, "{fam:?}: the SYN-ACK");
            let sa = out[0].th;
            assert_eq!(ds(&out[0].ip), want, "{fam:?} reflect {reflect}: SYN-ACK");
            assert!(inject(&mut st, fam, &after(&sa, F::ACK, 0), &[], 0xb9).is_empty());
            let s = st.accept(l).unwrap();
            st.send(Instant::ZERO, s, &[7; 100]).unwrap();
            let data = take(&mut st);
            assert_eq!(data[0].payload.len(), 100);
            assert_eq!(ds(&data[0].ip), want, "{fam:?} reflect {reflect}: data");
        }
    }
}

/// A request answers an out-of-window segment with an ACK carrying that
/// segment's TOS less ECN (tcp_v4_reqsk_send_ack's `ip_hdr(skb)->tos &
/// ~INET_ECN_MASK`), the sysctl either way; the SYN-ACK it retransmits later still
/// reflects the SYN.
#[test]
fn a_requests_ack_reflects_the_segment_it_answers() {
    for (reflect, synack) in [("1", 0x28), ("0", 0x00)] {
        for fam in FAMILIES {
            let (mut st, _) = listening(fam.1, &[("net.ipv4.tcp_reflect_tos", reflect)]);
            let sa = inject(&mut st, fam, &syn(), &[], 0x2b)[0].th;
            let out = inject(&mut st, fam, &after(&sa, F::ACK, 200_000), &[], 0x49);
            assert_eq!(out.len(), 1, "{fam:?}: an ACK");
            assert!(out[0].is_pure_ack());
            assert_eq!(ds(&out[0].ip), 0x48, "{fam:?} reflect {reflect}");
            let at = st.poll_timeout().expect("the SYN-ACK timer");
            st.handle_timeout(at);
            let tx = st.poll_transmit(at).expect("the SYN-ACK again");
            let again = Seg::parse(&tx.packet);
            assert!(again.has(F::SYN | F::ACK));
            assert_eq!(
                ds(&again.ip),
                synack,
                "{fam:?} reflect {reflect}: retransmitted"
            );
        }
    }
}

/// SYN cookies (tcp_syncookies 2): the cookie's SYN-ACK reflects the SYN, the
/// child rebuilt from the cookie the ACK that brought it back
/// (`cookie_tcp_reqsk_init`'s `syn_tos`).
#[test]
fn a_cookie_child_takes_the_acks_tos() {
    for fam in FAMILIES {
        let (mut st, l) = reflecting(fam.1, ("net.ipv4.tcp_syncookies", "2"));
        let out = inject(&mut st, fam, &syn(), &[], 0x2b);
        assert_eq!(ds(&out[0].ip), 0x28, "{fam:?}: the cookie's SYN-ACK");
        assert!(inject(&mut st, fam, &after(&out[0].th, F::ACK, 0), &[], 0x4a).is_empty());
        let s = st.accept(l).expect("the cookie's child");
        st.send(Instant::ZERO, s, &[7; 100]).unwrap();
        assert_eq!(ds(&take(&mut st)[0].ip), 0x48, "{fam:?}: the ACK's TOS");
    }
}

/// A Fast Open child (tcp_fastopen 0x602: no cookie needed) is made at its SYN:
/// its TOS is the SYN's from there, for the SYN-ACK, its data in SYN-RECV and
/// after the final ACK.
#[test]
fn a_fast_open_child_reflects_its_syn_at_once() {
    for fam in FAMILIES {
        let (mut st, l) = reflecting(fam.1, ("net.ipv4.tcp_fastopen", "0x602"));
        let out = inject(&mut st, fam, &syn(), b"0123456789", 0x6a);
        assert_eq!(out[0].th.ack, ISN + 11, "{fam:?}: the SYN's data taken");
        assert_eq!(ds(&out[0].ip), 0x68, "{fam:?}: SYN-ACK");
        let s = st.accept(l).unwrap();
        st.send(Instant::ZERO, s, &[7; 100]).unwrap();
        assert_eq!(ds(&take(&mut st)[0].ip), 0x68, "{fam:?}: data in SYN-RECV");
        let ack = TcpRepr {
            ack: out[0].th.seq.wrapping_add(101),
            ..after(&out[0].th, F::ACK, 10)
        };
        inject(&mut st, fam, &ack, &[], 0x11);
        st.send(Instant::ZERO, s, &[7; 100]).unwrap();
        assert_eq!(ds(&take(&mut st)[0].ip), 0x68, "{fam:?}: data established");
    }
}
