//! Generic segmentation offload: a super-packet (one IP/TCP header, up to 64 KB of
//! payload, a segment size) cut into wire segments, and receive coalescing (GRO).

use crate::checksum::{self, TCP_CHECKSUM_OFFSET};
use crate::ip::{IpRepr, PROTO_TCP};
use crate::tcp::{TcpFlags, TCP_HEADER_LEN};
use crate::WireError;
use std::net::IpAddr;

/// How a super-packet is cut: its segment size (`gso_size`; 0: one segment) and
/// whether it is `SKB_GSO_TCP_ACCECN` (an AccECN sender's, whose CWR is part of the
/// ACE field and stays on every segment). A bare `u16` is the size of a packet
/// without it (`SKB_GSO_TCP_ECN`'s rule: CWR on the first segment only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gso {
    /// Payload bytes per segment.
    pub size: u16,
    /// `SKB_GSO_TCP_ACCECN`.
    pub tcp_accecn: bool,
}

impl From<u16> for Gso {
    fn from(size: u16) -> Gso {
        Gso {
            size,
            tcp_accecn: false,
        }
    }
}

/// Cuts `packet` (an IPv4/IPv6 + TCP packet whose TCP checksum field may hold only the
/// pseudo-header sum) into segments of at most `gso_size` payload bytes, as a NIC with
/// TSO or Linux's `tcp_gso_segment` does: each segment gets its own IP length (IPv4: id
/// incremented per segment, header checksum), its sequence number, FIN and PSH only on
/// the last segment, CWR only on the first unless the packet is
/// `SKB_GSO_TCP_ACCECN` (`th->cwr &= ecn_cwr_mask`; AE and ECE are copied to every
/// segment either way), and a complete TCP checksum. `gso_size` 0, or a payload no
/// longer than it, gives one segment. Returns the number of segments passed to `out`.
pub fn segment(
    packet: &[u8],
    gso_size: impl Into<Gso>,
    out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    cut(packet, gso_size.into(), true, out)
}

/// [`segment`] for a receiver that will not check the TCP checksum (Linux's veth
/// between namespaces, the simulator without corruption): each segment's checksum
/// field is left CHECKSUM_PARTIAL, the pseudo-header sum of its own length as
/// [`checksum::fill_tcp_partial`] writes it (Linux's `skb_segment` leaves GSO
/// segments CHECKSUM_PARTIAL for a device with `NETIF_F_HW_CSUM`, and veth passes
/// them on unchecked), instead of summing the payload. [`finish_checksum`] completes
/// one.
pub fn segment_csum_partial(
    packet: &[u8],
    gso_size: impl Into<Gso>,
    out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    cut(packet, gso_size.into(), false, out)
}

fn cut(
    packet: &[u8],
    gso_size: Gso,
    full_csum: bool,
    out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    segment_into(packet, gso_size, full_csum, Vec::with_capacity, out)
}

/// [`segment`] (`full_csum`) or [`segment_csum_partial`] building each segment in a
/// buffer from `take(len)` (an empty `Vec` with room for `len` bytes, e.g. from a
/// [`crate::pool::BufPool`]) instead of a new allocation.
pub fn segment_into(
    packet: &[u8],
    gso_size: impl Into<Gso>,
    full_csum: bool,
    take: impl FnMut(usize) -> Vec<u8>,
    out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let l = Layout::parse(packet, false)?;
    let payload = &packet[l.payload_start..l.end];
    cut_parts(packet, &l, payload, gso_size.into(), full_csum, take, out)
}

/// [`segment_into`] for a super-packet whose payload is kept apart from its headers
/// (as a stack's send queue holds it): `headers` is exactly the IP and TCP header,
/// its length fields counting `payload`. The payload is copied once, straight into
/// the segments (as Linux's `skb_segment` copies from page fragments).
pub fn segment_apart_into(
    headers: &[u8],
    payload: &[u8],
    gso_size: impl Into<Gso>,
    full_csum: bool,
    take: impl FnMut(usize) -> Vec<u8>,
    out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let l = Layout::of_apart(headers, payload.len())?;
    cut_parts(headers, &l, payload, gso_size.into(), full_csum, take, out)
}

/// [`segment_apart_into`] without copying the payload, for a device that sends each
/// segment's payload by reference (scatter-gather, as a NIC reads an skb's page
/// fragments): `out(head, range)` gets each segment's headers, in a buffer from
/// `take(len)` with room for the whole segment (so that it can be completed in place
/// later), and the range of `payload` the segment carries.
pub fn segment_headers_into(
    headers: &[u8],
    payload: &[u8],
    gso_size: impl Into<Gso>,
    full_csum: bool,
    mut take: impl FnMut(usize) -> Vec<u8>,
    mut out: impl FnMut(Vec<u8>, core::ops::Range<usize>),
) -> Result<usize, WireError> {
    let l = Layout::of_apart(headers, payload.len())?;
    let cut = |c: &Cutter, i: usize, r: core::ops::Range<usize>| {
        let mut v = take(c.headers.len() + r.len());
        v.clear();
        c.build_head(&mut v, i, r.start, &payload[r.clone()]);
        out(v, r);
    };
    Ok(for_each_segment(
        headers,
        &l,
        payload.len(),
        gso_size.into(),
        full_csum,
        cut,
    ))
}

/// Calls `f(cutter, i, range)` for each segment `i` of a payload of `len` bytes cut
/// at `gso_size`, `range` being its part of the payload; returns the count.
fn for_each_segment(
    headers: &[u8],
    l: &Layout,
    len: usize,
    gso: Gso,
    full_csum: bool,
    mut f: impl FnMut(&Cutter, usize, core::ops::Range<usize>),
) -> usize {
    let mss = gso.size as usize;
    let count = if mss == 0 || len <= mss {
        1
    } else {
        len.div_ceil(mss)
    };
    let mut cutter = Cutter::new(headers, l, count);
    cutter.full_csum = full_csum;
    cutter.keep_cwr = gso.tcp_accecn;
    for i in 0..count {
        let start = i * mss;
        let end = if i + 1 == count { len } else { start + mss };
        f(&cutter, i, start..end);
    }
    count
}

