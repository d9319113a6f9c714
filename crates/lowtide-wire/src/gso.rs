//! Generic segmentation offload: a super-packet (one IP/TCP header, up to 64 KB of
//! payload, a segment size) cut into wire segments, and receive coalescing (GRO).

use crate::checksum::{self, TCP_CHECKSUM_OFFSET};
use crate::ip::{self, IpRepr, PROTO_TCP};
use crate::tcp::{TcpFlags, TCP_HEADER_LEN};
use crate::WireError;
use std::net::IpAddr;

/// Cuts `packet` (an IPv4/IPv6 + TCP packet whose TCP checksum field may hold only the
/// pseudo-header sum) into segments of at most `gso_size` payload bytes, as a NIC with
/// TSO or Linux's `tcp_gso_segment` does: each segment gets its own IP length (IPv4: id
/// incremented per segment, header checksum), its sequence number, FIN and PSH only on
/// the last segment, CWR only on the first, and a complete TCP checksum. `gso_size` 0,
/// or a payload no longer than `gso_size`, gives one segment. Returns the number of
/// segments passed to `out`.
pub fn segment(
    packet: &[u8],
    gso_size: u16,
    mut out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let l = Layout::parse(packet, false)?;
    let payload = &packet[l.payload_start..l.end];
    let mss = gso_size as usize;
    let count = if mss == 0 || payload.len() <= mss {
        1
    } else {
        payload.len().div_ceil(mss)
    };
    let cutter = Cutter::new(packet, &l, count);
    for i in 0..count {
        let start = i * mss;
        let end = if i + 1 == count {
            payload.len()
        } else {
            start + mss
        };
        out(cutter.build(i, start, &payload[start..end]));
    }
    Ok(count)
}

/// Completes the TCP checksum of the single IPv4/IPv6 + TCP packet `packet` in place
/// (the checksum field may hold anything, e.g. the pseudo-header sum of
/// [`crate::checksum::fill_tcp_partial`]). Bytes after the IP length are ignored.
pub fn finish_checksum(packet: &mut [u8]) -> Result<(), WireError> {
    let l = Layout::parse(packet, false)?;
    checksum::fill_tcp(l.ip.src, l.ip.dst, &mut packet[l.tcp_start..l.end]);
    Ok(())
}

/// Where the headers and the payload of an IP + TCP packet lie.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// The IP header.
    ip: IpRepr,
    /// Offset of the TCP header (the IP header length).
    tcp_start: usize,
    /// Offset of the TCP payload.
    payload_start: usize,
    /// End of the IP packet (link padding excluded).
    end: usize,
}

impl Layout {
    /// Checks the IP header and the TCP data offset (options are not parsed).
    fn parse(packet: &[u8], verify_ip_csum: bool) -> Result<Layout, WireError> {
        let ip = IpRepr::parse(packet, verify_ip_csum)?;
        if ip.protocol != PROTO_TCP {
            return Err(WireError::Unsupported);
        }
        let tcp_start = ip.header_len;
        let end = tcp_start + ip.payload_len;
        let tcp = &packet[tcp_start..end];
        if tcp.len() < TCP_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let tcp_len = (tcp[12] >> 4) as usize * 4;
        if tcp_len < TCP_HEADER_LEN || tcp_len > tcp.len() {
            return Err(WireError::Malformed);
        }
        Ok(Layout {
            ip,
            tcp_start,
            payload_start: tcp_start + tcp_len,
            end,
        })
    }

    fn is_v4(&self) -> bool {
        matches!(self.ip.src, IpAddr::V4(_))
    }

    fn payload_len(&self) -> usize {
        self.end - self.payload_start
    }
}

/// Byte offsets inside the TCP header (RFC 9293 section 3.1).
const TCP_SEQ: usize = 4;
const TCP_FLAGS: usize = 13;
const TCP_URGENT: usize = 18;

