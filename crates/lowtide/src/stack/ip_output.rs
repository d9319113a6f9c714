//! IP output of the datagrams the stack builds itself (UDP, ICMP), as Linux's
//! net/ipv4/ip_output.c and net/ipv6/ip6_output.c: the size checks and the DF bit of
//! `ip_setup_cork` / `__ip_append_data` / `__ip_make_skb` (and their IPv6 twins)
//! under the socket's `IP_MTU_DISCOVER` / `IPV6_MTU_DISCOVER`, `IPV6_DONTFRAG` and
//! `IPV6_MTU`; the identification (`ip_select_ident`, `ipv6_select_ident` over
//! net/ipv4/route.c's `ip_idents_reserve`); and the fragmentation of a datagram
//! larger than the MTU (`ip_fragment` / `ip_do_fragment`, `ip6_fragment`) with
//! `IpFragOKs`/`IpFragCreates`/`IpFragFails` and their `Ip6` twins.
//!
//! TCP never comes here: its segments fit the path MTU by construction
//! (`tcp_mtu_to_mss`) and leave with DF under `IP_PMTUDISC_WANT`, so Linux's
//! `ip_queue_xmit` never fragments them either.

use super::Stack;
use crate::mib::{ip_version, Mib};
use crate::rng::Rng;
use crate::route::Rtax;
use crate::socket::SocketError;
use crate::tcp::consts::{
    IP_PMTUDISC_DO, IP_PMTUDISC_DONT, IP_PMTUDISC_OMIT, IP_PMTUDISC_PROBE, IP_PMTUDISC_WANT,
};
use crate::time::Instant;
use lowtide_wire::ip::{fill_ipv4_checksum, IPV4_DF, IPV4_HEADER_LEN, IPV6_HEADER_LEN};
use std::net::IpAddr;

/// `IP_MF`, `IP_OFFSET`.
const IP_MF: u16 = 0x2000;
const IP_OFFSET: u16 = 0x1fff;
/// `IPOPT_END`, `IPOPT_NOOP`, and `IPOPT_COPIED`'s bit: the options a fragment after
/// the first keeps.
const IPOPT_END: u8 = 0;
const IPOPT_NOOP: u8 = 1;
const IPOPT_COPY: u8 = 0x80;
/// `sizeof(struct frag_hdr)`, `NEXTHDR_FRAGMENT`, `IP6_MF`.
const FRAG_HDR_LEN: usize = 8;
const NEXTHDR_FRAGMENT: u8 = 44;
const IP6_MF: u16 = 1;
/// `NEXTHDR_HOP`, `NEXTHDR_ROUTING`, `NEXTHDR_DEST` (`ip6_find_1stfragopt`).
const NEXTHDR_HOP: u8 = 0;
const NEXTHDR_ROUTING: u8 = 43;
const NEXTHDR_DEST: u8 = 60;
/// `IPV6_MIN_MTU`, `IPV6_MAXPLEN`.
const IPV6_MIN_MTU: usize = 1280;
const IPV6_MAXPLEN: usize = 65535;
/// `IP_MAX_MTU` as `__ip_append_data`'s bound of a datagram that may fragment.
const IP_MAX_LEN: usize = 0xffff;
/// Buckets of `ip_idents` (Linux sizes it by memory, 2048 at least).
const IDENTS: usize = 2048;

/// How a socket sends (its cork's settings): `IP_MTU_DISCOVER` or
/// `IPV6_MTU_DISCOVER` for the datagram's family, `IPV6_DONTFRAG`, `IPV6_MTU`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct IpCork {
    /// `inet->pmtudisc` / `np->pmtudisc` (`IP_PMTUDISC_*`, the same values).
    pub pmtudisc: u8,
    /// `IPV6_DONTFRAG`: an IPv6 datagram over the MTU is `EMSGSIZE`.
    pub dontfrag: bool,
    /// `IPV6_MTU` (`np->frag_size`): fragments no larger; 0 none.
    pub frag_size: u16,
}