/// Cuts `payload` into segments behind copies of `headers` (see [`segment`]).
fn cut_parts(
    headers: &[u8],
    l: &Layout,
    payload: &[u8],
    gso_size: Gso,
    full_csum: bool,
    mut take: impl FnMut(usize) -> Vec<u8>,
    mut out: impl FnMut(Vec<u8>),
) -> Result<usize, WireError> {
    let cut = |c: &Cutter, i: usize, r: core::ops::Range<usize>| {
        let mut v = take(c.headers.len() + r.len());
        v.clear();
        c.build(&mut v, i, r.start, &payload[r]);
        out(v);
    };
    Ok(for_each_segment(
        headers,
        l,
        payload.len(),
        gso_size,
        full_csum,
        cut,
    ))
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
        Layout::of(packet, ip)
    }

    /// [`Layout::parse`] of headers whose last `apart` bytes (payload) lie elsewhere.
    fn parse_apart(headers: &[u8], apart: usize) -> Result<Layout, WireError> {
        let ip = IpRepr::parse_apart(headers, apart, false)?;
        Layout::of(headers, ip)
    }

    /// [`Layout::parse_apart`] of headers that end exactly where their payload starts.
    fn of_apart(headers: &[u8], apart: usize) -> Result<Layout, WireError> {
        let l = Layout::parse_apart(headers, apart)?;
        if l.payload_start != headers.len() || l.end != headers.len() + apart {
            return Err(WireError::Malformed);
        }
        Ok(l)
    }

    /// [`Layout::parse_apart`] that also verifies an IPv4 header checksum.
    fn parse_apart_verified(headers: &[u8], apart: usize) -> Result<Layout, WireError> {
        let ip = IpRepr::parse_apart(headers, apart, true)?;
        Layout::of(headers, ip)
    }

    fn of(packet: &[u8], ip: IpRepr) -> Result<Layout, WireError> {
        if ip.protocol != PROTO_TCP {
            return Err(WireError::Unsupported);
        }
        let tcp_start = ip.header_len;
        let end = tcp_start + ip.payload_len;
        let tcp = &packet[tcp_start..end.min(packet.len())];
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

/// Byte offsets inside the TCP header
/// ([RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1)).
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

/// The sum of an IPv4 header's words but the total length, identification and
/// checksum: with those added, the header checksum of any packet with this header.
///
/// Summed before those fields are rewritten, and for a whole super-packet once: a load
/// that straddles a field just written cannot be served from the store buffer and
/// stalls (this sum over the freshly written header was ~9 % of a simulator profile).
fn ipv4_rest_sum(header: &[u8]) -> u64 {
    let sum = checksum::sum;
    sum(&header[..2], sum(&header[6..10], sum(&header[12..], 0)))
}

/// Writes the IP length field(s) of `packet` for its current length, and for IPv4 the
/// identification `id` and the header checksum from `rest` ([`ipv4_rest_sum`]): the
/// same checksum as summing the written header (RFC 1071: the sum is associative).
fn write_ip_len(packet: &mut [u8], l: &Layout, id: u16, rest: u64) {
    write_ip_len_as(packet, l, id, rest, packet.len());
}

/// [`write_ip_len`] for a packet of `len` bytes of which `packet` holds the headers.
fn write_ip_len_as(packet: &mut [u8], l: &Layout, id: u16, rest: u64, len: usize) {
    if l.is_v4() {
        let c = !checksum::fold(rest + len as u64 + id as u64);
        packet[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        packet[4..6].copy_from_slice(&id.to_be_bytes());
        packet[10..12].copy_from_slice(&c.to_be_bytes());
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
    /// [`ipv4_rest_sum`] of the IPv4 header (0 for IPv6).
    ip_rest: u64,
    /// Pseudo-header sum without the length.
    pseudo: u64,
    /// Complete TCP checksums (else CHECKSUM_PARTIAL ones).
    full_csum: bool,
    /// `SKB_GSO_TCP_ACCECN`: CWR stays on every segment.
    keep_cwr: bool,
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
            ip_rest: match l.is_v4() {
                true => ipv4_rest_sum(&packet[..l.tcp_start]),
                false => 0,
            },
            pseudo: checksum::pseudo_header(l.ip.src, l.ip.dst, PROTO_TCP, 0),
            full_csum: true,
            keep_cwr: false,
        }
    }

    /// Segment `i`, carrying `chunk` which starts `offset` bytes into the payload.
    fn build(&self, v: &mut Vec<u8>, i: usize, offset: usize, chunk: &[u8]) {
        v.extend_from_slice(self.headers);
        v.extend_from_slice(chunk);
        let id = self.ipv4_id.wrapping_add(i as u16);
        write_ip_len(v, &self.layout, id, self.ip_rest);
        let tcp = &mut v[self.layout.tcp_start..];
        let seq = self.seq.wrapping_add(offset as u32);
        tcp[TCP_SEQ..TCP_SEQ + 4].copy_from_slice(&seq.to_be_bytes());
        tcp[TCP_FLAGS] = self.flags_for(i);
        let c = match self.full_csum {
            true => !checksum::fold(self.tcp_sum(tcp)),
            false => checksum::fold(self.pseudo + tcp.len() as u64),
        };
        tcp[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// The headers of segment `i` (as [`Cutter::build`]) without its payload
    /// `chunk`, which the lengths and the checksum count.
    fn build_head(&self, v: &mut Vec<u8>, i: usize, offset: usize, chunk: &[u8]) {
        v.extend_from_slice(self.headers);
        let id = self.ipv4_id.wrapping_add(i as u16);
        let len = v.len() + chunk.len();
        write_ip_len_as(v, &self.layout, id, self.ip_rest, len);
        let tcp = &mut v[self.layout.tcp_start..];
        let seq = self.seq.wrapping_add(offset as u32);
        tcp[TCP_SEQ..TCP_SEQ + 4].copy_from_slice(&seq.to_be_bytes());
        tcp[TCP_FLAGS] = self.flags_for(i);
        let tcp_len = (tcp.len() + chunk.len()) as u64;
        let c = match self.full_csum {
            true => {
                tcp[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].fill(0);
                let head = checksum::sum(tcp, self.pseudo + tcp_len);
                !checksum::fold(checksum::sum(chunk, head))
            }
            false => checksum::fold(self.pseudo + tcp_len),
        };
        tcp[TCP_CHECKSUM_OFFSET..TCP_CHECKSUM_OFFSET + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// FIN and PSH only on the last segment, CWR only on the first unless
    /// `SKB_GSO_TCP_ACCECN` (as Linux's `tcp_gso_segment`).
    fn flags_for(&self, i: usize) -> u8 {
        let mut f = self.flags;
        if i + 1 != self.count {
            f &= !((TcpFlags::FIN.0 as u8) | (TcpFlags::PSH.0 as u8));
        }
        if i != 0 && !self.keep_cwr {
            f &= !(TcpFlags::CWR.0 as u8);
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
/// is meaningless without URG,
/// [RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1)); read it
/// with [`merged_segment_size`]. Link padding after `acc`'s IP packet is dropped on merge.
pub fn gro_merge(acc: &mut Vec<u8>, seg: &[u8], max_len: usize) -> bool {
    merge(acc, seg, max_len, true)
}

/// [`gro_merge`] for a segment whose TCP checksum is known to be good
/// (`CHECKSUM_UNNECESSARY`: a medium that cannot corrupt, or a device that verified
/// it): every rule but the TCP checksum (the IPv4 header checksum is still checked,
/// as `ip_rcv` always does).
pub fn gro_merge_csum_valid(acc: &mut Vec<u8>, seg: &[u8], max_len: usize) -> bool {
    merge(acc, seg, max_len, false)
}

/// [`gro_merge_csum_valid`] for a segment whose payload lies apart from its headers
/// (`headers` is exactly its IP and TCP header, their lengths counting `payload`):
/// the payload is appended straight from where it lies.
pub fn gro_merge_apart_csum_valid(
    acc: &mut Vec<u8>,
    headers: &[u8],
    payload: &[u8],
    max_len: usize,
) -> bool {
    match Layout::parse_apart_verified(headers, payload.len()) {
        Ok(s) if s.payload_start == headers.len() => {
            merge_parts(acc, headers, payload, &s, max_len, None)
        }
        _ => false,
    }
}

fn merge(acc: &mut Vec<u8>, seg: &[u8], max_len: usize, verify_tcp: bool) -> bool {
    let Ok(s) = Layout::parse(seg, true) else {
        return false;
    };
    let verify = verify_tcp.then(|| &seg[s.tcp_start..s.end]);
    let (headers, payload) = (&seg[..s.payload_start], &seg[s.payload_start..s.end]);
    merge_parts(acc, headers, payload, &s, max_len, verify)
}

/// The rules of [`gro_merge`] for a segment of layout `s` as `headers` and
/// `payload`; `verify` is its TCP segment if its checksum is to be checked.
fn merge_parts(
    acc: &mut Vec<u8>,
    headers: &[u8],
    payload: &[u8],
    s: &Layout,
    max_len: usize,
    verify: Option<&[u8]>,
) -> bool {
    let Ok(a) = Layout::parse(acc, false) else {
        return false;
    };
    let Some(gso_size) = may_merge(acc, &a, headers, s, max_len) else {
        return false;
    };
    let ok = verify.is_none_or(|tcp| checksum::verify_tcp(s.ip.src, s.ip.dst, tcp));
    if ok {
        append_payload(acc, payload, headers[s.tcp_start + TCP_FLAGS], &a, gso_size);
    }
    ok
}

/// Every rule of [`gro_merge`] but the TCP checksum, for a segment of layout `s` with
/// headers `headers` and a held packet of layout `a` whose headers are `acc`'s start;
/// the held packet's segment size if the segment may join it.
fn may_merge(acc: &[u8], a: &Layout, headers: &[u8], s: &Layout, max_len: usize) -> Option<u16> {
    let gso_size = merged_segment_size_of(acc, a)?;
    let ok = same_ip_header(acc, headers, a, s)
        && same_tcp_header(acc, headers, a, s)
        && flags_allow(acc, headers, a, s)
        && sizes_allow(a, s, gso_size, max_len);
    ok.then_some(gso_size)
}

/// [`gro_merge_apart_csum_valid`] into a packet whose payload lies apart as well, in
/// buffers its caller keeps (`skb_gro_receive` appending a page fragment to
/// `skb_shinfo(p)->frags` instead of copying): `acc` is the held packet's IP and TCP
/// headers, whose lengths count `acc_apart` bytes of payload. If the segment may
/// join, `acc`'s lengths, PSH and recorded segment size are updated for its
/// `payload_len` more bytes and true is returned: the caller then appends the
/// segment's payload to the packet's buffers.
pub fn gro_merge_frags_csum_valid(
    acc: &mut [u8],
    acc_apart: usize,
    headers: &[u8],
    payload_len: usize,
    max_len: usize,
) -> bool {
    let (Ok(a), Ok(s)) = (
        Layout::of_apart(acc, acc_apart),
        Layout::parse_apart_verified(headers, payload_len),
    ) else {
        return false;
    };
    if s.payload_start != headers.len() {
        return false;
    }
    let Some(gso_size) = may_merge(acc, &a, headers, &s, max_len) else {
        return false;
    };
    let flags = headers[s.tcp_start + TCP_FLAGS];
    grow_headers(acc, &a, a.end + payload_len, flags, gso_size);
    true
}

/// The IP header of TCP `headers` (IP and TCP, options included) whose lengths count
/// `apart` bytes of payload kept elsewhere, if they end exactly where that payload
/// starts (how GRO and a lent device buffer hand a packet over).
pub fn tcp_headers_apart(headers: &[u8], apart: usize) -> Result<IpRepr, WireError> {
    Layout::of_apart(headers, apart).map(|l| l.ip)
}

/// The IP header and the payload range of an IP + TCP packet whose last `apart` bytes
/// (its payload) lie elsewhere: with `apart` > 0 its headers must end exactly where
/// that payload starts ([`tcp_headers_apart`]); with 0 it is a whole packet
/// ([`tcp_payload_range`]). The range counts the payload as if it followed the headers.
pub fn tcp_layout(
    headers: &[u8],
    apart: usize,
) -> Result<(IpRepr, core::ops::Range<usize>), WireError> {
    let l = match apart {
        0 => Layout::parse(headers, false)?,
        _ => Layout::of_apart(headers, apart)?,
    };
    Ok((l.ip, l.payload_start..l.end))
}

/// Where a TCP packet's payload starts (the length of its IP and TCP headers) and
/// where the IP packet ends (link padding excluded); `verify_ip_csum` also checks an
/// IPv4 header checksum.
pub fn tcp_payload_range(
    packet: &[u8],
    verify_ip_csum: bool,
) -> Result<core::ops::Range<usize>, WireError> {
    let l = Layout::parse(packet, verify_ip_csum)?;
    Ok(l.payload_start..l.end)
}

/// The segment size of a packet built by [`gro_merge`]: the payload length of its
/// first segment; for a packet `gro_merge` has not extended, its payload length (or
/// its urgent pointer, if that is below the payload length and URG is not set).
/// `None` if `packet` does not parse or has no payload.
pub fn merged_segment_size(packet: &[u8]) -> Option<u16> {
    let l = Layout::parse(packet, false).ok()?;
    merged_segment_size_of(packet, &l)
}

/// `max(1, skb_shinfo(skb)->gso_segs)` of a received IP packet: a TCP packet
/// [`gro_merge`] built holds its payload in segments of [`merged_segment_size`]
/// (the last one possibly short); any other packet is one. `apart`: payload bytes
/// that lie elsewhere ([`tcp_headers_apart`]; 0 for a whole packet).
pub fn gro_segs(headers: &[u8], apart: usize) -> u16 {
    let l = match apart {
        0 => Layout::parse(headers, false),
        _ => Layout::of_apart(headers, apart),
    };
    let Ok(l) = l else { return 1 };
    match merged_segment_size_of(headers, &l) {
        Some(seg) => l
            .payload_len()
            .div_ceil(seg as usize)
            .min(u16::MAX as usize) as u16,
        None => 1,
    }
}

fn merged_segment_size_of(packet: &[u8], l: &Layout) -> Option<u16> {
    let payload = l.payload_len();
    if payload == 0 || payload > u16::MAX as usize {
        return None;
    }
    let tcp = &packet[l.tcp_start..];
    let urgent = be16(tcp, TCP_URGENT);
    let urg = tcp[TCP_FLAGS] & (TcpFlags::URG.0 as u8) != 0;
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
    let ack = TcpFlags::ACK.0 as u8;
    fa & !ack == 0 && fs & !(ack | (TcpFlags::PSH.0 as u8)) == 0 && (fa ^ fs) & ack == 0
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

/// Appends `payload` (of a segment with TCP flags `flags`) to `acc` and fixes its
/// headers ([`grow_headers`]).
fn append_payload(acc: &mut Vec<u8>, payload: &[u8], flags: u8, a: &Layout, gso_size: u16) {
    acc.truncate(a.end);
    acc.extend_from_slice(payload);
    let len = acc.len();
    grow_headers(acc, a, len, flags, gso_size);
}

/// The headers of a held packet (layout `a`) that grew to an IP packet of `len`
/// bytes by a segment with TCP flags `flags`: its length fields and IPv4 header
/// checksum, its PSH, its recorded segment size.
fn grow_headers(acc: &mut [u8], a: &Layout, len: usize, flags: u8, gso_size: u16) {
    let rest = a.is_v4().then(|| ipv4_rest_sum(&acc[..a.tcp_start]));
    let id = be16(acc, 4);
    write_ip_len_as(acc, a, id, rest.unwrap_or(0), len);
    let tcp = &mut acc[a.tcp_start..];
    tcp[TCP_FLAGS] |= flags & (TcpFlags::PSH.0 as u8);
    tcp[TCP_URGENT..TCP_URGENT + 2].copy_from_slice(&gso_size.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ip;
    use crate::tcp::{TcpOptions, TcpRepr};
    use crate::testing::{tcp_packet, Csum};
    use proptest::prelude::*;

    const ACK: u8 = 0x10;
    const PSH: u8 = 0x08;
    const FIN: u8 = 0x01;
    const CWR: u8 = 0x80;

    /// A super-packet as a stack would hand it to the device: pseudo-header sum in
    /// the checksum field.
    fn packet(v6: bool, flags: u8, seq: u32, ipv4_id: u16, payload: &[u8]) -> Vec<u8> {
        let (src, dst) = match v6 {
            true => ("[fd00::1]:40000", "[fd00::2]:443"),
            false => ("10.0.0.1:40000", "10.0.0.2:443"),
        };
        let tcp = TcpRepr {
            seq,
            ack: 77,
            flags: TcpFlags(flags.into()),
            window: 1000,
            options: TcpOptions {
                timestamp: Some((5, 6)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        };
        let (src, dst) = (src.parse().unwrap(), dst.parse().unwrap());
        tcp_packet(src, dst, &tcp, payload, ipv4_id, Csum::Partial)
    }

    fn cut(p: &[u8], gso: u16) -> Vec<Vec<u8>> {
        let mut segs = Vec::new();
        let n = segment(p, gso, |s| segs.push(s)).unwrap();
        assert_eq!(n, segs.len());
        segs
    }

    /// Parses a finished segment, checking both checksums.
    fn check(seg: &[u8]) -> (IpRepr, TcpRepr, Vec<u8>) {
        let ip = IpRepr::parse(seg, true).unwrap();
        assert_eq!(ip.header_len + ip.payload_len, seg.len());
        let tcp_bytes = &seg[ip.header_len..];
        assert!(checksum::verify_tcp(ip.src, ip.dst, tcp_bytes));
        let (tcp, hl) = TcpRepr::parse(tcp_bytes).unwrap();
        (ip, tcp, tcp_bytes[hl..].to_vec())
    }

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    fn ipv4_id(seg: &[u8]) -> u16 {
        be16(seg, 4)
    }

    /// tcp_gso_segment's `th->cwr &= ecn_cwr_mask`: an `SKB_GSO_TCP_ACCECN` packet
    /// keeps CWR (ACE's middle bit) on every segment; AE and ECE go to every segment
    /// either way.
    #[test]
    fn accecn_gso_keeps_cwr_on_every_segment() {
        const ECE: u8 = 0x40;
        let data = payload(2500);
        let mut p = packet(false, ACK | ECE | CWR, 1, 0, &data);
        p[20 + 12] |= 0x01; // AE
        for (accecn, later) in [(true, ACK | ECE | CWR), (false, ACK | ECE)] {
            let mut segs = Vec::new();
            let gso = Gso {
                size: 1000,
                tcp_accecn: accecn,
            };
            segment(&p, gso, |s| segs.push(s)).expect("cuts");
            assert_eq!(segs.len(), 3);
            for (i, s) in segs.iter().enumerate() {
                let (tcp, _) = TcpRepr::parse(&s[20..]).expect("parses");
                let want = if i == 0 { ACK | ECE | CWR } else { later };
                assert_eq!(
                    tcp.flags.0,
                    u16::from(want) | 0x100,
                    "segment {i}, {accecn}"
                );
            }
        }
    }

    #[test]
    fn segments_v4() {
        let data = payload(3500);
        let p = packet(false, ACK | PSH | FIN | CWR, u32::MAX - 10, 0xfffe, &data);
        let segs = cut(&p, 1000);
        assert_eq!(segs.len(), 4);
        let mut joined = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let (_, tcp, pl) = check(s);
            assert_eq!(tcp.seq, (u32::MAX - 10).wrapping_add(1000 * i as u32));
            let want = match i {
                0 => ACK | CWR,
                3 => ACK | PSH | FIN,
                _ => ACK,
            };
            assert_eq!(tcp.flags.0, u16::from(want), "segment {i}");
            assert_eq!(tcp.options.timestamp, Some((5, 6)));
            assert_eq!(pl.len(), if i == 3 { 500 } else { 1000 });
            joined.extend(pl);
        }
        assert_eq!(joined, data);
        let ids: Vec<u16> = segs.iter().map(|s| ipv4_id(s)).collect();
        assert_eq!(ids, [0xfffe, 0xffff, 0, 1]);
    }

    proptest! {
        /// The header checksum from the precomputed rest equals summing the header.
        #[test]
        fn ip_checksum_from_the_rest_is_the_full_one(
            mut h in prop::collection::vec(any::<u8>(), 60),
            words in 5usize..=15,
            extra in 0usize..2000,
            id: u16,
        ) {
            h[0] = 0x40 | words as u8;
            let hl = words * 4;
            let len = (hl + extra) as u16;
            let mut want = h[..hl].to_vec();
            want[2..4].copy_from_slice(&len.to_be_bytes());
            want[4..6].copy_from_slice(&id.to_be_bytes());
            ip::fill_ipv4_checksum(&mut want);
            let any = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
            let ip = IpRepr { src: any, dst: any, protocol: PROTO_TCP, hop_limit: 0, ecn: 0, tos: 0, header_len: hl, payload_len: extra };
            let l = Layout { ip, tcp_start: hl, payload_start: hl, end: hl + extra };
            let mut got = h[..hl].to_vec();
            got.resize(hl + extra, 0);
            write_ip_len(&mut got, &l, id, ipv4_rest_sum(&h[..hl]));
            prop_assert_eq!(&got[..hl], &want[..]);
        }
    }

    #[test]
    fn payload_apart_cuts_the_same_segments() {
        for v6 in [false, true] {
            let data = payload(5000);
            let p = packet(v6, ACK | PSH, 77, 9, &data);
            let split = p.len() - data.len();
            let (hdr, pl) = p.split_at(split);
            for full in [true, false] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                segment_into(&p, 1400, full, Vec::with_capacity, |s| a.push(s)).unwrap();
                segment_apart_into(hdr, pl, 1400, full, Vec::with_capacity, |s| b.push(s)).unwrap();
                assert_eq!(a, b);
            }
            // Headers that do not end where the payload starts are refused.
            let (hdr, pl) = p.split_at(split - 1);
            assert!(segment_apart_into(hdr, pl, 1400, true, Vec::with_capacity, |_| {}).is_err());
        }
    }

    #[test]
    fn headers_only_segments_complete_to_the_same_segments() {
        for v6 in [false, true] {
            let data = payload(5000);
            let p = packet(v6, ACK | PSH, 77, 9, &data);
            let (hdr, pl) = p.split_at(p.len() - data.len());
            for full in [true, false] {
                let mut whole = Vec::new();
                segment_apart_into(hdr, pl, 1400, full, Vec::with_capacity, |s| whole.push(s))
                    .unwrap();
                let mut parts = Vec::new();
                let n = segment_headers_into(hdr, pl, 1400, full, Vec::with_capacity, |h, r| {
                    parts.push((h, r))
                });
                assert_eq!(n, Ok(whole.len()));
                for ((mut h, r), w) in parts.into_iter().zip(&whole) {
                    assert!(h.capacity() >= w.len(), "room to complete in place");
                    h.extend_from_slice(&pl[r]);
                    assert_eq!(&h, w);
                }
            }
        }
    }

    #[test]
    fn gro_merges_a_segment_apart_as_a_whole_one() {
        for v6 in [false, true] {
            let data = payload(4200);
            let p = packet(v6, ACK, 77, 9, &data);
            let mut segs = Vec::new();
            segment_into(&p, 1400, true, Vec::with_capacity, |s| segs.push(s)).unwrap();
            let (mut whole, mut apart) = (segs[0].clone(), segs[0].clone());
            for s in &segs[1..] {
                let hl = s.len() - 1400;
                assert!(gro_merge_csum_valid(&mut whole, s, 65535));
                assert!(gro_merge_apart_csum_valid(
                    &mut apart,
                    &s[..hl],
                    &s[hl..],
                    65535
                ));
            }
            assert_eq!(apart, whole);
            // Out of order: refused, the accumulator left alone.
            let hl = segs[1].len() - 1400;
            assert!(!gro_merge_apart_csum_valid(
                &mut apart,
                &segs[1][..hl],
                &segs[1][hl..],
                65535
            ));
            assert_eq!(apart, whole);
        }
    }

    #[test]
    fn headers_apart_must_end_where_their_payload_starts() {
        for v6 in [false, true] {
            let data = payload(3000);
            let p = packet(v6, ACK, 77, 9, &data);
            let split = p.len() - data.len();
            let ip = tcp_headers_apart(&p[..split], data.len()).unwrap();
            assert_eq!(ip.header_len + ip.payload_len, p.len());
            assert!(tcp_headers_apart(&p[..split], data.len() + 1).is_err());
            assert!(tcp_headers_apart(&p[..split + 1], data.len() - 1).is_err());
        }
    }

    #[test]
    fn gro_into_frags_builds_the_same_headers_as_a_copy() {
        for v6 in [false, true] {
            let data = payload(4200);
            let p = packet(v6, ACK, 77, 9, &data);
            let mut segs = Vec::new();
            segment_into(&p, 1400, true, Vec::with_capacity, |s| segs.push(s)).unwrap();
            let mut whole = segs[0].clone();
            let hl0 = segs[0].len() - 1400;
            let mut head = segs[0][..hl0].to_vec();
            let mut frags: Vec<&[u8]> = vec![&segs[0][hl0..]];
            for s in &segs[1..] {
                let hl = s.len() - 1400;
                let apart = frags.iter().map(|f| f.len()).sum();
                assert!(gro_merge_csum_valid(&mut whole, s, 65535));
                assert!(gro_merge_frags_csum_valid(
                    &mut head,
                    apart,
                    &s[..hl],
                    1400,
                    65535
                ));
                frags.push(&s[hl..]);
            }
            let mut rebuilt = head.clone();
            frags.iter().for_each(|f| rebuilt.extend_from_slice(f));
            assert_eq!(rebuilt, whole);
            // Out of order: refused, the headers left alone.
            let hl = segs[1].len() - 1400;
            let apart = frags.iter().map(|f| f.len()).sum();
            assert!(!gro_merge_frags_csum_valid(
                &mut head,
                apart,
                &segs[1][..hl],
                1400,
                65535
            ));
            assert_eq!(&rebuilt[..head.len()], &head[..]);
            // The lengths must count what the caller holds.
            assert!(!gro_merge_frags_csum_valid(
                &mut head,
                apart + 1,
                &segs[1][..hl],
                1400,
                65535
            ));
        }
    }

    #[test]
    fn segments_v6() {
        let data = payload(2001);
        let p = packet(true, ACK | PSH, 1, 0, &data);
        let segs = cut(&p, 1000);
        assert_eq!(segs.len(), 3);
        let lens: Vec<usize> = segs.iter().map(|s| check(s).0.payload_len).collect();
        assert_eq!(lens, [1032, 1032, 33]);
        assert_eq!(check(&segs[2]).1.flags.0, u16::from(ACK | PSH));
    }

    #[test]
    fn single_segment_cases() {
        let data = payload(1000);
        for (gso, v6) in [(0, false), (1000, true), (1001, false), (0, true)] {
            let p = packet(v6, ACK | PSH | CWR | FIN, 9, 3, &data);
            let segs = cut(&p, gso);
            assert_eq!(segs.len(), 1);
            let (_, tcp, pl) = check(&segs[0]);
            assert_eq!(tcp.flags.0, u16::from(ACK | PSH | CWR | FIN));
            assert_eq!(pl, data);
            // Apart from the checksum, the packet is unchanged.
            let c = p.len() - data.len() - 32 + 16;
            let mut a = segs[0].clone();
            a[c..c + 2].copy_from_slice(&p[c..c + 2]);
            assert_eq!(a, p);
        }
        // No payload at all (a pure ACK) also gives one segment.
        let p = packet(false, ACK, 9, 3, &[]);
        assert_eq!(cut(&p, 100).len(), 1);
        check(&cut(&p, 100)[0]);
    }

    #[test]
    fn link_padding_is_ignored() {
        let data = payload(300);
        let mut p = packet(false, ACK, 9, 3, &data);
        p.extend_from_slice(&[0xee; 6]);
        let segs = cut(&p, 100);
        assert_eq!(segs.len(), 3);
        segs.iter().for_each(|s| {
            check(s);
        });
    }

    /// Inserts IPv4 options (NOP NOP NOP EOL) into a v4 packet.
    fn with_ipv4_options(p: &[u8]) -> Vec<u8> {
        let mut b = p.to_vec();
        b.splice(20..20, [1, 1, 1, 0]);
        b[0] = 0x46;
        let total = b.len() as u16;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        ip::fill_ipv4_checksum(&mut b[..24]);
        b
    }

    #[test]
    fn ipv4_options_are_carried() {
        let data = payload(2500);
        let p = with_ipv4_options(&packet(false, ACK, 5, 9, &data));
        let segs = cut(&p, 1000);
        assert_eq!(segs.len(), 3);
        for s in &segs {
            let (ip, _, _) = check(s);
            assert_eq!(ip.header_len, 24);
            assert_eq!(&s[20..24], &[1, 1, 1, 0]);
        }
        let merged = merge_all(segs, 1 << 20);
        assert_eq!(merged.len(), 1);
        assert_eq!(payload_of(&merged[0]), data);
        // Options that differ prevent merging.
        let (a, b) = pair(ACK, ACK);
        assert!(!merges(with_ipv4_options(&a), &b));
    }

    #[test]
    fn partial_segments_finish_to_the_full_ones() {
        for v6 in [false, true] {
            let p = packet(v6, ACK | PSH, 1000, 7, &payload(5000));
            let full = cut(&p, 1200);
            let mut partial = Vec::new();
            assert_eq!(
                segment_csum_partial(&p, 1200, |s| partial.push(s)),
                Ok(full.len())
            );
            for (f, mut q) in full.into_iter().zip(partial) {
                let l = Layout::parse(&q, true).unwrap();
                let tcp = &q[l.tcp_start..l.end];
                assert!(checksum::is_tcp_partial(l.ip.src, l.ip.dst, tcp));
                finish_checksum(&mut q).unwrap();
                assert_eq!(q, f);
            }
        }
    }

    #[test]
    fn finish_checksum_completes_partial() {
        for v6 in [false, true] {
            let mut p = packet(v6, ACK, 1, 1, &payload(99));
            let hl = if v6 { 40 } else { 20 };
            let ip = IpRepr::parse(&p, true).unwrap();
            assert!(!checksum::verify_tcp(ip.src, ip.dst, &p[hl..]));
            finish_checksum(&mut p).unwrap();
            check(&p);
        }
        assert_eq!(finish_checksum(&mut [0x45; 10]), Err(WireError::Truncated));
    }

    #[test]
    fn non_tcp_is_unsupported() {
        let mut p = packet(false, ACK, 1, 1, &payload(10));
        p[9] = 17;
        ip::fill_ipv4_checksum(&mut p[..20]);
        assert_eq!(segment(&p, 4, |_| ()), Err(WireError::Unsupported));
        let mut acc = p.clone();
        assert!(!gro_merge(&mut acc, &p, 1 << 20));
    }

    /// Merges every segment into the first; returns the merged packets.
    fn merge_all(segs: Vec<Vec<u8>>, max_len: usize) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = Vec::new();
        for s in segs {
            let merged = out
                .last_mut()
                .is_some_and(|acc| gro_merge(acc, &s, max_len));
            if !merged {
                out.push(s);
            }
        }
        out
    }

    fn payload_of(p: &[u8]) -> Vec<u8> {
        let l = Layout::parse(p, true).unwrap();
        p[l.payload_start..l.end].to_vec()
    }

    #[test]
    fn gro_reconstructs_the_super_packet() {
        for v6 in [false, true] {
            let data = payload(5000);
            let p = packet(v6, ACK | PSH, 100, 7, &data);
            let merged = merge_all(cut(&p, 1400), 1 << 20);
            assert_eq!(merged.len(), 1);
            let m = &merged[0];
            let (ip, tcp, _) = (
                IpRepr::parse(m, true).unwrap(),
                TcpRepr::parse(&m[ip_hl(v6)..]).unwrap().0,
                (),
            );
            assert_eq!(ip.payload_len + ip.header_len, m.len());
            assert_eq!(tcp.seq, 100);
            assert_eq!(tcp.flags.0, u16::from(ACK | PSH));
            assert_eq!(payload_of(m), data);
            assert_eq!(merged_segment_size(m), Some(1400));
            // gso_segs: 5000 bytes in segments of 1400 (the last one short); its
            // headers with the payload apart count the same; a lone segment and a
            // packet too short to parse are one.
            assert_eq!(gro_segs(m, 0), 4);
            let hl = m.len() - 5000;
            assert_eq!(gro_segs(&m[..hl], 5000), 4);
            assert_eq!(gro_segs(&cut(&p, 1400)[0], 0), 1);
            assert_eq!(gro_segs(&m[..10], 0), 1);
        }
    }

    fn ip_hl(v6: bool) -> usize {
        if v6 {
            40
        } else {
            20
        }
    }

    #[test]
    fn gro_respects_max_len_and_ip_limit() {
        let p = packet(false, ACK, 0, 0, &payload(4000));
        let segs = cut(&p, 1000);
        let seg_len = segs[0].len();
        let merged = merge_all(segs.clone(), 2 * seg_len + 1000);
        assert_eq!(merged.len(), 2);
        assert!(merged.iter().all(|m| m.len() <= 2 * seg_len + 1000));
        // The IP length may not pass 65535, whatever max_len says.
        for v6 in [false, true] {
            let max_payload = 65535 - 32 - if v6 { 0 } else { 20 };
            let full = packet(v6, ACK, 0, 0, &payload(max_payload));
            assert_eq!(merge_all(cut(&full, 1000), usize::MAX).len(), 1);
            let acc = packet(v6, ACK, 0, 0, &payload(max_payload - 999));
            let acc = cut(&acc, 0).remove(0);
            let seg = cut(
                &packet(v6, ACK, max_payload as u32 - 999, 0, &payload(1000)),
                0,
            );
            assert!(!merges(acc.clone(), &seg[0]));
            let seg = cut(
                &packet(v6, ACK, max_payload as u32 - 999, 0, &payload(999)),
                0,
            );
            assert!(merges(acc, &seg[0]));
        }
    }

    /// Two consecutive 1000-byte segments, ready to try merging.
    fn pair(f0: u8, f1: u8) -> (Vec<u8>, Vec<u8>) {
        let a = cut(&packet(false, f0, 0, 0, &payload(1000)), 0).remove(0);
        let b = cut(&packet(false, f1, 1000, 1, &payload(1000)), 0).remove(0);
        (a, b)
    }

    fn merges(mut a: Vec<u8>, b: &[u8]) -> bool {
        let before = a.clone();
        let ok = gro_merge(&mut a, b, 1 << 20);
        if !ok {
            assert_eq!(a, before, "a refused merge must leave acc alone");
        }
        ok
    }

    #[test]
    fn gro_flag_rules() {
        assert!(merges(pair(ACK, ACK).0, &pair(ACK, ACK).1));
        assert!(merges(pair(ACK, ACK).0, &pair(ACK, ACK | PSH).1));
        assert!(!merges(pair(ACK | PSH, ACK).0, &pair(ACK, ACK).1));
        for bad in [0x01u8, 0x02, 0x04, 0x20, 0x40, 0x80] {
            assert!(
                !merges(pair(ACK | bad, ACK).0, &pair(ACK, ACK).1),
                "acc {bad:#x}"
            );
            assert!(
                !merges(pair(ACK, ACK).0, &pair(ACK, ACK | bad).1),
                "seg {bad:#x}"
            );
        }
        assert!(!merges(pair(ACK, ACK).0, &pair(ACK, 0).1));
    }

    /// Rewrites one byte of `seg` and fixes its checksums.
    fn patched(seg: &[u8], at: usize, byte: u8) -> Vec<u8> {
        let mut s = seg.to_vec();
        s[at] = byte;
        ip::fill_ipv4_checksum(&mut s[..20]);
        finish_checksum(&mut s).unwrap();
        s
    }

    #[test]
    fn gro_header_rules() {
        let (a, b) = pair(ACK, ACK);
        assert!(
            merges(a.clone(), &patched(&b, 4, 99)),
            "IPv4 id is not compared"
        );
        assert!(!merges(a.clone(), &patched(&b, 8, 1)), "TTL");
        assert!(!merges(a.clone(), &patched(&b, 1, 1)), "ECN");
        assert!(!merges(a.clone(), &patched(&b, 15, 9)), "source address");
        assert!(!merges(a.clone(), &patched(&b, 21, 1)), "source port");
        assert!(!merges(a.clone(), &patched(&b, 27, 1)), "sequence");
        assert!(!merges(a.clone(), &patched(&b, 31, 1)), "ack");
        assert!(!merges(a.clone(), &patched(&b, 35, 1)), "window");
        assert!(!merges(a.clone(), &patched(&b, 51, 9)), "timestamp echo");
        let mut bad = b.clone();
        bad[60] ^= 1;
        assert!(!merges(a.clone(), &bad), "TCP checksum");
        let mut bad = b.clone();
        bad[11] ^= 1;
        assert!(!merges(a.clone(), &bad), "IPv4 checksum");
        // A v6 segment never continues a v4 packet.
        let b6 = cut(&packet(true, ACK, 1000, 0, &payload(1000)), 0).remove(0);
        assert!(!merges(a.clone(), &b6));
        assert!(!merges(a, &b[..b.len() - 1]));
    }

    #[test]
    fn gro_csum_valid_skips_only_the_tcp_checksum() {
        let (a, b) = pair(ACK, ACK);
        let mut bad_tcp = b.clone();
        bad_tcp[60] ^= 1;
        assert!(!merges(a.clone(), &bad_tcp), "verified by gro_merge");
        let mut acc = a.clone();
        assert!(gro_merge_csum_valid(&mut acc, &bad_tcp, 65_535), "trusted");
        let mut bad_ip = b.clone();
        bad_ip[11] ^= 1;
        let mut acc = a.clone();
        assert!(
            !gro_merge_csum_valid(&mut acc, &bad_ip, 65_535),
            "the IPv4 header checksum is still checked"
        );
        let mut other = b.clone();
        other[27] ^= 1;
        let mut acc = a;
        assert!(!gro_merge_csum_valid(&mut acc, &other, 65_535), "sequence");
    }

    #[test]
    fn gro_size_rules() {
        let seg =
            |seq: u32, len: usize| cut(&packet(false, ACK, seq, 0, &payload(len)), 0).remove(0);
        // A segment larger than the first does not merge.
        assert!(!merges(seg(0, 500), &seg(500, 501)));
        // Empty segments never merge, as acc or as seg.
        assert!(!merges(seg(0, 500), &seg(500, 0)));
        assert!(!merges(seg(0, 0), &seg(0, 500)));
        // After a short segment, nothing more merges.
        let mut acc = seg(0, 500);
        assert!(gro_merge(&mut acc, &seg(500, 500), 1 << 20));
        assert_eq!(merged_segment_size(&acc), Some(500));
        assert!(gro_merge(&mut acc, &seg(1000, 200), 1 << 20));
        assert!(!gro_merge(&mut acc, &seg(1200, 100), 1 << 20));
        assert!(!gro_merge(&mut acc, &seg(1200, 500), 1 << 20));
        assert_eq!(payload_of(&acc).len(), 1200);
        // After a PSH, nothing more merges.
        let mut acc = seg(0, 500);
        let psh = cut(&packet(false, ACK | PSH, 500, 0, &payload(500)), 0).remove(0);
        assert!(gro_merge(&mut acc, &psh, 1 << 20));
        assert!(!gro_merge(&mut acc, &seg(1000, 500), 1 << 20));
    }

    #[test]
    fn gro_drops_acc_link_padding() {
        let (mut a, b) = pair(ACK, ACK);
        a.extend_from_slice(&[0; 6]);
        assert!(gro_merge(&mut a, &b, 1 << 20));
        assert_eq!(IpRepr::parse(&a, true).unwrap().payload_len + 20, a.len());
        assert_eq!(payload_of(&a).len(), 2000);
    }

    fn arb_flags() -> impl Strategy<Value = u8> {
        prop::sample::select(vec![
            ACK,
            ACK | PSH,
            ACK | FIN,
            ACK | CWR,
            ACK | PSH | FIN | CWR,
            0x42,
        ])
    }

    proptest! {
        #[test]
        fn segment_invariants(
            len in 0usize..5000, gso in 0u16..1600, v6 in any::<bool>(), flags in arb_flags(),
            seq in any::<u32>(), id in any::<u16>(),
        ) {
            let data = payload(len);
            let p = packet(v6, flags, seq, id, &data);
            let segs = cut(&p, gso);
            let n = segs.len();
            let expect = if gso == 0 || len <= gso as usize { 1 } else { len.div_ceil(gso as usize) };
            prop_assert_eq!(n, expect);
            let mut joined = Vec::new();
            for (i, s) in segs.iter().enumerate() {
                let (_, tcp, pl) = check(s);
                prop_assert_eq!(tcp.seq, seq.wrapping_add(joined.len() as u32));
                let mut want = flags;
                if i + 1 != n { want &= !(FIN | PSH); }
                if i != 0 { want &= !CWR; }
                prop_assert_eq!(tcp.flags.0, u16::from(want));
                if !v6 { prop_assert_eq!(ipv4_id(s), id.wrapping_add(i as u16)); }
                if i + 1 != n { prop_assert_eq!(pl.len(), gso as usize); }
                joined.extend(pl);
            }
            prop_assert_eq!(joined, data);
        }

        #[test]
        fn gro_round_trip(len in 1usize..6000, gso in 1u16..1600, v6 in any::<bool>(), psh in any::<bool>()) {
            let data = payload(len);
            let flags = if psh { ACK | PSH } else { ACK };
            let merged = merge_all(cut(&packet(v6, flags, 1, 1, &data), gso), 1 << 20);
            prop_assert_eq!(merged.len(), 1);
            prop_assert_eq!(payload_of(&merged[0]), data);
            prop_assert_eq!(merged[0][ip_hl(v6) + 13], flags);
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), gso in any::<u16>()) {
            let _ = segment(&data, gso, |_| ());
            let mut d = data.clone();
            let _ = finish_checksum(&mut d);
            let mut acc = data.clone();
            let _ = gro_merge(&mut acc, &data, 1 << 20);
            let _ = merged_segment_size(&data);
        }

        #[test]
        fn mutations_never_panic(
            v6 in any::<bool>(), len in 0usize..600, gso in any::<u16>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut_at in any::<prop::sample::Index>(), mutate_acc in any::<bool>(),
        ) {
            let p = packet(v6, ACK, 0, 0, &payload(len));
            let mut bad = p.clone();
            for (at, byte) in edits {
                let i = at.index(bad.len());
                bad[i] = byte;
            }
            bad.truncate(cut_at.index(bad.len() + 1));
            let mut total = 0;
            if let Ok(n) = segment(&bad, gso, |s| total += s.len()) {
                prop_assert!(n >= 1);
            }
            let _ = finish_checksum(&mut bad.clone());
            let next = packet(v6, ACK, len as u32, 1, &payload(len));
            let (mut acc, seg) = if mutate_acc { (bad, next) } else { (p, bad) };
            let _ = gro_merge(&mut acc, &seg, 1 << 20);
        }
    }
}
