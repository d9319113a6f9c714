//! IPv4 reassembly (net/ipv4/ip_fragment.c, net/ipv4/inet_fragment.c): a fragment
//! to one of our addresses waits in its datagram's queue (`ip_defrag`, called by
//! `ip_local_deliver`) until the queue holds every byte, then the datagram goes on to
//! its protocol as one packet. Linux 6.x's rules: a fragment that overlaps one
//! already queued drops the whole datagram (RFC 5722's rule, which Linux applies to
//! IPv4 too: `IpExtReasmOverlaps`), an exact duplicate inside a run of adjacent
//! fragments is dropped alone, a queue lives `net.ipv4.ipfrag_time` from its first
//! fragment (then `IpReasmTimeout`, and a "fragment reassembly time exceeded" if the
//! first fragment came), no queue is found or made while the fragments' memory is
//! above `net.ipv4.ipfrag_high_thresh`, and a queue that `net.ipv4.ipfrag_max_dist`
//! other fragments from its source overtook starts again (`ip_frag_too_far`).

use super::icmp_out::IcmpError;
use super::Stack;
use crate::mib::Mib;
use crate::tcp::skbuff::rx_truesize;
use crate::time::Instant;
use core::time::Duration;
use lowtide_wire::ip::{fill_ipv4_checksum, IpRepr, Ipv4Frag, IPV4_DF};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use tracing::trace;

/// A queue's own charge to the fragments' memory: `sizeof(struct ipq)`, 200 bytes
/// as `ipv4_frags_init_net`'s comment counts it.
const IPQ_SIZE: u64 = 200;
/// The bytes of the first fragment kept for the ICMP error a timeout sends
/// (`__icmp_send` quotes at most 576 bytes less its headers).
const HEAD_KEEP: usize = 576;
/// The largest IPv4 datagram (`ip_frag_reasm`: `len > 65535` fails).
const IP_MAX_LEN: usize = 65535;

/// `ip_frag_ecn_table`, indexed by the OR of `1 << ecn` over the fragments
/// (`IPFRAG_ECN_NOT_ECT` 1, `ECT_1` 2, `ECT_0` 4, `CE` 8): the ECN bits to OR into
/// the datagram, or `None` to drop it (Not-ECT mixed with ECT or CE; RFC 3168
/// section 5.3).
pub(super) fn frag_ecn(ors: u8) -> Option<u8> {
    const CE: u8 = 8;
    match ors {
        _ if ors & 1 != 0 && ors != 1 => None,
        _ if ors & CE != 0 && ors != CE => Some(3),
        _ => Some(0),
    }
}

/// `frag_v4_compare_key` (source, destination, identification, protocol) and
/// `frag_v6_compare_key` (the same without a protocol: 0), with one `user`, local
/// delivery, and one VRF or interface here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct FragKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub id: u32,
    pub protocol: u8,
}

/// `inet_frag_queue_insert`'s answers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Insert {
    Ok,
    /// Inside one run already queued: the fragment alone is dropped (`IPFRAG_DUP`).
    Dup,
    /// Overlaps queued bytes otherwise: the datagram is dropped (`IPFRAG_OVERLAP`).
    Overlap,
}