impl IpCork {
    /// The ICMP sockets' (`icmp_sk_init`: IPv4 `IP_PMTUDISC_DONT`; `icmpv6_sk_init`
    /// leaves `inet6_create`'s `IPV6_PMTUDISC_WANT`).
    pub fn icmp(v4: bool) -> IpCork {
        IpCork {
            pmtudisc: if v4 {
                IP_PMTUDISC_DONT
            } else {
                IP_PMTUDISC_WANT
            },
            dontfrag: false,
            frag_size: 0,
        }
    }

    /// `ip_sk_ignore_df` / `ip6_sk_ignore_df`: the datagram may be fragmented here.
    fn ignore_df(self) -> bool {
        self.pmtudisc < IP_PMTUDISC_DO || self.pmtudisc == IP_PMTUDISC_OMIT
    }

    /// `ip_sk_use_pmtu` (IPv6: `np->pmtudisc < IPV6_PMTUDISC_PROBE`): the route's
    /// MTU with what was learned, not the device's.
    fn use_pmtu(self) -> bool {
        self.pmtudisc < IP_PMTUDISC_PROBE
    }
}

/// What the output path needs to know of one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OutParams {
    /// `ip_skb_dst_mtu` / `ip6_skb_dst_mtu`: larger datagrams are fragmented.
    pub mtu: usize,
    /// `skb->ignore_df`.
    pub ignore_df: bool,
    /// `np->frag_size` (IPv6 only), 0 none.
    pub frag_size: usize,
    /// IPv4: DF goes on the datagram (`__ip_make_skb`).
    pub df: bool,
}

/// `ip_idents` and `ip_tstamps` (net/ipv4/route.c): one counter per bucket that
/// jumps by a random amount below the jiffies since its last use, so that the
/// number of packets between two identifications cannot be read from outside.
/// Drawn when first used, from a stream of its own.
pub(super) struct IpIdents {
    buckets: Vec<(u32, u32)>,
    rng: Rng,
}

impl IpIdents {
    /// An empty table whose random draws come from `seed`.
    pub fn new(seed: u64) -> IpIdents {
        IpIdents {
            buckets: Vec::new(),
            rng: Rng::new(seed),
        }
    }

    /// `ip_idents_reserve`: `segs` identifications from `hash`'s bucket, the last
    /// one returned. Jiffies are milliseconds (`HZ` 1000).
    fn reserve(&mut self, now: Instant, hash: u32, segs: u32) -> u32 {
        if self.buckets.is_empty() {
            // get_random_bytes(ip_idents); ip_tstamps zeroed.
            self.buckets = (0..IDENTS).map(|_| (self.rng.next_u32(), 0)).collect();
        }
        let jiffies = now.as_millis() as u32;
        let (id, stamp) = &mut self.buckets[hash as usize & (IDENTS - 1)];
        let mut delta = 0;
        if *stamp != jiffies {
            delta = self.rng.range_u32(0, jiffies.wrapping_sub(*stamp) - 1);
            *stamp = jiffies;
        }
        *id = id.wrapping_add(segs.wrapping_add(delta));
        *id
    }
}

impl Stack {
    /// `ip_setup_cork` + `__ip_append_data`'s checks + `__ip_make_skb`'s DF for an
    /// IPv4 datagram of `len` bytes after the header to `dst`: `EMSGSIZE` when it
    /// may not be fragmented and does not fit `IP_PMTUDISC_DO`/`PROBE`/`INTERFACE`'s
    /// MTU, or is over 64 KB.
    pub(super) fn ip_cork(
        &self,
        now: Instant,
        dst: IpAddr,
        cork: IpCork,
        len: usize,
    ) -> Result<OutParams, SocketError> {
        let dst_mtu = self.route_mtu(now, dst) as usize;
        // ip_setup_cork's fragsize; ip_skb_dst_mtu gives the same.
        let mtu = match cork.use_pmtu() {
            true => dst_mtu,
            false => self.cfg.mtu as usize,
        };
        let maxnonfragsize = if cork.ignore_df() { IP_MAX_LEN } else { mtu };
        if len > maxnonfragsize - IPV4_HEADER_LEN {
            return Err(SocketError::MessageTooLong);
        }
        Ok(OutParams {
            mtu,
            ignore_df: cork.ignore_df(),
            frag_size: 0,
            df: self.ip_df(now, dst, cork, IPV4_HEADER_LEN + len),
        })
    }

