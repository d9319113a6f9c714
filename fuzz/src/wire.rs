//! The wire parsers: IPv4/IPv6 headers, TCP headers and options, GSO segmentation,
//! GRO merging and the virtio-net header, with round-trip oracles.
//!
//! Input: byte 0 picks a GSO segment size (`byte * 8`, 0 = none); the rest is a
//! packet as the stack or the TUN device would receive it.

use lowtide_tun::vnet::{finish_rx_checksum, VnetHdr};
use lowtide_wire::checksum;
use lowtide_wire::gso;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{four_tuple, TcpRepr};

/// One fuzz case (panics on a finding).
pub fn run(data: &[u8]) {
    let Some((&mode, pkt)) = data.split_first() else {
        return;
    };
    let gso_size = mode as u16 * 8;
    for verify in [false, true] {
        if let Ok(ip) = IpRepr::parse(pkt, verify) {
            check_ip(pkt, &ip);
        }
    }
    tcp_round_trip(pkt);
    let _ = four_tuple(pkt);
    segments(pkt, gso_size);
    let mut copy = pkt.to_vec();
    if gso::finish_checksum(&mut copy).is_ok() {
        let ip = IpRepr::parse(&copy, false).expect("finish_checksum accepted it");
        let seg = &copy[ip.header_len..ip.header_len + ip.payload_len];
        assert!(
            checksum::verify_tcp(ip.src, ip.dst, seg),
            "checksum not completed"
        );
    }
    let _ = gso::merged_segment_size(pkt);
    vnet(data, gso_size);
}

/// A parsed IP header lies inside the packet and survives emit + parse.
fn check_ip(pkt: &[u8], ip: &IpRepr) {
    assert!(
        ip.header_len + ip.payload_len <= pkt.len(),
        "IP lengths past the packet"
    );
    let seg = &pkt[ip.header_len..ip.header_len + ip.payload_len];
    tcp_round_trip(seg);
    let _ = checksum::verify_tcp(ip.src, ip.dst, seg);
    let mut buf = vec![0u8; ip.emit_len() + ip.payload_len];
    ip.emit(&mut buf, 7);
    let again = IpRepr::parse(&buf, true).expect("emitted IP header parses");
    assert_eq!(
        (
            again.src,
            again.dst,
            again.protocol,
            again.hop_limit,
            again.ecn,
            again.payload_len
        ),
        (
            ip.src,
            ip.dst,
            ip.protocol,
            ip.hop_limit,
            ip.ecn,
            ip.payload_len
        ),
        "IP round trip"
    );
}

/// A parsed TCP header lies inside the segment and survives emit + parse (SACK blocks
/// and AccECN fields that do not fit beside the other options are dropped by `emit`,
/// as documented).
fn tcp_round_trip(seg: &[u8]) {
    let Ok((repr, hlen)) = TcpRepr::parse(seg) else {
        return;
    };
    assert!(
        (20..=60).contains(&hlen) && hlen <= seg.len(),
        "TCP header length"
    );
    assert!(repr.options.sack_len <= 4, "too many SACK blocks");
    // A received TCP-MD5 option is left out of the round trip: written with
    // lowtide's padding, it and the other options may pass 40 bytes (only our own
    // segments carry it, laid out to fit).
    let mut repr = repr;
    repr.options.md5sig = None;
    let mut buf = vec![0u8; repr.header_len()];
    repr.emit(&mut buf);
    let (again, _) = TcpRepr::parse(&buf).expect("emitted TCP header parses");
    let mut want = repr;
    // `auth` is what was received, never written (tcp.rs).
    want.options.auth = Default::default();
    want.options.sack_len = repr.emitted_sack_blocks() as u8;
    want.options.accecn = repr.emitted_accecn();
    for b in &mut want.options.sack[want.options.sack_len as usize..] {
        *b = Default::default();
    }
    let mut got = again;
    for b in &mut got.options.sack[got.options.sack_len as usize..] {
        *b = Default::default();
    }
    assert_eq!(got, want, "TCP round trip");
}

/// GSO cuts a packet into segments that parse, carry valid checksums and together
/// hold the original payload in order; GRO merges them back (when it agrees to) into
/// the concatenation of their payloads.
fn segments(pkt: &[u8], gso_size: u16) {
    let mut segs = Vec::new();
    let Ok(n) = gso::segment(pkt, gso_size, |s| segs.push(s)) else {
        return;
    };
    assert_eq!(n, segs.len());
    let ip = IpRepr::parse(pkt, false).expect("segment() accepted it");
    let hlen = data_offset(&pkt[ip.header_len..]);
    let payload = &pkt[ip.header_len + hlen..ip.header_len + ip.payload_len];
    let mut joined = Vec::new();
    let mut merged: Option<Vec<u8>> = None;
    for s in &segs {
        let sip = IpRepr::parse(s, true).expect("GSO segment parses");
        let tcp = &s[sip.header_len..sip.header_len + sip.payload_len];
        assert!(
            checksum::verify_tcp(sip.src, sip.dst, tcp),
            "GSO segment checksum"
        );
        let body = &tcp[data_offset(tcp)..];
        assert!(gso_size == 0 || n == 1 || body.len() <= gso_size as usize);
        joined.extend_from_slice(body);
        match &mut merged {
            None => merged = Some(s.clone()),
            Some(acc) => {
                let before = payload_of(acc);
                if gso::gro_merge(acc, s, 65_535) {
                    let mut want = before;
                    want.extend_from_slice(body);
                    assert_eq!(payload_of(acc), want, "GRO merged payload");
                }
            }
        }
    }
    assert_eq!(joined, payload, "GSO payload");
}

fn payload_of(pkt: &[u8]) -> Vec<u8> {
    let ip = IpRepr::parse(pkt, false).expect("own packet parses");
    let tcp = &pkt[ip.header_len..ip.header_len + ip.payload_len];
    tcp[data_offset(tcp)..].to_vec()
}

/// The TCP header length from the data offset (options are not parsed: GSO copies
/// them as they are, malformed or not).
fn data_offset(tcp: &[u8]) -> usize {
    (tcp[12] >> 4) as usize * 4
}

/// The virtio-net header: parse, emit round trip, checksum completion within bounds,
/// and the header lowtide would send for the packet after it.
fn vnet(data: &[u8], gso_size: u16) {
    let Ok((hdr, rest)) = VnetHdr::parse(data) else {
        return;
    };
    assert_eq!(
        &hdr.to_bytes()[..],
        &data[..VnetHdr::LEN],
        "vnet round trip"
    );
    let _ = (hdr.rx_checksum(), hdr.is_gso(), hdr.needs_csum());
    let mut pkt = rest.to_vec();
    let _ = finish_rx_checksum(&hdr, &mut pkt);
    if let Ok(tx) = VnetHdr::for_transmit(rest, gso_size) {
        let l = tx.csum_start as usize + tx.csum_offset as usize;
        assert!(
            l + 2 <= rest.len(),
            "for_transmit checksum field outside the packet"
        );
        assert!(tx.hdr_len as usize <= rest.len(), "for_transmit hdr_len");
    }
}