/// One datagram's queue (`struct ipq`, IPv6's `struct frag_queue`).
pub(super) struct FragQueue {
    /// The runs of adjacent fragments (`rb_fragments`, each run's bytes joined), by
    /// offset; the last one holds `fragments_tail`.
    runs: BTreeMap<u32, Vec<u8>>,
    /// `q.len`: the datagram's length as far as known.
    pub len: u32,
    /// `q.meat`: the bytes queued.
    pub meat: u32,
    pub first_in: bool,
    pub last_in: bool,
    /// The first fragment (offset 0) as it came, cut at [`HEAD_KEEP`] (IPv6: past
    /// its headers), and its header parsed: its header heads the datagram, and a
    /// timeout quotes it.
    pub head: Option<(IpRepr, Vec<u8>)>,
    /// IPv6: the first fragment's fragment header offset and `nhoffset`, where the
    /// byte naming it is.
    pub unfrag: usize,
    pub nhoff: usize,
    /// The OR of `1 << ecn` of the fragments queued (`qp->ecn`).
    pub ecn: u8,
    /// `q.max_size` and `max_df_size`: the largest fragment, and the largest with DF.
    pub max_size: u32,
    max_df_size: u32,
    /// `qp->rid`: the source's fragment count at this queue's last fragment.
    rid: u32,
    /// The fragments' truesize, charged to the memory limit.
    pub truesize: u64,
    /// When the timer wheel runs the queue's timer (`ip_expire`), armed for
    /// `ipfrag_time` after the queue's start ([`crate::time::timer_list_runs`]).
    timer_runs: Instant,
}

impl FragQueue {
    fn new(now: Instant, expires: Instant) -> FragQueue {
        FragQueue {
            runs: BTreeMap::new(),
            len: 0,
            meat: 0,
            first_in: false,
            last_in: false,
            head: None,
            unfrag: 0,
            nhoff: 0,
            ecn: 0,
            max_size: 0,
            max_df_size: 0,
            rid: 0,
            truesize: 0,
            timer_runs: crate::time::timer_list_runs(now, expires),
        }
    }

    /// The end of `fragments_tail`: the last run's.
    fn tail_end(&self) -> Option<u32> {
        let (start, run) = self.runs.last_key_value()?;
        Some(start + run.len() as u32)
    }

    /// `inet_frag_queue_insert`: a fragment past the tail joins the last run when
    /// it is adjacent, else starts a run, and overlaps if it starts before the
    /// tail's end; any other fragment is a run of its own where it touches none, a
    /// duplicate inside one run, else an overlap.
    pub(super) fn insert(&mut self, offset: u32, data: &[u8]) -> Insert {
        let end = offset + data.len() as u32;
        match self.tail_end() {
            None => {}
            Some(tail) if tail < end => {
                if offset < tail {
                    return Insert::Overlap;
                }
                if offset == tail {
                    let run = self.runs.values_mut().next_back().expect("a run");
                    run.extend_from_slice(data);
                    return Insert::Ok;
                }
            }
            Some(_) => {
                let mut hit = self
                    .runs
                    .range(..end)
                    .filter(|(&s, r)| s + r.len() as u32 > offset);
                let first = hit.next().map(|(&s, r)| (s, s + r.len() as u32));
                match (first, hit.next()) {
                    (None, _) => {}
                    (Some((s, e)), None) if offset >= s && end <= e => return Insert::Dup,
                    _ => return Insert::Overlap,
                }
            }
        }
        self.runs.insert(offset, data.to_vec());
        Insert::Ok
    }

    /// The datagram's payload, every run in order (called when `meat == len`).
    pub(super) fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len as usize);
        self.runs.values().for_each(|r| out.extend_from_slice(r));
        out
    }
}

/// The reassembly state of a stack for one family (`net->ipv4.fqdir` with the
/// `inet_peer` fragment counters, `net->ipv6.fqdir`).
#[derive(Default)]
pub(super) struct Defrag {
    queues: HashMap<FragKey, FragQueue>,
    /// `frag_mem_limit`: the queues' and fragments' bytes.
    pub(super) mem: u64,
    /// Per source: `peer->rid`, the fragments received from it, and the queues
    /// that hold it (`inet_getpeer_v4` / `inet_putpeer`).
    peers: HashMap<IpAddr, (u32, u32)>,
}

impl Defrag {
    /// When the next queue expires.
    pub(super) fn next_expiry(&self) -> Option<Instant> {
        self.queues.values().map(|q| q.timer_runs).min()
    }

    /// The queue of `key`, if any.
    pub(super) fn get_mut(&mut self, key: &FragKey) -> Option<&mut FragQueue> {
        self.queues.get_mut(key)
    }

