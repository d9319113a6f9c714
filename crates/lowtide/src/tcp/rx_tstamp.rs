//! Receive timestamps (Documentation/networking/timestamping.rst; net/core/sock.c
//! `sock_set_timestamp`, `sock_set_timestamping`, `sock_enable_timestamp`; tcp.c
//! `tcp_recv_timestamp`, `tcp_update_recv_tstamps`).
//!
//! A segment is stamped with its arrival time when net timestamps are wanted
//! anywhere on the host as it arrives (`netstamp_needed_key`, on while some socket
//! has `SOCK_TIMESTAMP` or `SOCK_TIMESTAMPING_RX_SOFTWARE`; tcp_ipv4.c
//! `tcp_v4_fill_cb`'s `has_rxtstamp`). lowtide's host is the stack: it counts its
//! connections that want them (`Tcb::netstamp_wanted`); sockets that are not
//! connections (a listener, a socket not yet connected) do not count. The stamp
//! rides with the skb into the receive queue, a coalesced skb taking the later
//! segment's (`tcp_try_coalesce`, `tcp_ooo_try_coalesce`), and one `tcp_collapse`
//! builds has none. A read reports the stamp of the last skb it took bytes from that
//! has one (`tcp_recvmsg_locked`); `tcp_recv_timestamp` turns it into cmsgs
//! (posix/rx_tstamp.rs). The clock is the stack's: the simulator's virtual time, the
//! packetdrill clock in the shared-object mode.

use super::rcvqueue::RxStamp;
use super::sock::Tcb;
pub use super::sock_errqueue::RcvTstamp;
use super::tstamp::SOF_TIMESTAMPING_RX_SOFTWARE;
use super::Ctx;
use crate::time::Instant;

impl RcvTstamp {
    /// `__sock_set_timestamps`: `SO_TIMESTAMP` (`new`: `SO_TIMESTAMP_NEW`; `ns`:
    /// `SO_TIMESTAMPNS`) on or off. Off clears the cmsg bits but neither
    /// `SOCK_TSTAMP_NEW` nor `SOCK_TIMESTAMP`.
    pub fn set(&mut self, on: bool, new: bool, ns: bool) {
        self.rcvtstamp = on;
        self.rcvtstampns = on && ns;
        if on {
            self.tstamp_new = new;
            self.timestamp = true; // sock_enable_timestamp(sk, SOCK_TIMESTAMP)
        }
    }

    /// `sk_getsockopt` of `SO_TIMESTAMP_OLD` (`new`, `ns` false), `SO_TIMESTAMPNS_OLD`
    /// (`ns`), `SO_TIMESTAMP_NEW` (`new`), `SO_TIMESTAMPNS_NEW` (both).
    pub fn get(&self, new: bool, ns: bool) -> bool {
        match (new, ns) {
            (false, false) => self.rcvtstamp && !self.tstamp_new && !self.rcvtstampns,
            (false, true) => self.rcvtstampns && !self.tstamp_new,
            (true, false) => self.rcvtstamp && self.tstamp_new,
            (true, true) => self.rcvtstampns && self.tstamp_new,
        }
    }

    /// `SK_FLAGS_TIMESTAMP` with `sk_tsflags` `tsflags`: the socket wants net
    /// timestamps (`sock_needs_netstamp`; `SOCK_TIMESTAMPING_RX_SOFTWARE` follows
    /// `SOF_TIMESTAMPING_RX_SOFTWARE`).
    pub fn wants_netstamp(&self, tsflags: u32) -> bool {
        self.timestamp || tsflags & SOF_TIMESTAMPING_RX_SOFTWARE != 0
    }
}

impl RxStamp {
    /// A segment arriving now: stamped if net timestamps are wanted
    /// (`net_timestamp_check`, `tcp_v4_fill_cb`).
    pub(crate) fn arrival(ctx: &Ctx) -> RxStamp {
        RxStamp {
            has: ctx.netstamp,
            at: ctx.netstamp.then_some(ctx.now),
        }
    }
}

impl Tcb {
    /// The connection counts toward the stack's net timestamps
    /// ([`RcvTstamp::wants_netstamp`]).
    pub(crate) fn netstamp_wanted(&self) -> bool {
        self.tstamp.rx.wants_netstamp(self.tstamp.flags)
    }

    /// `tcp_recvmsg_locked`'s `tss` for a read (or a peek from `offset`, its
    /// `SO_PEEK_OFF`) of up to `len` bytes now:
    /// `None` when no skb it takes bytes from has `has_rxtstamp` (no
    /// `TCP_CMSG_TS`), else the last such skb's stamp (`tcp_update_recv_tstamps`;
    /// `None` inside for one `tcp_collapse` built). A read of 0 bytes looks at the
    /// first skb.
    pub(crate) fn recv_tstamp(&self, offset: usize, len: usize) -> Option<Option<Instant>> {
        let (skip, n) = self.peek_span(offset, len).ok()?;
        self.rcv_queue.rx_tstamp(skip, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sock_getsockopt after each sock_setsockopt, as Linux 6.18 answers (measured
    /// on this machine's kernel with Python's socket module).
    #[test]
    fn option_bits_as_linux_reads_them() {
        let mut f = RcvTstamp::default();
        let all = |f: &RcvTstamp| {
            [(false, false), (false, true), (true, false), (true, true)].map(|(n, s)| f.get(n, s))
        };
        f.set(true, false, false);
        assert_eq!(all(&f), [true, false, false, false]);
        f.set(true, false, true);
        assert_eq!(all(&f), [false, true, false, false]);
        f.set(true, true, true);
        assert_eq!(
            all(&f),
            [false, false, true, true],
            "NS_NEW reads as TS_NEW too"
        );
        f.set(true, true, false);
        assert_eq!(all(&f), [false, false, true, false]);
        f.set(false, false, false);
        assert_eq!(all(&f), [false; 4]);
        assert!(f.tstamp_new, "off keeps SOCK_TSTAMP_NEW");
        assert!(f.wants_netstamp(0), "SOCK_TIMESTAMP stays");
        assert!(!RcvTstamp::default().wants_netstamp(0));
        assert!(RcvTstamp::default().wants_netstamp(SOF_TIMESTAMPING_RX_SOFTWARE));
    }
}