    /// `__ip_make_skb`'s DF for an IPv4 datagram of `total` bytes: `DO` and
    /// `PROBE` always, `WANT` when it fits the route's MTU and that is not locked
    /// (`ip_dont_fragment`, `ip_mtu_locked`).
    pub(super) fn ip_df(&self, now: Instant, dst: IpAddr, cork: IpCork, total: usize) -> bool {
        let locked =
            self.routes.lookup(dst).locked(Rtax::Mtu) || self.routes.learned_mtu_locked(now, dst);
        let dont_fragment =
            cork.pmtudisc == IP_PMTUDISC_DO || (cork.pmtudisc == IP_PMTUDISC_WANT && !locked);
        matches!(cork.pmtudisc, IP_PMTUDISC_DO | IP_PMTUDISC_PROBE)
            || (total <= self.route_mtu(now, dst) as usize && dont_fragment)
    }

    /// `ip6_setup_cork` + `__ip6_append_data`'s checks for an IPv6 datagram of
    /// `len` bytes after the header, whose transport header is `transhdrlen`:
    /// `InvalidInput` if the MTU is under 1280 (`EINVAL`), `EMSGSIZE` over the MTU
    /// with `IPV6_DONTFRAG` or a mode that may not fragment, or past 64 KB.
    pub(super) fn ip6_cork(
        &self,
        now: Instant,
        dst: IpAddr,
        cork: IpCork,
        len: usize,
        transhdrlen: usize,
    ) -> Result<OutParams, SocketError> {
        // ip6_skb_dst_mtu: the device's from IPV6_PMTUDISC_PROBE on.
        let skb_mtu = match cork.use_pmtu() {
            true => self.route_mtu(now, dst) as usize,
            false => self.cfg.mtu as usize,
        };
        let mut mtu = skb_mtu;
        if cork.frag_size != 0 && (cork.frag_size as usize) < mtu {
            mtu = cork.frag_size as usize;
        }
        if mtu < IPV6_MIN_MTU {
            return Err(SocketError::InvalidInput);
        }
        // RFC 7112 section 5: the whole header chain in the first fragment.
        let headersize = IPV6_HEADER_LEN;
        if headersize + transhdrlen > mtu || (len > mtu - headersize && cork.dontfrag) {
            return Err(SocketError::MessageTooLong);
        }
        let maxnonfragsize = match cork.ignore_df() {
            true => IPV6_HEADER_LEN + IPV6_MAXPLEN,
            false => mtu,
        };
        if len > maxnonfragsize - headersize {
            return Err(SocketError::MessageTooLong);
        }
        Ok(OutParams {
            mtu: skb_mtu,
            ignore_df: cork.ignore_df(),
            frag_size: cork.frag_size as usize,
            df: false,
        })
    }

    /// `ip_select_ident` for a datagram without a connected socket's `inet_id`:
    /// 0 under DF that may not be cleared, else `__ip_select_ident`'s hashed
    /// counter of (destination, source, protocol).
    pub(super) fn ip_select_ident(
        &mut self,
        now: Instant,
        (src, dst, protocol): (IpAddr, IpAddr, u8),
        out: OutParams,
    ) -> u16 {
        if out.df && !out.ignore_df {
            return 0;
        }
        let hash = self.secrets.ip_id_hash(dst, src, Some(protocol));
        self.idents.reserve(now, hash, 1) as u16
    }

    /// `ipv6_select_ident`: the fragment identification, 0 taken as unset.
    fn ipv6_select_ident(&mut self, now: Instant, src: IpAddr, dst: IpAddr) -> u32 {
        let hash = self.secrets.ip_id_hash(dst, src, None);
        match self.idents.reserve(now, hash, 1) {
            0 => 1 << 31,
            id => id,
        }
    }

    /// `ip_local_out` / `ip6_local_out` down to the device for a whole datagram
    /// built here: counted once as a request, then sent whole or, over `out.mtu`,
    /// fragmented (`ip_finish_output`, `__ip6_finish_output`).
    pub(super) fn ip_local_out(&mut self, now: Instant, packet: Vec<u8>, out: OutParams) {
        let ver = ip_version(&packet);
        self.mib.inc(Mib::IpOutRequests.for_ip_version(ver));
        if packet.len() <= out.mtu {
            return self.ip_finish_output2(packet, 0, 1);
        }
        match ver {
            4 => self.ip_fragment(packet, out),
            _ => self.ip6_fragment(now, packet, out),
        }
    }