    /// Charges `bytes` more to the memory limit.
    pub(super) fn charge(&mut self, bytes: u64) {
        self.mem += bytes;
    }

    /// Unlinks a queue and frees its memory (`inet_frag_kill`, `inet_frag_destroy`).
    pub(super) fn kill(&mut self, key: &FragKey) -> Option<FragQueue> {
        let q = self.queues.remove(key)?;
        self.mem -= IPQ_SIZE + q.truesize;
        if let Some(p) = self.peers.get_mut(&key.src) {
            p.1 -= 1;
            if p.1 == 0 {
                self.peers.remove(&key.src);
            }
        }
        Some(q)
    }
}

/// How a fragment's queueing ended.
enum Queued {
    /// Kept; the datagram is not whole yet (`-EINPROGRESS`), or a duplicate dropped.
    Waiting,
    /// The datagram is whole: reassemble it.
    Complete,
    /// The datagram is dropped (`discard_qp`); `overlap` counts `IpExtReasmOverlaps`.
    Discard { overlap: bool },
}

impl Stack {
    /// The reassembly state of `key`'s family.
    pub(super) fn fqdir(&mut self, v6: bool) -> &mut Defrag {
        match v6 {
            false => &mut self.defrag,
            true => &mut self.defrag6,
        }
    }

    /// `ip_defrag`: queues the fragment `packet` (its header `ip`, its place
    /// `frag`); the whole datagram once its last byte came, as one packet with the
    /// first fragment's header (no fragment bits, the ECN the fragments agree on,
    /// DF if the largest fragment had it).
    pub(super) fn ip_defrag(
        &mut self,
        now: Instant,
        ip: &IpRepr,
        frag: Ipv4Frag,
        packet: &[u8],
    ) -> Option<Vec<u8>> {
        self.mib.inc(Mib::IpReasmReqds);
        let key = FragKey {
            src: ip.src,
            dst: ip.dst,
            id: frag.id.into(),
            protocol: ip.protocol,
        };
        if !self.ip_find(now, key) {
            self.mib.inc(Mib::IpReasmFails);
            trace!(src = %ip.src, "drop: fragment memory above ipfrag_high_thresh");
            return None;
        }
        match self.ip_frag_queue(now, key, ip, frag, packet) {
            Queued::Waiting => None,
            Queued::Complete => self.ip_frag_reasm(key),
            Queued::Discard { overlap } => {
                if overlap {
                    self.mib.inc(Mib::IpExtReasmOverlaps);
                }
                self.frag_discard(key);
                None
            }
        }
    }

    /// `discard_qp` / `discard_fq`: the datagram of `key` is dropped, its queue
    /// with it (`IpReasmFails`, IPv6's in snmp6).
    pub(super) fn frag_discard(&mut self, key: FragKey) {
        let ver = if key.src.is_ipv6() { 6 } else { 4 };
        self.fqdir(ver == 6).kill(&key);
        self.mib.inc(Mib::IpReasmFails.for_ip_version(ver));
        trace!(src = %key.src, id = key.id, "drop: fragment, datagram discarded");
    }

    /// `ip_find` / `fq_find` -> `inet_frag_find`: the queue of `key`, made if
    /// missing, unless the fragments' memory is above `ipfrag_high_thresh`
    /// (`ip6frag_high_thresh`). A queue whose timer is due expires first.
    pub(super) fn ip_find(&mut self, now: Instant, key: FragKey) -> bool {
        let v6 = key.src.is_ipv6();
        let (high, secs) = match v6 {
            false => (self.cfg.ipfrag_high_thresh, self.cfg.ipfrag_time),
            true => (self.cfg.ip6frag_high_thresh, self.cfg.ip6frag_time),
        };
        if high == 0 || self.fqdir(v6).mem > high {
            return false;
        }
        let due = (self.fqdir(v6).queues.get(&key)).is_some_and(|q| q.timer_runs <= now);
        if due {
            self.ip_expire(now, key);
        }
        let fq = self.fqdir(v6);
        if let Entry::Vacant(e) = fq.queues.entry(key) {
            e.insert(FragQueue::new(now, now + Duration::from_secs(secs.into())));
            fq.mem += IPQ_SIZE;
            fq.peers.entry(key.src).or_default().1 += 1;
        }
        true
    }

