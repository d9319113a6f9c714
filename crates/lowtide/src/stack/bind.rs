//! The bind table (Linux's inet_hashtables.c `bhash`, its buckets' `owners`) and
//! `SO_REUSEPORT` listener groups (sock_reuseport.c): which sockets hold a local
//! port, for `bind(2)`'s conflict rule (`inet_csk_bind_conflict`, in the socket
//! layer: `posix/bind.rs`) and `connect`'s port search (`__inet_hash_connect`
//! passes over ports a socket bound), and which listener of a group a SYN finds.

use super::{Sock, Stack};
use crate::socket::SocketHandle;
use crate::tcp::inet_connection_sock::PortBinding;
use crate::tcp::sockopt::SockOptions;
use crate::tcp::FourTuple;
use std::net::SocketAddr;

/// A socket holding a port, as `inet_bind_conflict` sees it: a listener, a
/// connection (the application's, an orphan still closing, a listener's child) or
/// a timewait socket (`sk2->sk_state` LISTEN, another, or TIME_WAIT).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortOwner {
    /// The bound address (an IPv4-mapped one as IPv4).
    pub local: SocketAddr,
    /// `sk_reuse` (`SO_REUSEADDR`).
    pub reuse: bool,
    /// `sk_reuseport` (`SO_REUSEPORT`).
    pub reuseport: bool,
    /// `sk_ipv6only`.
    pub v6only: bool,
    /// `sk_bound_dev_if`: the device it is bound to, 0 for none.
    pub bound_dev_if: u32,
    /// In `TCP_LISTEN`.
    pub listening: bool,
    /// A timewait socket (`TCP_TIME_WAIT`, whatever its substate).
    pub timewait: bool,
    /// The engine's handle of the socket, if the application still has one.
    pub handle: Option<SocketHandle>,
}

/// `reciprocal_scale`: `hash` scaled into `0..n`.
fn reciprocal_scale(hash: u32, n: u32) -> u32 {
    ((hash as u64 * n as u64) >> 32) as u32
}