    /// `ip_fragment`: a datagram with DF that may not be cleared fails
    /// (`IpFragFails`; Linux also sends itself a "fragmentation needed", which
    /// lowtide's senders never need: their size checks came first), else
    /// `ip_do_fragment`.
    fn ip_fragment(&mut self, packet: Vec<u8>, out: OutParams) {
        let df = u16::from_be_bytes([packet[6], packet[7]]) & IPV4_DF != 0;
        let hlen = ((packet[0] & 0x0f) as usize) * 4;
        if (df && !out.ignore_df) || out.mtu < hlen + 8 {
            self.mib.inc(Mib::IpFragFails);
            return;
        }
        for f in ip_do_fragment(&packet, out.mtu) {
            self.ip_finish_output2(f, 0, 1);
            self.mib.inc(Mib::IpFragCreates);
        }
        self.mib.inc(Mib::IpFragOKs);
    }

    /// `ip6_fragment`: only the source fragments. Over the MTU without
    /// `ignore_df` fails (`Ip6FragFails`; Linux's "packet too big" to itself is
    /// left out, as for IPv4); pieces are at most `IPV6_MTU`'s size.
    fn ip6_fragment(&mut self, now: Instant, packet: Vec<u8>, out: OutParams) {
        let Some((hlen, _)) = ip6_find_1stfragopt(&packet) else {
            self.mib.inc(Mib::Ip6FragFails);
            return;
        };
        let mut mtu = out.mtu;
        if !out.ignore_df && packet.len() > mtu {
            self.mib.inc(Mib::Ip6FragFails);
            return;
        }
        if out.frag_size != 0 && out.frag_size < mtu {
            mtu = out.frag_size;
        }
        if mtu < hlen + FRAG_HDR_LEN + 8 {
            self.mib.inc(Mib::Ip6FragFails);
            return;
        }
        let src = IpAddr::from(<[u8; 16]>::try_from(&packet[8..24]).expect("16 bytes"));
        let dst = IpAddr::from(<[u8; 16]>::try_from(&packet[24..40]).expect("16 bytes"));
        let id = self.ipv6_select_ident(now, src, dst);
        for f in ip6_do_fragment(&packet, mtu, id).unwrap_or_default() {
            self.ip_finish_output2(f, 0, 1);
            self.mib.inc(Mib::Ip6FragCreates);
        }
        self.mib.inc(Mib::Ip6FragOKs);
    }
}

/// `ip_options_fragment`: the options a fragment after the first carries, those
/// without the copied flag overwritten with `IPOPT_NOOP` (the header keeps its
/// length). Stops at `IPOPT_END` or a malformed option, as Linux.
pub(crate) fn ip_options_fragment(header: &mut [u8]) {
    let mut at = IPV4_HEADER_LEN;
    while at < header.len() {
        match header[at] {
            IPOPT_END => return,
            IPOPT_NOOP => {
                at += 1;
                continue;
            }
            _ => {}
        }
        let optlen = header.get(at + 1).copied().unwrap_or(0) as usize;
        if optlen < 2 || optlen > header.len() - at {
            return;
        }
        if header[at] & IPOPT_COPY == 0 {
            header[at..at + optlen].fill(IPOPT_NOOP);
        }
        at += optlen;
    }
}