    /// `ip_frag_too_far`: counts the fragment in its source's `rid`; true when
    /// more than `ipfrag_max_dist` fragments from the source came since this queue's
    /// last one (`IpReasmFails`).
    fn ip_frag_too_far(&mut self, key: FragKey) -> bool {
        let max = self.cfg.ipfrag_max_dist;
        if max == 0 {
            return false;
        }
        let peer = self.defrag.peers.entry(key.src).or_default();
        peer.0 = peer.0.wrapping_add(1);
        let end = peer.0;
        let q = self.defrag.queues.get_mut(&key).expect("found");
        let start = std::mem::replace(&mut q.rid, end);
        let far = !q.runs.is_empty() && end.wrapping_sub(start) > max;
        if far {
            self.mib.inc(Mib::IpReasmFails);
        }
        far
    }

    /// `ip_frag_reinit`: the queue starts again, its timer re-armed.
    fn ip_frag_reinit(&mut self, now: Instant, key: FragKey) {
        let expires = now + Duration::from_secs(self.cfg.ipfrag_time.into());
        let q = self.defrag.queues.get_mut(&key).expect("found");
        self.defrag.mem -= q.truesize;
        let (rid, max_size, max_df_size) = (q.rid, q.max_size, q.max_df_size);
        *q = FragQueue::new(now, expires);
        (q.rid, q.max_size, q.max_df_size) = (rid, max_size, max_df_size);
    }

    /// `ip_frag_queue`: the fragment's bytes into its queue, by Linux's checks.
    fn ip_frag_queue(
        &mut self,
        now: Instant,
        key: FragKey,
        ip: &IpRepr,
        frag: Ipv4Frag,
        packet: &[u8],
    ) -> Queued {
        if self.ip_frag_too_far(key) {
            self.ip_frag_reinit(now, key);
        }
        let q = self.defrag.queues.get_mut(&key).expect("found");
        let offset = frag.offset;
        let mut end = offset + ip.payload_len as u32;
        if !frag.more {
            // The final fragment: nothing may lie beyond it, nor another end.
            if end < q.len || q.last_in && end != q.len {
                return Queued::Discard { overlap: false };
            }
            q.last_in = true;
            q.len = end;
        } else {
            end &= !7;
            if end > q.len {
                if q.last_in {
                    return Queued::Discard { overlap: false };
                }
                q.len = end;
            }
        }
        if end <= offset {
            return Queued::Discard { overlap: false };
        }
        let data = &packet[ip.header_len..ip.header_len + (end - offset) as usize];
        match q.insert(offset, data) {
            Insert::Ok => {}
            Insert::Dup => return Queued::Waiting,
            Insert::Overlap => return Queued::Discard { overlap: true },
        }
        let truesize = u64::from(rx_truesize(packet.len() as u32));
        q.meat += end - offset;
        q.ecn |= 1 << ip.ecn;
        q.truesize += truesize;
        if offset == 0 {
            q.first_in = true;
            q.head = Some((*ip, packet[..packet.len().min(HEAD_KEEP)].to_vec()));
        }
        let fragsize = end - offset + ip.header_len as u32;
        q.max_size = q.max_size.max(fragsize);
        if frag.df && fragsize > q.max_df_size {
            q.max_df_size = fragsize;
        }
        let complete = q.first_in && q.last_in && q.meat == q.len;
        self.defrag.mem += truesize;
        match complete {
            true => Queued::Complete,
            false => Queued::Waiting,
        }
    }

