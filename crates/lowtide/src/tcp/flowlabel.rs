//! IPv6 flow labels of TCP's packets (net/ipv6/ip6_output.c's `ip6_make_flowlabel`,
//! include/net/sock.h's `sk_set_txhash` / `sk_rethink_txhash`): with
//! `net.ipv6.auto_flowlabels` a packet's label is its sender's transmit hash
//! (`sk_txhash`, never 0), so all of a connection's packets share one label until
//! the connection picks another hash to try another path through routers that
//! hash flows ([RFC 6438](https://www.rfc-editor.org/rfc/rfc6438)): at an RTO or a
//! SYN's timeout (`tcp_write_timeout`), and when its peer sends data again under a
//! new label of its own (`tcp_rcv_spurious_retrans`), as long as `sk_txrehash`
//! (`net.core.txrehash`, `SO_TXREHASH`) allows. A request takes its own hash and
//! another at each SYN-ACK it sends again (`tcp_rtx_synack`), which its child
//! keeps; TIME-WAIT keeps the connection's (`tw_txhash`). A reset or ACK without a
//! socket of its own is labelled from the hash of its flow
//! (`skb_get_hash_flowi6`).
//!
//! Linux draws its hashes at random (`net_tx_rndhash`); lowtide keys them from the
//! stack's secret, the connection's addresses and the hash before (the same
//! unpredictability to an observer, and a simulation stays deterministic).

use super::sock::Tcb;
use super::{Ctx, FourTuple};
use crate::config::Config;
use crate::mib::Mib;
use crate::secure::{ip, sip};
use core::hash::Hasher;
use lowtide_wire::ip::PROTO_TCP;

/// `IPV6_FLOWLABEL_MASK`: the 20 bits of the label.
pub(crate) const IPV6_FLOWLABEL_MASK: u32 = 0x000f_ffff;
/// `IPV6_FLOWLABEL_STATELESS_FLAG`: RFC 6437's stateless half of the label space.
const IPV6_FLOWLABEL_STATELESS_FLAG: u32 = 0x0008_0000;
/// `FLOWLABEL_REFLECT_ESTABLISHED`: new sockets reflect their peer's label.
pub(crate) const FLOWLABEL_REFLECT_ESTABLISHED: u8 = 1;
/// `FLOWLABEL_REFLECT_TCP_RESET`: resets without a full socket reflect the
/// segment's label.
pub(crate) const FLOWLABEL_REFLECT_TCP_RESET: u8 = 2;
/// `FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES`: an echo reply carries its request's
/// label.
pub(crate) const FLOWLABEL_REFLECT_ICMPV6_ECHO_REPLIES: u8 = 4;
/// `IP6_AUTO_FLOW_LABEL_FORCED`: every packet gets one, whatever its socket says.
const IP6_AUTO_FLOW_LABEL_FORCED: u8 = 3;

/// What the flow label of a TCP packet comes from (`ip6_xmit`'s `fl6->flowlabel`,
/// the skb's hash, the sending socket's `IPV6_AUTOFLOWLABEL`). IPv4 packets ignore
/// it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FlowLabel {
    /// The sender's `sk_txhash` (the skb's `hash`); 0: none, the flow's own hash.
    pub txhash: u32,
    /// A label the sender chose (`np->flow_label`, a reflected one); 0: none.
    pub label: u32,
    /// The sender's `IPV6_AUTOFLOWLABEL` if it set one (`autoflowlabel_set`);
    /// `None`: the sysctl's default (`ip6_default_np_autolabel`).
    pub auto: Option<bool>,
}

impl FlowLabel {
    /// `ip6_make_flowlabel` for a packet of `tuple`: the label given, else (when
    /// `auto_flowlabels` and the socket allow) the hash rotated by 16 bits to its
    /// low 20, with the stateless flag under `flowlabel_state_ranges`.
    pub(crate) fn make(&self, cfg: &Config, key: (u64, u64), tuple: &FourTuple) -> u32 {
        self.make_proto(cfg, key, tuple, PROTO_TCP)
    }