/// `ip_do_fragment` of an IPv4 datagram `packet` (its header valid, longer than
/// `mtu`, `mtu` at least the header and 8): pieces of `mtu` minus the header
/// rounded down to 8 bytes, the last one shorter; each with the header (options
/// as `ip_options_fragment` leaves them after the first), its offset, MF on all
/// but the last unless `packet` was itself a fragment with MF, DF cleared, the
/// checksum again. The fast path Linux takes over `ip_append_data`'s pieces cuts at
/// the same places.
pub(crate) fn ip_do_fragment(packet: &[u8], mtu: usize) -> Vec<Vec<u8>> {
    let hlen = ((packet[0] & 0x0f) as usize) * 4;
    let mut header = packet[..hlen].to_vec();
    let room = mtu - hlen;
    let word = u16::from_be_bytes([packet[6], packet[7]]);
    let mut offset = ((word & IP_OFFSET) as usize) << 3;
    let not_last_frag = word & IP_MF != 0;
    let (mut left, mut ptr) = (packet.len() - hlen, hlen);
    let mut frags = Vec::with_capacity(left.div_ceil(room & !7));
    while left > 0 {
        let mut len = left.min(room);
        if len < left {
            len &= !7;
        }
        let mut f = Vec::with_capacity(hlen + len);
        f.extend_from_slice(&header);
        f.extend_from_slice(&packet[ptr..ptr + len]);
        let mut frag_off = (offset >> 3) as u16;
        // "Upgrade options only if the segment to be fragmented was THE FIRST."
        if offset == 0 {
            ip_options_fragment(&mut header);
        }
        left -= len;
        if left > 0 || not_last_frag {
            frag_off |= IP_MF;
        }
        ptr += len;
        offset += len;
        f[2..4].copy_from_slice(&((len + hlen) as u16).to_be_bytes());
        f[6..8].copy_from_slice(&frag_off.to_be_bytes());
        fill_ipv4_checksum(&mut f[..hlen]);
        frags.push(f);
    }
    frags
}

/// `ip6_find_1stfragopt`: the length of the unfragmentable part (the fixed header,
/// hop-by-hop and routing headers, destination options before a routing header)
/// and where the next header byte naming the first fragmentable one sits.
pub(crate) fn ip6_find_1stfragopt(packet: &[u8]) -> Option<(usize, usize)> {
    let (mut offset, mut nexthdr_at, mut found_rhdr) = (IPV6_HEADER_LEN, 6, false);
    while offset <= packet.len() {
        match packet[nexthdr_at] {
            NEXTHDR_HOP => {}
            NEXTHDR_ROUTING => found_rhdr = true,
            NEXTHDR_DEST if found_rhdr => return Some((offset, nexthdr_at)),
            NEXTHDR_DEST => {}
            _ => return Some((offset, nexthdr_at)),
        }
        if offset + 2 > packet.len() {
            return None;
        }
        nexthdr_at = offset;
        offset += (packet[offset + 1] as usize + 1) * 8;
        if offset > IPV6_MAXPLEN {
            return None;
        }
    }
    None
}

/// `ip6_fragment`'s slow path (`ip6_frag_init`, `ip6_frag_next`): pieces of `mtu`
/// minus the unfragmentable part and the fragment header, rounded down to 8 bytes,
/// each after a copy of the unfragmentable part whose last next header now names a
/// fragment header with `id`, the offset and MF. `None` if the headers cannot be
/// walked or `mtu` leaves no 8 bytes.
pub(crate) fn ip6_do_fragment(packet: &[u8], mtu: usize, id: u32) -> Option<Vec<Vec<u8>>> {
    let (hlen, nexthdr_at) = ip6_find_1stfragopt(packet)?;
    let room = mtu.checked_sub(hlen + FRAG_HDR_LEN).filter(|r| *r >= 8)?;
    let nexthdr = packet[nexthdr_at];
    let (mut left, mut ptr, mut offset) = (packet.len() - hlen, hlen, 0usize);
    let mut frags = Vec::with_capacity(left.div_ceil(room & !7));
    while left > 0 {
        let mut len = left.min(room);
        if len < left {
            len &= !7;
        }
        let mut f = Vec::with_capacity(hlen + FRAG_HDR_LEN + len);
        f.extend_from_slice(&packet[..hlen]);
        f[nexthdr_at] = NEXTHDR_FRAGMENT;
        left -= len;
        let frag_off = offset as u16 | if left > 0 { IP6_MF } else { 0 };
        f.extend_from_slice(&[nexthdr, 0]);
        f.extend_from_slice(&frag_off.to_be_bytes());
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(&packet[ptr..ptr + len]);
        let payload_len = (f.len() - IPV6_HEADER_LEN) as u16;
        f[4..6].copy_from_slice(&payload_len.to_be_bytes());
        ptr += len;
        offset += len;
        frags.push(f);
    }
    Some(frags)
}

#[cfg(test)]
mod tests;