    /// `ip_frag_reasm`: the datagram of the whole queue `key`, which goes; `None`
    /// (`IpReasmFails`) when its fragments' ECN disagree or it is longer than an
    /// IPv4 datagram can be.
    fn ip_frag_reasm(&mut self, key: FragKey) -> Option<Vec<u8>> {
        let q = self.defrag.kill(&key)?;
        let (head_ip, head) = q.head.as_ref()?;
        let hlen = head_ip.header_len;
        let len = hlen + q.len as usize;
        let Some(ecn) = frag_ecn(q.ecn).filter(|_| len <= IP_MAX_LEN) else {
            self.mib.inc(Mib::IpReasmFails);
            trace!(src = %key.src, id = key.id, "drop: datagram, fragments' ECN or length");
            return None;
        };
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&head[..hlen]);
        out.extend_from_slice(&q.payload());
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        out[1] |= ecn;
        let df = if q.max_df_size == q.max_size {
            IPV4_DF
        } else {
            0
        };
        out[6..8].copy_from_slice(&df.to_be_bytes());
        fill_ipv4_checksum(&mut out[..hlen]);
        self.mib.inc(Mib::IpReasmOKs);
        Some(out)
    }

    /// `ip_expire` / `ip6_frag_expire`: the queue `key` timed out (`IpReasmFails`,
    /// `IpReasmTimeout`, IPv6's in snmp6); if its first fragment came, that
    /// fragment is answered with a "fragment reassembly time exceeded"
    /// (`ICMP_TIME_EXCEEDED` / `ICMPV6_TIME_EXCEED`, code `..._EXC_FRAGTIME`).
    fn ip_expire(&mut self, now: Instant, key: FragKey) {
        let ver = if key.src.is_ipv6() { 6 } else { 4 };
        let Some(q) = self.fqdir(ver == 6).kill(&key) else {
            return;
        };
        self.mib.inc(Mib::IpReasmFails.for_ip_version(ver));
        self.mib.inc(Mib::IpReasmTimeout.for_ip_version(ver));
        trace!(src = %key.src, id = key.id, "drop: fragments, reassembly timeout");
        if let Some((ip, head)) = q.head.filter(|_| q.first_in) {
            self.icmp_send_error(now, &ip, &head, IcmpError::FragTimeExceeded);
        }
    }

    /// Expires every queue whose timer is due by `now`.
    pub(super) fn defrag_timeout(&mut self, now: Instant) {
        let due: Vec<FragKey> = (self.defrag.queues.iter())
            .chain(self.defrag6.queues.iter())
            .filter(|(_, q)| q.timer_runs <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            self.ip_expire(now, key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, RxChecksum};
    use lowtide_wire::build::ip_packet;
    use lowtide_wire::checksum;

    const US: &str = "10.0.0.2";
    const THEM: &str = "10.0.0.1";

    fn stack(cfg: Config) -> Stack {
        let mut s = Stack::new(cfg, 1);
        s.add_address(US.parse().unwrap());
        s
    }

    /// An ICMP echo request of `len` data bytes from THEM to US, IPv4 id `id`.
    fn ping(len: usize, id: u16) -> Vec<u8> {
        let mut msg = vec![8u8, 0, 0, 0, 0x12, 0x34, 0, 1];
        msg.extend((0..len).map(|i| i as u8));
        let sum = !checksum::fold(checksum::sum(&msg, 0));
        msg[2..4].copy_from_slice(&sum.to_be_bytes());
        ip_packet(THEM.parse().unwrap(), US.parse().unwrap(), 1, &msg, id)
    }

    /// The fragment of the IPv4 `packet` holding its payload bytes `from..to`
    /// (`from` a multiple of 8), MF set unless it is the last, DF clear, `ecn`.
    fn frag(packet: &[u8], from: usize, to: usize, ecn: u8) -> Vec<u8> {
        let payload = &packet[20..];
        let to = to.min(payload.len());
        let mut f = packet[..20].to_vec();
        f.extend_from_slice(&payload[from..to]);
        f[1] = (f[1] & !3) | ecn;
        f[2..4].copy_from_slice(&((20 + to - from) as u16).to_be_bytes());
        let mf = if to < payload.len() { 0x2000 } else { 0 };
        f[6..8].copy_from_slice(&(mf | (from / 8) as u16).to_be_bytes());
        fill_ipv4_checksum(&mut f[..20]);
        f
    }

    fn feed(s: &mut Stack, now: Instant, pkts: &[Vec<u8>]) {
        for p in pkts {
            s.handle_packet(now, p, RxChecksum::Verify);
        }
    }

    fn count(s: &Stack, m: Mib) -> u64 {
        s.counters().get(m)
    }

    /// The echo reply's data, if the stack sent one (in fragments, in order, when
    /// larger than the MTU: stack/ip_output.rs).
    fn reply(s: &mut Stack, now: Instant) -> Option<Vec<u8>> {
        let mut msg = Vec::new();
        while let Some(t) = s.poll_transmit(now) {
            let p = [&t.packet[..], &t.payload.to_bytes()[..]].concat();
            let hlen = usize::from(p[0] & 0x0f) * 4;
            let frag = u16::from_be_bytes([p[6], p[7]]);
            if msg.is_empty() {
                assert_eq!((p[9], p[hlen], frag & 0x1fff), (1, 0, 0), "an echo reply");
            }
            msg.extend_from_slice(&p[hlen..]);
            if frag & 0x2000 == 0 {
                break;
            }
        }
        (!msg.is_empty()).then(|| msg[8..].to_vec())
    }

    /// A ping of 3000 bytes in three fragments, in any order and with a duplicate,
    /// is answered whole; every fragment counts as received and for reassembly,
    /// the datagram once as delivered and reassembled.
    #[test]
    fn fragments_in_any_order_make_the_datagram() {
        let p = ping(3000, 7);
        let f = |a, b| frag(&p, a, b, 0);
        for order in [[0, 1, 2], [2, 0, 1], [1, 2, 0]] {
            let mut s = stack(Config::default());
            let frags = [f(0, 1480), f(1480, 2960), f(2960, 4000)];
            let mut pkts: Vec<Vec<u8>> = order.iter().map(|&i| frags[i].clone()).collect();
            pkts.insert(2, frags[order[0]].clone()); // a duplicate, dropped alone
            feed(&mut s, Instant::ZERO, &pkts);
            let data = reply(&mut s, Instant::ZERO).expect("the datagram answered");
            assert_eq!(data, p[28..], "{order:?}");
            assert_eq!(count(&s, Mib::IpInReceives), 4);
            assert_eq!(count(&s, Mib::IpReasmReqds), 4);
            assert_eq!(count(&s, Mib::IpReasmOKs), 1);
            assert_eq!(count(&s, Mib::IpReasmFails), 0);
            assert_eq!(count(&s, Mib::IpInDelivers), 1);
            assert_eq!(s.defrag.mem, 0, "every byte freed");
            assert!(s.defrag.peers.is_empty());
        }
    }

    /// A fragment overlapping queued bytes drops the datagram
    /// (`IpExtReasmOverlaps`, `IpReasmFails`); so do a second last fragment with
    /// another end and bytes past the last fragment's end.
    #[test]
    fn overlaps_and_conflicting_ends_drop_the_datagram() {
        let p = ping(3000, 7);
        // (fragments, the one whose MF is cleared, an overlap).
        type Case<'a> = (&'a [(usize, usize)], Option<usize>, bool);
        let cases: [Case; 3] = [
            (&[(0, 1480), (1472, 2960)], None, true),
            (&[(2960, 4000), (1480, 2000)], Some(1), false),
            (&[(1480, 2000), (2000, 2960)], Some(0), false),
        ];
        for (parts, last, overlap) in cases {
            let mut s = stack(Config::default());
            let mut pkts: Vec<Vec<u8>> = parts.iter().map(|&(a, b)| frag(&p, a, b, 0)).collect();
            if let Some(i) = last {
                pkts[i][6] &= !0x20;
                fill_ipv4_checksum(&mut pkts[i][..20]);
            }
            feed(&mut s, Instant::ZERO, &pkts);
            assert_eq!(count(&s, Mib::IpReasmFails), 1, "{parts:?}");
            assert_eq!(count(&s, Mib::IpExtReasmOverlaps), u64::from(overlap));
            assert_eq!(s.defrag.mem, 0);
            // The rest of the datagram then starts a new queue, which times out.
            feed(&mut s, Instant::ZERO, &[frag(&p, 0, 1480, 0)]);
            assert!(reply(&mut s, Instant::ZERO).is_none());
        }
    }

    /// `ip_expire`: after `ipfrag_time` the queue goes (`IpReasmTimeout`), and a
    /// queue that had its first fragment answers it with a time exceeded,
    /// fragment reassembly (11/1) quoting it; one without it sends nothing.
    #[test]
    fn a_timeout_answers_the_first_fragment() {
        let p = ping(3000, 7);
        for first in [true, false] {
            let mut s = stack(Config::default());
            let from = if first { 0 } else { 1480 };
            feed(&mut s, Instant::ZERO, &[frag(&p, from, from + 1480, 0)]);
            let at = s.poll_timeout().expect("the queue's timer");
            // ipfrag_time (30 s), as the timer wheel runs it: level 3, 512-jiffy
            // buckets, so 30.208 s.
            assert_eq!(at, Instant::ZERO + Duration::from_millis(30_208));
            s.handle_timeout(at);
            assert_eq!(count(&s, Mib::IpReasmTimeout), 1);
            assert_eq!(count(&s, Mib::IpReasmFails), 1);
            assert_eq!(s.poll_timeout(), None);
            let t = s.poll_transmit(at);
            assert_eq!(t.is_some(), first);
            let Some(t) = t else { continue };
            let ip = IpRepr::parse(&t.packet, true).unwrap();
            let msg = &t.packet[ip.header_len..];
            assert_eq!((msg[0], msg[1]), (11, 1));
            let quoted = &frag(&p, 0, 1480, 0)[..576 - 28];
            assert_eq!(&msg[8..], quoted);
            assert_eq!(count(&s, Mib::IcmpOutTimeExcds), 1);
        }
    }

    /// Not-ECT mixed with ECT drops the datagram; ECT(0) with CE makes it CE.
    #[test]
    fn fragments_ecn_as_rfc_3168() {
        let p = ping(2000, 7);
        let mut s = stack(Config::default());
        feed(
            &mut s,
            Instant::ZERO,
            &[frag(&p, 0, 1480, 2), frag(&p, 1480, 3000, 0)],
        );
        assert_eq!(count(&s, Mib::IpReasmFails), 1);
        assert!(reply(&mut s, Instant::ZERO).is_none());
        let mut s = stack(Config::default());
        feed(
            &mut s,
            Instant::ZERO,
            &[frag(&p, 0, 1480, 2), frag(&p, 1480, 3000, 3)],
        );
        assert_eq!(count(&s, Mib::IpReasmOKs), 1);
        assert_eq!(count(&s, Mib::IpExtInCEPkts), 1);
    }

    /// Above `ipfrag_high_thresh` no fragment finds a queue, its own included.
    #[test]
    fn memory_above_high_thresh_refuses_fragments() {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.ipfrag_low_thresh", "1000").unwrap();
        cfg.set("net.ipv4.ipfrag_high_thresh", "3000").unwrap();
        assert!(cfg.set("net.ipv4.ipfrag_low_thresh", "3001").is_err());
        let mut s = stack(cfg);
        let a = ping(3000, 1);
        let b = ping(3000, 2);
        feed(
            &mut s,
            Instant::ZERO,
            &[frag(&a, 0, 1480, 0), frag(&b, 0, 1480, 0)],
        );
        assert!(s.defrag.mem > 3000, "{}", s.defrag.mem);
        feed(&mut s, Instant::ZERO, &[frag(&a, 1480, 2960, 0)]);
        assert_eq!(count(&s, Mib::IpReasmFails), 1);
        assert_eq!(count(&s, Mib::IpReasmReqds), 3);
    }

    /// `ip_frag_too_far`: a queue overtaken by more than `ipfrag_max_dist`
    /// fragments of its source starts again (its old fragments gone).
    #[test]
    fn a_queue_overtaken_by_its_source_starts_again() {
        let mut cfg = Config::default();
        cfg.set("net.ipv4.ipfrag_max_dist", "4").unwrap();
        let mut s = stack(cfg);
        let a = ping(2000, 1);
        feed(&mut s, Instant::ZERO, &[frag(&a, 0, 1480, 0)]);
        for id in 2..7 {
            feed(&mut s, Instant::ZERO, &[frag(&ping(2000, id), 0, 1480, 0)]);
        }
        feed(&mut s, Instant::ZERO, &[frag(&a, 1480, 3000, 0)]);
        assert_eq!(count(&s, Mib::IpReasmFails), 1);
        assert_eq!(
            count(&s, Mib::IpReasmOKs),
            0,
            "its first fragment was flushed"
        );
        feed(&mut s, Instant::ZERO, &[frag(&a, 0, 1480, 0)]);
        assert_eq!(count(&s, Mib::IpReasmOKs), 1);
        assert!(reply(&mut s, Instant::ZERO).is_some());
    }

    #[test]
    fn ecn_table_is_linuxs() {
        // Not-ECT alone, ECT alone, CE with ECT: kept; CE alone stays CE.
        assert_eq!(frag_ecn(1), Some(0));
        assert_eq!(frag_ecn(2 | 4), Some(0));
        assert_eq!(frag_ecn(8 | 4), Some(3));
        assert_eq!(frag_ecn(8 | 2 | 4), Some(3));
        assert_eq!(frag_ecn(8), Some(0));
        // Not-ECT with anything else: dropped.
        for o in [1 | 2, 1 | 4, 1 | 8, 1 | 2 | 4 | 8] {
            assert_eq!(frag_ecn(o), None, "{o}");
        }
    }

    /// Runs as `inet_frag_queue_insert` keeps them: appended at the tail, a new
    /// run past a gap, a hole filled as a run of its own, a duplicate inside one
    /// run, an overlap across two runs or past the tail's start.
    #[test]
    fn insert_keeps_runs_and_tells_dup_from_overlap() {
        let mut q = FragQueue::new(Instant::ZERO, Instant::ZERO);
        assert_eq!(q.insert(0, &[1; 8]), Insert::Ok);
        assert_eq!(q.insert(8, &[2; 8]), Insert::Ok);
        assert_eq!(q.runs.len(), 1, "appended to the last run");
        assert_eq!(q.insert(32, &[4; 8]), Insert::Ok);
        assert_eq!(q.runs.len(), 2);
        assert_eq!(q.insert(8, &[2; 8]), Insert::Dup);
        assert_eq!(q.insert(0, &[1; 16]), Insert::Dup, "inside the first run");
        assert_eq!(
            q.insert(24, &[0; 16]),
            Insert::Overlap,
            "past the tail's start"
        );
        assert_eq!(q.insert(16, &[3; 8]), Insert::Ok, "the hole");
        assert_eq!(q.runs.len(), 3, "a run of its own");
        assert_eq!(q.insert(8, &[0; 16]), Insert::Overlap, "across two runs");
        let runs: Vec<(u32, usize)> = q.runs.iter().map(|(&o, r)| (o, r.len())).collect();
        assert_eq!(runs, [(0, 16), (16, 8), (32, 8)], "24..32 is still a hole");
    }
}
