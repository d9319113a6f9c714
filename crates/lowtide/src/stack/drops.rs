//! `sk_drops` at the stack (tcp/drops.rs has the rules): `tcp_v4_rcv`'s
//! `discard_and_relse` on the socket its lookup found, `tcp_listendrop`, and the
//! drops a request's input owes its listener.

use super::{Sock, Stack};
use crate::mib::Mib;
use crate::tcp::drops::sk_drops_add;

impl Stack {
    /// `sk_drops_skbadd` of the segment being handled on the socket in `index` as
    /// `tcp_v4_rcv` holds it: a listener, a connection, or for a request
    /// (`TCP_NEW_SYN_RECV`) its listener (`sk = req->rsk_listener`).
    pub(super) fn sk_drops_skbadd(&mut self, index: u32) {
        let segs = self.rx_segs;
        let parent = match &mut self.slots[index as usize].sock {
            Some(Sock::Listener(l)) => return sk_drops_add(&mut l.sk_drops, segs),
            Some(Sock::Tcp(t)) if t.is_request() => t.parent,
            Some(Sock::Tcp(t)) => return sk_drops_add(&mut t.sk_drops, segs),
            _ => return,
        };
        self.listener_drops((parent, segs));
    }

    /// `tcp_listendrop` on the listener in `l`: `TcpExtListenDrops` and its
    /// `sk_drops_inc`.
    pub(super) fn listendrop(&mut self, l: u32) {
        self.mib.inc(Mib::TcpExtListenDrops);
        self.listener_drops((Some(l), 1));
    }

    /// Adds `n` to the `sk_drops` of the listener `parent`, if it is one: what a
    /// request's input counted there (`ReqState::listener_drops`).
    pub(super) fn listener_drops(&mut self, (parent, n): (Option<u32>, u32)) {
        if n == 0 {
            return;
        }
        if let Some(Some(Sock::Listener(l))) = parent.map(|p| &mut self.slots[p as usize].sock) {
            sk_drops_add(&mut l.sk_drops, n);
        }
    }

    /// A segment whose checksum is bad (`RxChecksum::Verify`, Linux's
    /// `CHECKSUM_NONE`): `skb_checksum_init` checks one of at most
    /// `CHECKSUM_BREAK` (76) bytes before the lookup, uncounted; a longer one is
    /// checked where the socket's input completes it, and only
    /// `tcp_rcv_established` (fast path and slow) goes to `csum_error:` and
    /// `tcp_drop_reason`: an ESTABLISHED connection counts it, a listener, a
    /// request, another state (`tcp_v4_do_rcv`'s `csum_err:`) or TIME-WAIT do not.
    pub(super) fn csum_error_drop(&mut self, ip: &lowtide_wire::ip::IpRepr, seg: &[u8]) {
        const CHECKSUM_BREAK: usize = 76;
        if seg.len() <= CHECKSUM_BREAK {
            return;
        }
        let port = |i: usize| u16::from_be_bytes([seg[i], seg[i + 1]]);
        let tuple = crate::tcp::FourTuple {
            local: std::net::SocketAddr::new(ip.dst, port(2)),
            remote: std::net::SocketAddr::new(ip.src, port(0)),
        };
        let Some(index) = self.ehash_lookup(&tuple) else {
            return;
        };
        let hlen = ((seg[12] >> 4) as usize * 4).min(seg.len());
        let segs = crate::tcp::drops::rx_gso_segs(&self.cfg, ip.src.is_ipv6(), seg.len() - hlen);
        if let Some(Sock::Tcp(t)) = &mut self.slots[index as usize].sock {
            if t.state == crate::TcpState::Established {
                sk_drops_add(&mut t.sk_drops, segs);
            }
        }
    }

    /// `sk_drops_read` of the socket in `index` (`SK_MEMINFO_DROPS`): a
    /// connection's or a listener's, 0 for anything else.
    pub(super) fn sk_drops_read(&self, index: u32) -> u32 {
        match &self.slots[index as usize].sock {
            Some(Sock::Listener(l)) => l.sk_drops as u32,
            Some(Sock::Tcp(t)) => t.sk_drops_read(),
            _ => 0,
        }
    }
}

impl super::options::SocketRef<'_> {
    /// `sk_drops` of a connection or a listener (`SO_MEMINFO`'s
    /// `SK_MEMINFO_DROPS`, tcp/drops.rs).
    pub fn sk_drops(&self) -> Result<u32, crate::socket::SocketError> {
        let index = self.stack.handle_slot(self.h)?;
        Ok(self.stack.sk_drops_read(index))
    }
}
