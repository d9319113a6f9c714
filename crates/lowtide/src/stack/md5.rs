//! TCP-MD5 at the stack: the check of what arrives (`tcp_inbound_hash`,
//! `tcp_inbound_md5_hash`) and the keys of a socket (`TCP_MD5SIG`, tcp/md5.rs).

use super::options::SocketMut;
use super::{Sock, Stack};
use crate::mib::Mib;
use crate::socket::SocketError;
use crate::tcp::md5::{hash_segment, Md5Cmd, Md5Error, Md5Key};
use crate::tcp::rcvqueue::Payload;
use crate::tcp::FourTuple;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::{AuthOption, TcpRepr};
use std::net::SocketAddr;
use tracing::trace;

impl Stack {
    /// `tcp_inbound_hash` for a listener, a request or a connection in `slot` (not
    /// TIME-WAIT, which `tcp_v4_rcv` hands on before): whether the segment may go
    /// on. A bad or second authentication option is dropped uncounted
    /// (`TCP_AUTH_HDR`); a TCP-AO option passes, as on a kernel without
    /// `CONFIG_TCP_AO` (this machine's: `tcp_inbound_ao_hash` is a stub there). An
    /// unsigned segment from a peer the socket has a key for is dropped
    /// (TcpExtTCPMD5NotFound); a signed one is checked (`tcp_inbound_md5_hash`). A
    /// request checks with its listener's key as it is now (`req->rsk_listener`),
    /// which `note_listener` gave it just before.
    pub(super) fn inbound_hash(
        &mut self,
        slot: u32,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: &Payload,
    ) -> bool {
        let key = match &self.slots[slot as usize].sock {
            Some(Sock::Tcp(t)) => t.md5.lookup(ip.src).copied(),
            Some(Sock::Listener(l)) => l.opts.md5.lookup(ip.src).copied(),
            _ => None,
        };
        match (th.options.auth, key) {
            (AuthOption::Bad, _) => {
                trace!("drop: bad TCP authentication option");
                false
            }
            (AuthOption::Ao, _) => true,
            (AuthOption::None, None) => true,
            (AuthOption::None, Some(_)) => {
                self.mib.inc(Mib::TcpExtTCPMD5NotFound);
                trace!(src = %ip.src, "drop: no TCP-MD5 option from a peer with a key");
                false
            }
            (AuthOption::Md5, None) => {
                self.mib.inc(Mib::TcpExtTCPMD5Unexpected);
                trace!("drop: TCP-MD5 option without a key");
                false
            }
            (AuthOption::Md5, Some(key)) => self.inbound_md5_hash(&key, ip, th, payload),
        }
    }

    /// `tcp_inbound_md5_hash`'s check: the digest computed over what arrived
    /// (`tcp_v4_md5_hash_skb` with the packet's addresses) against the option's;
    /// a mismatch is dropped (TcpExtTCPMD5Failure).
    fn inbound_md5_hash(
        &mut self,
        key: &Md5Key,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: &Payload,
    ) -> bool {
        let mut flat = Vec::new();
        let data = payload.contiguous(&mut flat);
        let digest = hash_segment(key, (ip.src, ip.dst), &self.rx_md5_header, &[data]);
        if th.options.md5sig == Some(digest) {
            return true;
        }
        self.mib.inc(Mib::TcpExtTCPMD5Failure);
        trace!(src = %ip.src, "drop: TCP-MD5 digest mismatch");
        false
    }
}

impl Stack {
    /// The TCP-MD5 part of `tcp_v4_send_reset` / `tcp_v6_send_reset`: `None` if no
    /// reset may answer the segment, else the key that signs it (if any). A bad or
    /// second authentication option gets none (`tcp_parse_auth_options`). A full
    /// socket `sk` that answers (a listener; a connection signs its own with
    /// `Tcb::md5_key`) signs with its key for the peer, whether or
    /// not the segment was signed. Without one (no socket, or a TIME-WAIT one,
    /// which is not `sk_fullsock`) an unsigned segment gets an unsigned reset; a
    /// signed one ("active side is lost") gets a reset only if the listener on its
    /// destination address and its *source* port (`__inet_lookup_listener(net,
    /// NULL, 0, saddr, th->source, daddr, ntohs(th->source), dif, sdif)`) holds a
    /// key for its source and the digest verifies with that key, which then signs
    /// the reset ("no RST generated if md5 hash doesn't match"); nothing is
    /// counted on this path.
    pub(super) fn reset_md5_key(
        &self,
        sk: Option<u32>,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: &[u8],
    ) -> Option<Option<Md5Key>> {
        if th.options.auth == AuthOption::Bad {
            return None;
        }
        if let Some(Some(Sock::Listener(l))) = sk.map(|i| &self.slots[i as usize].sock) {
            return Some(l.opts.md5.lookup(ip.src).copied());
        }
        let Some(digest) = th.options.md5sig else {
            return Some(None);
        };
        let tuple = FourTuple {
            local: SocketAddr::new(ip.dst, th.src_port),
            remote: SocketAddr::new(ip.src, th.src_port),
        };
        let l = self.find_listener(tuple).or(self.catch_all)?;
        let Some(Sock::Listener(l)) = &self.slots[l as usize].sock else {
            return None;
        };
        let key = *l.opts.md5.lookup(ip.src)?;
        let want = hash_segment(&key, (ip.src, ip.dst), &self.rx_md5_header, &[payload]);
        (want == digest).then_some(Some(key))
    }
}

impl SocketMut<'_> {
    /// `TCP_MD5SIG` / `TCP_MD5SIG_EXT` on a listener or a connection
    /// (`tcp_md5_do_add`, `tcp_md5_do_del`): a connection signs and checks with
    /// its new keys from its next segment on, a listener gives its new requests
    /// theirs. Deleting a key that is not there is [`SocketError::NotFound`]; a
    /// new key is charged to `sk_omem_alloc` ([`crate::tcp::md5::MD5_KEY_OMEM`],
    /// with a connection's `MSG_ZEROCOPY` notifications) and past
    /// `net.core.optmem_max` is [`SocketError::NoMemory`]. A socket before
    /// `listen` or `connect` keeps its keys in
    /// [`crate::tcp::sockopt::SockOptions::md5`].
    pub fn set_md5sig(&mut self, cmd: Md5Cmd) -> Result<(), SocketError> {
        let index = self.stack.handle_slot(self.h)?;
        let max = self.stack.cfg.optmem_max;
        let r = match &mut self.stack.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => t.md5.apply(cmd, t.errq.omem, max),
            Some(Sock::Listener(l)) => l.opts.md5.apply(cmd, 0, max),
            _ => return Err(SocketError::BadHandle),
        };
        r.map_err(|e| match e {
            Md5Error::NotFound => SocketError::NotFound,
            Md5Error::NoMemory => SocketError::NoMemory,
        })
    }
}