    /// [`FlowLabel::make`] for a packet of protocol `proto` (UDP, ICMPv6: their
    /// `__ip6_make_skb`), whose flow hash covers the protocol as
    /// `__get_hash_from_flowi6`'s keys do; an ICMPv6 flow's "ports" are its type
    /// and code (`fl6_icmp_type`, `fl6_icmp_code` share `fl6_dport`'s bytes).
    pub(crate) fn make_proto(
        &self,
        cfg: &Config,
        key: (u64, u64),
        tuple: &FourTuple,
        proto: u8,
    ) -> u32 {
        let label = self.label & IPV6_FLOWLABEL_MASK;
        let auto = self.auto.unwrap_or_else(|| default_autolabel(cfg));
        let mode = cfg.ipv6_auto_flowlabels;
        if label != 0 || mode == 0 || (!auto && mode != IP6_AUTO_FLOW_LABEL_FORCED) {
            return label;
        }
        let hash = match self.txhash {
            0 => flow_hash(key, tuple, proto),
            h => h,
        };
        let mut label = hash.rotate_left(16) & IPV6_FLOWLABEL_MASK;
        if cfg.ipv6_flowlabel_state_ranges {
            label |= IPV6_FLOWLABEL_STATELESS_FLAG;
        }
        label
    }
}

/// `ip6_default_np_autolabel`: sockets label their packets by default under
/// `auto_flowlabels` 1 (opt-out) and 3 (forced), not 0 or 2 (opt-in).
pub(crate) fn default_autolabel(cfg: &Config) -> bool {
    matches!(cfg.ipv6_auto_flowlabels, 1 | IP6_AUTO_FLOW_LABEL_FORCED)
}

/// `skb_get_hash_flowi6` of a packet without a socket hash: the flow's keyed hash
/// (never 0, as `__flow_hash_from_keys`).
fn flow_hash(key: (u64, u64), tuple: &FourTuple, proto: u8) -> u32 {
    keyed(key, tuple, b"flow", u32::from(proto))
}

/// `net_tx_rndhash` for `tuple`'s next transmit hash after `prev` (0 for the first):
/// never 0.
pub(crate) fn next_txhash(key: (u64, u64), tuple: &FourTuple, prev: u32) -> u32 {
    keyed(key, tuple, b"txhash", prev)
}

/// SipHash of the flow's addresses and ports under `key` (Linux: `siphash` over the
/// flow keys), told apart by `what` and `salt`.
fn keyed(key: (u64, u64), tuple: &FourTuple, what: &[u8], salt: u32) -> u32 {
    let mut h = sip(key);
    h.write(what);
    for a in [tuple.local, tuple.remote] {
        ip(&mut h, a.ip());
        h.write_u16(a.port());
    }
    h.write_u32(salt);
    (h.finish() as u32).max(1)
}

impl super::sock::TimeWaitSock {
    /// What TIME-WAIT's replies are labelled from (`tcp_v6_timewait_ack`,
    /// `tcp_v6_send_reset`: `tw_txhash`, `tw_flowlabel`).
    pub(crate) fn flow(&self) -> FlowLabel {
        FlowLabel {
            txhash: self.txhash,
            label: self.flowlabel,
            auto: None,
        }
    }
}

impl Tcb {
    /// What this connection's packets are labelled from.
    pub(crate) fn flow_label(&self) -> FlowLabel {
        FlowLabel {
            txhash: self.txhash,
            label: self.flow_label,
            auto: self.autoflowlabel,
        }
    }

    /// What a reset this connection sends in answer to a segment is labelled
    /// from (`tcp_v6_send_reset` with a full socket): its hash, and the segment's
    /// label if it reflects (`np->repflow`).
    pub(crate) fn reset_flow_label(&self, ctx: &Ctx) -> FlowLabel {
        FlowLabel {
            txhash: self.txhash,
            label: if self.repflow {
                ctx.rx_flowlabel.unwrap_or(0)
            } else {
                0
            },
            auto: None,
        }
    }

    /// What a reset the listener sends for this request is labelled from
    /// (`tcp_v6_send_reset` with the listener: no hash of its own, its
    /// `np->repflow`).
    pub(crate) fn listener_flow_label(&self, ctx: &Ctx) -> FlowLabel {
        FlowLabel {
            label: self.reset_flow_label(ctx).label,
            ..FlowLabel::default()
        }
    }

    /// `sk_set_txhash` at `connect()` (`tcp_v4_connect`, `tcp_v6_connect`) or for a
    /// new request (`tcp_conn_request`'s `net_tx_rndhash`).
    pub(crate) fn set_txhash(&mut self, ctx: &Ctx) {
        self.txhash = next_txhash(ctx.flow_key, &self.tuple, self.txhash);
    }

    /// `sk_rethink_txhash`: a new hash (and label) if the socket has one and
    /// `sk_txrehash` allows; whether it did.
    pub(crate) fn rethink_txhash(&mut self, ctx: &Ctx) -> bool {
        if self.txhash == 0 || !self.txrehash {
            return false;
        }
        self.set_txhash(ctx);
        true
    }