/// Reads a big-endian `u16` at `at` (caller checked the length).
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian `u32` at `at` (caller checked the length).
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes the IP length field(s) of `packet` for its current length (up to `end` =
/// `packet.len()`), and the IPv4 header checksum.
fn set_ip_len(packet: &mut [u8], l: &Layout, ipv4_id: Option<u16>) {
    let len = packet.len();
    if l.is_v4() {
        packet[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        if let Some(id) = ipv4_id {
            packet[4..6].copy_from_slice(&id.to_be_bytes());
        }
        ip::fill_ipv4_checksum(&mut packet[..l.tcp_start]);
    } else {
        let payload = (len - l.tcp_start) as u16;
        packet[4..6].copy_from_slice(&payload.to_be_bytes());
    }
}

/// What every segment of one super-packet shares.
struct Cutter<'a> {
    headers: &'a [u8],
    layout: Layout,
    count: usize,
    seq: u32,
    flags: u8,
    ipv4_id: u16,
    /// Pseudo-header sum without the length.
    pseudo: u64,
}

impl<'a> Cutter<'a> {
    fn new(packet: &'a [u8], l: &Layout, count: usize) -> Cutter<'a> {
        let tcp = &packet[l.tcp_start..];
        Cutter {
            headers: &packet[..l.payload_start],
            layout: *l,
            count,
            seq: be32(tcp, TCP_SEQ),
            flags: tcp[TCP_FLAGS],
            ipv4_id: be16(packet, 4),
            pseudo: checksum::pseudo_header(l.ip.src, l.ip.dst, PROTO_TCP, 0),
        }
    }

    /// Segment `i`, carrying `chunk` which starts `offset` bytes into the payload.
    fn build(&self, i: usize, offset: usize, chunk: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.headers.len() + chunk.len());
        v.extend_from_slice(self.headers);
        v.extend_from_slice(chunk);
        let id = self
            .layout
            .is_v4()
            .then(|| self.ipv4_id.wrapping_add(i as u16));
        set_ip_len(&mut v, &self.layout, id);
        let tcp = &mut v[self.layout.tcp_start..];
        let seq = self.seq.wrapping_add(offset as u32);
        tcp[TCP_SEQ..TCP_SEQ + 4].copy_from_slice(&seq.to_be_bytes());
        tcp[TCP_FLAGS] = self.flags_for(i);
        let c = !checksum::fold(self.tcp_sum(tcp));
        tcp[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
        v
    }

    /// FIN and PSH only on the last segment, CWR only on the first (as Linux's
    /// `tcp_gso_segment`).
    fn flags_for(&self, i: usize) -> u8 {
        let mut f = self.flags;
        if i + 1 != self.count {
            f &= !(TcpFlags::FIN.0 | TcpFlags::PSH.0);
        }
        if i != 0 {
            f &= !TcpFlags::CWR.0;
        }
        f
    }

    /// Sum of the TCP header + payload with the checksum field zeroed, plus the
    /// pseudo-header.
    fn tcp_sum(&self, tcp: &mut [u8]) -> u64 {
        tcp[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].fill(0);
        checksum::sum(tcp, self.pseudo + tcp.len() as u64)
    }
}

/// Appends the payload of `seg` to the super-packet `acc` if `seg` continues it the way
/// Linux's `tcp_gro_receive` requires (same addresses and ports, in-order sequence
/// number, same ack and window, identical options, only ACK/PSH flags, a full-sized
/// previous segment, total at most `max_len`). Fixes `acc`'s IP length (and IPv4 header
/// checksum); the TCP checksum of `acc` is left stale, so the caller hands the result
/// to the stack as already verified. Returns false (and leaves `acc` alone) if not.
///
/// The rules, all of which must hold:
/// - both parse as IP + TCP; `seg`'s IPv4 header checksum and TCP checksum verify
///   (the caller must have verified the first packet of `acc` itself);
/// - the IP headers are equal except for the length, IPv4 id and header checksum
///   (addresses, TOS/traffic class, flow label, TTL/hop limit, DF, IPv4 options);
/// - the TCP headers are equal in ports, ack number, data offset, window and option
///   bytes (timestamps included), and `seg.seq == acc.seq + acc's payload length`;
/// - `acc`'s flags are at most ACK, `seg`'s at most ACK|PSH, with the same ACK bit
///   (SYN, FIN, RST, URG, ECE, CWR never merge); a `seg` with PSH is merged and sets
///   PSH on `acc`, which then accepts nothing more;
/// - both payloads are non-empty; with `gso_size` the payload length of the first
///   segment of `acc`, `seg`'s payload is at most `gso_size` and every segment merged
///   so far was exactly `gso_size` (after a shorter one, nothing more merges);
/// - the merged packet is at most `max_len` bytes and its IP length fits in 16 bits.
///
/// To remember `gso_size`, a merged `acc` carries it in the TCP urgent pointer (which
/// is meaningless without URG, RFC 9293 section 3.1); read it with
/// [`merged_segment_size`]. Link padding after `acc`'s IP packet is dropped on merge.
pub fn gro_merge(acc: &mut Vec<u8>, seg: &[u8], max_len: usize) -> bool {
    let Ok(a) = Layout::parse(acc, false) else {
        return false;
    };
    let Ok(s) = Layout::parse(seg, true) else {
        return false;
    };
    let Some(gso_size) = merged_segment_size_of(acc, &a) else {
        return false;
    };
    let ok = same_ip_header(acc, seg, &a, &s)
        && same_tcp_header(acc, seg, &a, &s)
        && flags_allow(acc, seg, &a, &s)
        && sizes_allow(&a, &s, gso_size, max_len)
        && checksum::verify_tcp(s.ip.src, s.ip.dst, &seg[s.tcp_start..s.end]);
    if ok {
        append(acc, seg, &a, &s, gso_size);
    }
    ok
}

/// The segment size of a packet built by [`gro_merge`]: the payload length of its
/// first segment; for a packet `gro_merge` has not extended, its payload length (or
/// its urgent pointer, if that is below the payload length and URG is not set).
/// `None` if `packet` does not parse or has no payload.
pub fn merged_segment_size(packet: &[u8]) -> Option<u16> {
    let l = Layout::parse(packet, false).ok()?;
    merged_segment_size_of(packet, &l)
}

fn merged_segment_size_of(packet: &[u8], l: &Layout) -> Option<u16> {
    let payload = l.payload_len();
    if payload == 0 || payload > u16::MAX as usize {
        return None;
    }
    let tcp = &packet[l.tcp_start..];
    let urgent = be16(tcp, TCP_URGENT);
    let urg = tcp[TCP_FLAGS] & TcpFlags::URG.0 != 0;
    if !urg && urgent != 0 && (urgent as usize) < payload {
        Some(urgent)
    } else {
        Some(payload as u16)
    }
}

/// The IP headers match except for length, id and checksum fields.
fn same_ip_header(acc: &[u8], seg: &[u8], a: &Layout, s: &Layout) -> bool {
    if a.tcp_start != s.tcp_start || a.is_v4() != s.is_v4() {
        return false;
    }
    let hl = a.tcp_start;
    if a.is_v4() {
        // Skips total length (2..4), identification (4..6) and checksum (10..12).
        acc[..2] == seg[..2] && acc[6..10] == seg[6..10] && acc[12..hl] == seg[12..hl]
    } else {
        // Skips the payload length (4..6).
        acc[..4] == seg[..4] && acc[6..hl] == seg[6..hl]
    }
}

/// Ports, ack, data offset, window and options match, and `seg` is the next data.
fn same_tcp_header(acc: &[u8], seg: &[u8], a: &Layout, s: &Layout) -> bool {
    let (ta, ts) = (
        &acc[a.tcp_start..a.payload_start],
        &seg[s.tcp_start..s.payload_start],
    );
    let next = be32(ta, TCP_SEQ).wrapping_add(a.payload_len() as u32);
    ta.len() == ts.len()
        && ta[..4] == ts[..4]
        && ta[8..13] == ts[8..13]
        && ta[14..16] == ts[14..16]
        && ta[20..] == ts[20..]
        && be32(ts, TCP_SEQ) == next
}

/// Only ACK (and PSH on `seg`) may be set; a PSH on `acc` closes it.
fn flags_allow(acc: &[u8], seg: &[u8], a: &Layout, s: &Layout) -> bool {
    let fa = acc[a.tcp_start + TCP_FLAGS];
    let fs = seg[s.tcp_start + TCP_FLAGS];
    let ack = TcpFlags::ACK.0;
    fa & !ack == 0 && fs & !(ack | TcpFlags::PSH.0) == 0 && (fa ^ fs) & ack == 0
}

/// Segment-size and total-length rules.
fn sizes_allow(a: &Layout, s: &Layout, gso_size: u16, max_len: usize) -> bool {
    let (p, len, g) = (a.payload_len(), s.payload_len(), gso_size as usize);
    let ip_len = if a.is_v4() {
        a.end
    } else {
        a.end - a.tcp_start
    };
    len > 0 && len <= g && p % g == 0 && a.end + len <= max_len && ip_len + len <= u16::MAX as usize
}

/// Appends `seg`'s payload and fixes `acc`'s lengths, PSH and recorded segment size.
fn append(acc: &mut Vec<u8>, seg: &[u8], a: &Layout, s: &Layout, gso_size: u16) {
    acc.truncate(a.end);
    acc.extend_from_slice(&seg[s.payload_start..s.end]);
    set_ip_len(acc, a, None);
    let tcp = &mut acc[a.tcp_start..];
    tcp[TCP_FLAGS] |= seg[s.tcp_start + TCP_FLAGS] & TcpFlags::PSH.0;
    tcp[TCP_URGENT..TCP_URGENT + 2].copy_from_slice(&gso_size.to_be_bytes());
}