impl Stack {
    /// The sockets of this stack holding local port `port` (`tb->owners`).
    pub fn port_owners(&self, port: u16) -> Vec<PortOwner> {
        let mut out = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let Some((local, b, listening, timewait)) = slot.sock.as_ref().and_then(binding) else {
                continue;
            };
            if local.port() != port {
                continue;
            }
            let handle = (!slot.orphan && !timewait).then_some(SocketHandle {
                index: i as u32,
                generation: slot.generation,
            });
            out.push(PortOwner {
                local,
                reuse: b.reuse,
                reuseport: b.reuseport,
                v6only: b.v6only,
                bound_dev_if: b.bound_dev_if,
                listening,
                timewait,
                handle,
            });
        }
        out
    }

    /// Whether a socket bound `port` (a `bhash` bucket made by `bind(2)`, which
    /// `__inet_hash_connect` skips: `tb->fastreuse >= 0 || tb->fastreuseport >= 0`).
    pub(super) fn port_bound(&self, port: u16) -> bool {
        self.bhash.get(&port).is_some_and(|&n| n > 0)
    }

    /// A socket the caller keeps above the engine (bound, neither connected nor
    /// listening) takes `port` (`inet_bind_hash`), so that `connect`'s search
    /// passes it over; [`Stack::bhash_release`] gives it back.
    pub(crate) fn bhash_hold(&mut self, port: u16) {
        *self.bhash.entry(port).or_insert(0) += 1;
    }

    /// Undoes one [`Stack::bhash_hold`] (`inet_put_port`).
    pub(crate) fn bhash_release(&mut self, port: u16) {
        if let Some(n) = self.bhash.get_mut(&port) {
            *n -= 1;
            if *n == 0 {
                self.bhash.remove(&port);
            }
        }
    }

    /// `inet_bind_hash` / `inet_put_port` for the socket in a slot: `add` when it
    /// is allocated, not when it is freed.
    pub(super) fn bhash_account(&mut self, sock: &Sock, add: bool) {
        if let Some((local, b, ..)) = binding(sock) {
            if b.by_bind {
                match add {
                    true => self.bhash_hold(local.port()),
                    false => self.bhash_release(local.port()),
                }
            }
        }
    }

    /// `SO_REUSEADDR` and `SO_REUSEPORT` set on a live socket (`sk_reuse`,
    /// `sk_reuseport`: `sock_setsockopt` changes them whatever the state).
    pub(crate) fn set_reuse(&mut self, h: SocketHandle, reuse: bool, reuseport: bool) {
        let Ok(index) = self.handle_slot(h) else {
            return;
        };
        match &mut self.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => (t.bind.reuse, t.bind.reuseport) = (reuse, reuseport),
            Some(Sock::Listener(l)) => (l.opts.reuse, l.opts.reuseport) = (reuse, reuseport),
            _ => {}
        }
    }

    /// `get_random_u32_below(n)` from the stack's generator (`n` at least 1).
    pub(crate) fn random_below(&mut self, n: u32) -> u32 {
        self.rng.range_u32(0, n.max(1) - 1)
    }

    /// `inet_reuseport_add_sock`: whether a listener with `opts` may listen on
    /// `local`: every listener there is on another device (`inet_bind_conflict`
    /// passes over two sockets bound to different devices), or all those on its
    /// own form a `SO_REUSEPORT` group it joins (it sets the option too).
    pub(super) fn reuseport_may_join(&self, local: SocketAddr, opts: &SockOptions) -> bool {
        let Some(group) = self.listeners.get(&local) else {
            return true;
        };
        let dev = opts.bound_dev_if;
        group.iter().all(|&i| match &self.slots[i as usize].sock {
            Some(Sock::Listener(l)) => {
                let other = l.opts.bound_dev_if;
                dev != 0 && other != 0 && dev != other
                    || opts.reuseport && l.opts.reuseport && l.opts.v6only == opts.v6only
            }
            _ => true,
        })
    }

    /// The members of the `SO_REUSEPORT` group of the listener in `index` at
    /// `local`: the listeners there on its device (`inet_reuseport_add_sock`
    /// joins a group only of `sk_bound_dev_if` equal), in `reuse->socks` order.
    pub(super) fn reuseport_group(&self, local: SocketAddr, index: u32) -> Vec<u32> {
        let dev = |i: u32| match &self.slots[i as usize].sock {
            Some(Sock::Listener(l)) => l.opts.bound_dev_if,
            _ => 0,
        };
        let group = self.listeners.get(&local).map(Vec::as_slice).unwrap_or(&[]);
        group
            .iter()
            .copied()
            .filter(|&i| dev(i) == dev(index))
            .collect()
    }

    /// `reuseport_detach_sock`: the listener in `index` leaves its address; the
    /// group's last member takes its place (`reuse->socks[i] = socks[num - 1]`).
    pub(super) fn listen_unhash(&mut self, local: SocketAddr, index: u32) {
        if let Some(group) = self.listeners.get_mut(&local) {
            if let Some(i) = group.iter().position(|&x| x == index) {
                group.swap_remove(i);
            }
            if group.is_empty() {
                self.listeners.remove(&local);
            }
        }
    }

    /// `reuseport_select_sock_by_hash`: the member of a listener group the tuple's
    /// hash (`inet_ehashfn`) picks, `reciprocal_scale(hash, num_socks)`.
    pub(super) fn reuseport_select(&self, group: &[u32], tuple: &FourTuple) -> u32 {
        if group.len() == 1 {
            return group[0];
        }
        let hash = self.conns.ehashfn(tuple) as u32;
        group[reciprocal_scale(hash, group.len() as u32) as usize]
    }
}

/// A slot's socket as the bind table has it: its address, binding, whether it
/// listens and whether it is a timewait socket.
fn binding(sock: &Sock) -> Option<(SocketAddr, PortBinding, bool, bool)> {
    match sock {
        Sock::Listener(l) => {
            let b = PortBinding {
                reuse: l.opts.reuse,
                reuseport: l.opts.reuseport,
                v6only: l.opts.v6only,
                by_bind: true,
                bound_dev_if: l.opts.bound_dev_if,
            };
            Some((l.local, b, true, false))
        }
        // tcp_set_state(TCP_CLOSE): inet_put_port, unless the user bound the port
        // (SOCK_BINDPORT_LOCK).
        Sock::Tcp(t) if t.state == crate::tcp::TcpState::Closed && !t.bind.by_bind => None,
        Sock::Tcp(t) => Some((t.tuple.local, t.bind, false, false)),
        Sock::TimeWait(tw) => Some((tw.tuple.local, tw.bind, false, true)),
    }
}

#[cfg(test)]
mod tests {
    use super::reciprocal_scale;

    #[test]
    fn reciprocal_scale_spreads_the_hash_over_the_group() {
        assert_eq!(reciprocal_scale(0, 4), 0);
        assert_eq!(reciprocal_scale(u32::MAX, 4), 3);
        assert_eq!(reciprocal_scale(0x8000_0000, 4), 2);
        assert_eq!(reciprocal_scale(0x3fff_ffff, 4), 0);
    }
}