    /// What a segment of this connection is labelled from: a Fast Open child's
    /// SYN-ACK carries its request's hash (`tcp_make_synack`'s `skb_set_hash` from
    /// `tcp_rsk(req)->txhash`), everything else the socket's.
    pub(crate) fn segment_flow_label(&self, syn: bool) -> FlowLabel {
        let mut fl = self.flow_label();
        if syn && self.req_txhash != 0 && self.passive_fastopen() {
            fl.txhash = self.req_txhash;
        }
        fl
    }

    /// `tcp_rtx_synack`: a request sending its SYN-ACK again takes a new hash when
    /// its listener's `sk_txrehash` allows. A Fast Open child keeps its own
    /// `sk_txhash` (copied from the request when it was made): Linux changes only
    /// the request's, which the child's SYN-ACKs carry.
    pub(crate) fn rtx_synack_rehash(&mut self, ctx: &Ctx) {
        if !self.txrehash {
            return;
        }
        match self.passive_fastopen() {
            true => {
                let prev = match self.req_txhash {
                    0 => self.txhash,
                    h => h,
                };
                self.req_txhash = next_txhash(ctx.flow_key, &self.tuple, prev);
            }
            false => self.set_txhash(ctx),
        }
    }

    /// `tcp_save_lrcv_flowlabel`: the label of the data segment just taken (in
    /// order, out of order, or again).
    pub(crate) fn save_lrcv_flowlabel(&mut self, ctx: &Ctx) {
        if let Some(label) = ctx.rx_flowlabel {
            self.lrcv_flowlabel = label;
        }
    }

    /// `tcp_rcv_spurious_retrans`'s repath: data we already had came again under a
    /// new label (the sender had an RTO, so our ACKs may not reach it): a new hash
    /// for ours, unless our own RTOs are already changing it (Loss).
    pub(crate) fn rehash_on_duplicate_data(&mut self, ctx: &mut Ctx) {
        let Some(label) = ctx.rx_flowlabel else {
            return;
        };
        if self.ca_state != super::cong::CaState::Loss
            && self.lrcv_flowlabel != label
            && self.rethink_txhash(ctx)
        {
            ctx.mib.inc(Mib::TcpExtTcpDuplicateDataRehash);
        }
        self.lrcv_flowlabel = label;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    fn tuple() -> FourTuple {
        FourTuple {
            local: "[fd3d::1]:8080".parse::<SocketAddr>().unwrap(),
            remote: "[fd3d::2]:40000".parse::<SocketAddr>().unwrap(),
        }
    }

    #[test]
    fn labels_follow_auto_flowlabels_and_the_socket() {
        let mut cfg = Config::default();
        let t = tuple();
        let fl = FlowLabel {
            txhash: 0x1234_5671,
            ..FlowLabel::default()
        };
        // rol32(hash, 16) & IPV6_FLOWLABEL_MASK.
        assert_eq!(fl.make(&cfg, (1, 2), &t), 0x1_1234);
        cfg.ipv6_flowlabel_state_ranges = true;
        assert_eq!(fl.make(&cfg, (1, 2), &t), 0x9_1234);
        let off = FlowLabel {
            auto: Some(false),
            ..fl
        };
        assert_eq!(off.make(&cfg, (1, 2), &t), 0, "opted out");
        cfg.ipv6_auto_flowlabels = 3;
        assert_ne!(off.make(&cfg, (1, 2), &t), 0, "forced");
        cfg.ipv6_auto_flowlabels = 2;
        assert_eq!(fl.make(&cfg, (1, 2), &t), 0, "opt-in only");
        let on = FlowLabel {
            auto: Some(true),
            ..fl
        };
        assert_ne!(on.make(&cfg, (1, 2), &t), 0, "opted in");
        cfg.ipv6_auto_flowlabels = 0;
        assert_eq!(on.make(&cfg, (1, 2), &t), 0, "off");
        let given = FlowLabel {
            label: 0xabcde,
            ..on
        };
        assert_eq!(
            given.make(&cfg, (1, 2), &t),
            0xabcde,
            "a chosen label stays"
        );
    }

    #[test]
    fn a_flow_without_a_socket_hash_is_labelled_from_its_own() {
        let cfg = Config::default();
        let t = tuple();
        let a = FlowLabel::default().make(&cfg, (1, 2), &t);
        assert_ne!(a, 0);
        assert_eq!(a, FlowLabel::default().make(&cfg, (1, 2), &t), "stable");
        let next = next_txhash((1, 2), &t, 0);
        assert_ne!(next, 0);
        assert_ne!(next_txhash((1, 2), &t, next), next, "a rethink moves it");
    }
}
