//! A host's device as the world sets it up: its qdisc (the scenario's or
//! `net.core.default_qdisc`'s) and what a classifying qdisc reads of each packet.

use crate::nic::NicQueue;
use crate::payload::splitmix64;
use crate::qdisc::fifo::Fifo;
use crate::qdisc::{QdiscSpec, Skb};
use crate::scenario::Scenario;
use crate::world::{derive_seed, HOST_A};
use lowtide::{Instant, Transmit};
use std::net::{IpAddr, SocketAddr};

/// Host `i`'s device queue: the bottleneck's qdisc (host A's, if the scenario
/// names one) or `net.core.default_qdisc`'s; a fifo of `txqueuelen` (the queue
/// limit) for `pfifo_fast` and for names the simulator does not model. The
/// step-marking option applies to a pfifo.
pub(crate) fn device_queue(sc: &Scenario, i: usize) -> NicQueue {
    let limit = sc.queue_limit.min(u32::MAX as usize) as u32;
    let spec = device_qdisc(sc, i);
    let at = sc.ecn_mark_at.map(|k| k.min(u32::MAX as usize) as u32);
    match spec {
        QdiscSpec::PfifoFast | QdiscSpec::Pfifo(None) => {
            NicQueue::with_qdisc(Box::new(Fifo::pfifo(limit).with_ecn_mark_at(at)))
        }
        QdiscSpec::Pfifo(Some(l)) => {
            NicQueue::with_qdisc(Box::new(Fifo::pfifo(l).with_ecn_mark_at(at)))
        }
        spec => {
            let psched_mtu = sc.config.mtu + 14;
            NicQueue::with_qdisc(spec.build(
                limit,
                psched_mtu,
                derive_seed(sc.seed, 201 + i as u64),
            ))
        }
    }
}

/// Host `i`'s qdisc: the scenario's for host A if it names one, else
/// `net.core.default_qdisc`'s.
fn device_qdisc(sc: &Scenario, i: usize) -> QdiscSpec {
    match (&sc.qdisc, i) {
        (Some(q), HOST_A) => q.clone(),
        _ => QdiscSpec::default_qdisc(&sc.config.default_qdisc).unwrap_or(QdiscSpec::PfifoFast),
    }
}

/// Host `i`'s stack configuration: the scenario's, and whether its device runs
/// sch_fq, which paces the sockets it sees by their EDT times (`SK_PACING_FQ`).
pub(crate) fn host_config(sc: &Scenario, i: usize) -> lowtide::Config {
    let mut cfg = sc.config.clone();
    cfg.device_fq = Some(matches!(device_qdisc(sc, i), QdiscSpec::Fq(..)));
    cfg
}

/// A packet with what a classifying qdisc reads: its socket (the 4-tuple stands
/// for it; a SYN-ACK belongs to the listener, so to no full socket, and fq files
/// it as an orphan), its flow hash, and its departure time: the EDT time TCP
/// stamped on it (0 at time 0: no timestamp, which fq treats the same). Behind fq
/// the socket is `SK_PACING_FQ` ([`host_config`]) and holds nothing back itself.
pub(crate) fn classify(
    tx: Transmit,
    flow: u32,
    tuple: Option<(SocketAddr, SocketAddr)>,
    now: Instant,
    seed: u64,
) -> Skb<Transmit> {
    let (sk, hash) = identity(&tx.packet, tuple, seed);
    let tstamp = tx.tstamp.as_nanos();
    let mut skb = Skb::new(tx, now.as_nanos());
    skb.tag = flow;
    skb.hash = hash;
    skb.sk = sk;
    // A TCP socket's sk_hash is the hash of its 4-tuple (inet_ehashfn).
    skb.sk_hash = hash;
    skb.tstamp = tstamp;
    skb
}

/// The flow hash (`skb_get_hash`) of a packet with addresses `tuple`, seeded:
/// what a router's classifying qdisc reads of a forwarded packet, which has no
/// socket.
pub(crate) fn flow_hash(tuple: Option<(SocketAddr, SocketAddr)>, seed: u64) -> u32 {
    identity(&[], tuple, seed).1
}

/// The socket id (none for a SYN-ACK) and flow hash of a packet whose headers are
/// `headers` and addresses `tuple`: a seeded hash of the 4-tuple.
fn identity(
    headers: &[u8],
    tuple: Option<(SocketAddr, SocketAddr)>,
    seed: u64,
) -> (Option<u64>, u32) {
    let Some((s, d)) = tuple else {
        return (None, 0);
    };
    let mut h = seed;
    let ports = ((s.port() as u64) << 16) | d.port() as u64;
    for part in [ip_bits(s.ip()), ip_bits(d.ip()), ports] {
        h = splitmix64(h ^ part);
    }
    let syn_ack = crate::qdisc::tcp_flags(headers).is_some_and(|f| f & 0x12 == 0x12);
    ((!syn_ack).then_some(h >> 1), (h >> 32) as u32)
}

/// An address as 64 bits for the flow hash.
fn ip_bits(ip: IpAddr) -> u64 {
    match ip {
        IpAddr::V4(a) => u32::from(a) as u64,
        IpAddr::V6(a) => {
            let b = u128::from(a);
            (b as u64) ^ ((b >> 64) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 TCP header pair with `flags`.
    fn headers(flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[9] = 6;
        p[33] = flags;
        p
    }

    fn tuple(sport: u16) -> Option<(SocketAddr, SocketAddr)> {
        let s = format!("10.0.0.1:{sport}").parse().unwrap();
        Some((s, "10.0.0.2:5001".parse().unwrap()))
    }

    /// One socket per 4-tuple, its hash the same for each of its packets; a
    /// SYN-ACK (the listener's) has no socket; the seed perturbs the hash.
    #[test]
    fn identity_by_four_tuple() {
        let ack = identity(&headers(0x10), tuple(40000), 1);
        assert_eq!(ack, identity(&headers(0x18), tuple(40000), 1));
        let other = identity(&headers(0x10), tuple(40001), 1);
        assert!(ack.0.is_some() && ack.0 != other.0 && ack.1 != other.1);
        let synack = identity(&headers(0x12), tuple(40000), 1);
        assert_eq!(synack, (None, ack.1), "an orphan, in the same hash bucket");
        assert_ne!(identity(&headers(0x10), tuple(40000), 2).1, ack.1);
        assert_eq!(identity(&headers(0x10), None, 1), (None, 0));
        assert_eq!(crate::qdisc::tcp_flags(&[0x45]), None);
    }
}
