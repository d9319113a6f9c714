//! The host's devices as `SO_BINDTODEVICE` sees them (net/core/dev.c's
//! `dev_get_by_name`, `netdev_get_name`; `sk_bound_dev_if` in inet_hashtables.c's
//! lookups and in route output).
//!
//! A stack has two devices, as a network namespace with one interface does:
//! `lo`, ifindex 1 (a namespace's loopback always comes first), and its device,
//! ifindex 2, named by [`Stack::set_device_name`] (`eth0` unless told: the
//! packetdrill runner names it `tun0`, as packetdrill's own device). Every segment
//! the stack takes comes in on the device. A socket bound to it behaves as an
//! unbound one, except that it outscores one in the listener lookup; a socket
//! bound to `lo` takes no segment from the device and what it sends leaves on
//! loopback, which carries it to no one: the host forwards nothing, so
//! `ip_route_input` drops a segment for a remote address (`ip_error` without
//! `IN_DEV_FORWARD`). Its transmit completes at once (`loopback_xmit` orphans the
//! skb). A socket bound to an index no device has (`SO_BINDTOIFINDEX` takes any)
//! cannot connect: `ENODEV` (`ip_route_output_key_hash_rcu`); over IPv6 neither
//! can one bound to `lo` (`ENETUNREACH`, [`Stack::route_bound_dev`]). Not
//! modelled: an IPv6 connection rebound to `lo` fails its route lookup at each
//! transmit on Linux and keeps its data unsent; here it sends into loopback as
//! an IPv4 one does.

use super::{Sock, Stack};
use crate::socket::SocketError;
use crate::tcp::FourTuple;
use crate::time::Instant;

/// `LOOPBACK_IFINDEX`: the namespace's `lo`.
pub const LOOPBACK_IFINDEX: u32 = 1;
/// The ifindex of the stack's device, the second a namespace makes.
pub const DEVICE_IFINDEX: u32 = 2;

/// `inet_bound_dev_eq` (no L3 master device, so `sdif` is 0): a socket bound to
/// `bound_dev_if` takes segments that came in on `dif`.
pub(crate) fn bound_dev_eq(bound_dev_if: u32, dif: u32) -> bool {
    bound_dev_if == 0 || bound_dev_if == dif
}

impl Stack {
    /// Names the stack's device (ifindex [`DEVICE_IFINDEX`]) for
    /// [`Stack::dev_get_by_name`].
    pub fn set_device_name(&mut self, name: &str) {
        self.device_name = name.to_string();
    }

    /// `dev_get_by_name`: the ifindex of the device called `name`, if any.
    pub fn dev_get_by_name(&self, name: &str) -> Option<u32> {
        match name {
            "lo" => Some(LOOPBACK_IFINDEX),
            n if n == self.device_name => Some(DEVICE_IFINDEX),
            _ => None,
        }
    }

    /// `netdev_get_name`: the name of the device with `ifindex`, if any.
    pub fn netdev_get_name(&self, ifindex: u32) -> Option<&str> {
        match ifindex {
            LOOPBACK_IFINDEX => Some("lo"),
            DEVICE_IFINDEX => Some(&self.device_name),
            _ => None,
        }
    }

    /// The route lookup of `connect` for a socket bound to `bound_dev_if`. IPv4
    /// (`ip_route_connect`): `ENODEV` for a device the host lacks
    /// (`dev_get_by_index_rcu` fails), and `lo`, which has no route to a remote
    /// address, is taken on-link (`ip_route_output_key_hash_rcu`'s "Apparently,
    /// routing tables are wrong"). IPv6 (`ip6_dst_lookup_flow`) guesses nothing:
    /// any device but the one with the route is `ENETUNREACH`.
    pub(crate) fn route_bound_dev(&self, bound_dev_if: u32, v6: bool) -> Result<(), SocketError> {
        match bound_dev_if {
            0 | DEVICE_IFINDEX => Ok(()),
            _ if v6 => Err(SocketError::NetworkUnreachable),
            LOOPBACK_IFINDEX => Ok(()),
            _ => Err(SocketError::NoDevice),
        }
    }

    /// `inet_match`'s device test for the established socket in `index`, a
    /// segment having come in on the device.
    pub(super) fn ehash_dev_match(&self, index: u32) -> bool {
        let bound = match &self.slots[index as usize].sock {
            Some(Sock::Tcp(t)) => t.bind.bound_dev_if,
            Some(Sock::TimeWait(tw)) => tw.bind.bound_dev_if,
            _ => 0,
        };
        bound_dev_eq(bound, DEVICE_IFINDEX)
    }

    /// The established or TIME-WAIT socket of `tuple` that a segment from the
    /// device reaches (`__inet_lookup_established`).
    pub(super) fn ehash_lookup(&self, tuple: &FourTuple) -> Option<u32> {
        self.conns
            .get(tuple)
            .filter(|&i| !self.off_device || self.ehash_dev_match(i))
    }

    /// Whether the packet of the socket in slot `index` leaves on loopback.
    fn on_loopback(&self, index: u32, generation: u32) -> bool {
        let slot = &self.slots[index as usize];
        let bound = match &slot.sock {
            Some(Sock::Tcp(t)) if slot.generation == generation => t.bind.bound_dev_if,
            _ => 0,
        };
        bound != 0 && bound != DEVICE_IFINDEX
    }

    /// The next packet for the device: those of sockets bound to `lo` leave on
    /// loopback instead, their transmit completed at once.
    pub(super) fn next_for_device(&mut self, now: Instant) -> Option<crate::socket::Transmit> {
        loop {
            let tx = self.out.pop_front()?;
            let t = tx.token;
            if !self.off_device || (t.index as usize) >= self.slots.len() {
                return Some(tx);
            }
            if !self.on_loopback(t.index, t.generation) {
                return Some(tx);
            }
            self.handle_tx_complete(now, t);
        }
    }

    /// A socket is bound to a device: lookups and transmits check devices from now
    /// on (none is bound in most runs, which then pay nothing).
    pub(crate) fn note_bound_dev(&mut self, bound_dev_if: u32) {
        self.off_device |= bound_dev_if != 0;
    }
}
