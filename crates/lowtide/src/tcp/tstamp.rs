//! `SO_TIMESTAMPING` transmit timestamps for TCP (Documentation/networking/
//! timestamping.rst; net/core/sock.c `sock_set_timestamping`, tcp.c
//! `tcp_tx_timestamp`, net/core/skbuff.c `__skb_tstamp_tx`, tcp_input.c
//! `tcp_ack_tstamp`).
//!
//! A write marks its last byte (`tskey`) when it ends with data still unsent in
//! the write queue's tail skb; the report points are when the segment holding that
//! byte enters the device queue (`SCM_TSTAMP_SCHED`), when the driver takes it
//! (`SCM_TSTAMP_SND`), and when the peer acknowledges the byte (`SCM_TSTAMP_ACK`).
//! Each report is an error-queue entry with `ee_errno` `ENOMSG`, origin
//! `SO_EE_ORIGIN_TIMESTAMPING`, the report type in `ee_info` and, with
//! `SOF_TIMESTAMPING_OPT_ID`, the key relative to the socket's `sk_tskey` in
//! `ee_data`.
//!
//! lowtide keeps the marked bytes per connection rather than per skb, which is the
//! same thing: a split skb keeps the mark on the part holding the byte
//! (`tcp_fragment_tstamp`), and a later write into the same unsent skb moves it.
//! Where lowtide differs: its device takes a packet when the stack emits it, so
//! `SCM_TSTAMP_SND` follows `SCM_TSTAMP_SCHED` at once; there are no hardware
//! timestamps (receive timestamps: tcp/rx_tstamp.rs), `OPT_PKTINFO` adds nothing,
//! and `TX_COMPLETION` marks a write but nothing reports it (only Bluetooth
//! drivers do). `SOF_TIMESTAMPING_OPT_STATS`
//! with `OPT_TSONLY` makes each report's payload the connection's statistics
//! (tcp/opt_stats.rs).

use super::sock::Tcb;
use super::sock_errqueue::Mark;
use super::{Ctx, TcpState};
use crate::socket::{EventKind, SocketError};
use crate::time::Instant;

/// `SOF_TIMESTAMPING_TX_HARDWARE`.
pub const SOF_TIMESTAMPING_TX_HARDWARE: u32 = 1 << 0;
/// `SOF_TIMESTAMPING_TX_SOFTWARE`: report when the driver takes the packet.
pub const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
/// `SOF_TIMESTAMPING_RX_HARDWARE`: stamp received packets in the NIC.
pub const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
/// `SOF_TIMESTAMPING_RX_SOFTWARE`: stamp received packets on arrival.
pub const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
/// `SOF_TIMESTAMPING_SOFTWARE`: reports carry the software timestamp.
pub const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
/// `SOF_TIMESTAMPING_RAW_HARDWARE`: reports carry the hardware timestamp.
pub const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
/// `SOF_TIMESTAMPING_OPT_ID`: reports carry the byte's key in `ee_data`.
pub const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
/// `SOF_TIMESTAMPING_TX_SCHED`: report when the packet enters the device queue.
pub const SOF_TIMESTAMPING_TX_SCHED: u32 = 1 << 8;
/// `SOF_TIMESTAMPING_TX_ACK`: report when the peer acknowledges the byte.
pub const SOF_TIMESTAMPING_TX_ACK: u32 = 1 << 9;
/// `SOF_TIMESTAMPING_OPT_TSONLY`: reports carry no copy of the packet.
pub const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;
/// `SOF_TIMESTAMPING_OPT_STATS`: with `OPT_TSONLY`, reports carry
/// `SCM_TIMESTAMPING_OPT_STATS`.
pub const SOF_TIMESTAMPING_OPT_STATS: u32 = 1 << 12;
/// `SOF_TIMESTAMPING_BIND_PHC`: stamps from the PHC `bind_phc` names, a virtual
/// clock of the bound device.
pub const SOF_TIMESTAMPING_BIND_PHC: u32 = 1 << 15;
/// `SOF_TIMESTAMPING_OPT_ID_TCP`: the key counts from `write_seq`, not `snd_una`.
pub const SOF_TIMESTAMPING_OPT_ID_TCP: u32 = 1 << 16;
/// `SOF_TIMESTAMPING_OPT_RX_FILTER`: a read reports the software stamp only with
/// `RX_SOFTWARE` (without it, `SOFTWARE` alone reports stamps others asked for).
pub const SOF_TIMESTAMPING_OPT_RX_FILTER: u32 = 1 << 17;
/// `SOF_TIMESTAMPING_TX_COMPLETION`: report when the device completes the packet.
pub const SOF_TIMESTAMPING_TX_COMPLETION: u32 = 1 << 18;
/// `SOF_TIMESTAMPING_MASK`: every flag Linux 6.18 knows (up to `TX_COMPLETION`).
pub const SOF_TIMESTAMPING_MASK: u32 = (SOF_TIMESTAMPING_TX_COMPLETION << 1) - 1;
/// `SOF_TIMESTAMPING_TX_RECORD_MASK`: the flags that mark a write.
const TX_RECORD_MASK: u32 = SOF_TIMESTAMPING_TX_HARDWARE
    | SOF_TIMESTAMPING_TX_SOFTWARE
    | SOF_TIMESTAMPING_TX_SCHED
    | SOF_TIMESTAMPING_TX_ACK
    | SOF_TIMESTAMPING_TX_COMPLETION;

/// `SCM_TSTAMP_SND`: the driver took the packet.
pub const SCM_TSTAMP_SND: u32 = 0;
/// `SCM_TSTAMP_SCHED`: the packet entered the device queue.
pub const SCM_TSTAMP_SCHED: u32 = 1;
/// `SCM_TSTAMP_ACK`: the peer acknowledged the byte.
pub const SCM_TSTAMP_ACK: u32 = 2;
/// `SO_EE_ORIGIN_TIMESTAMPING`.
pub const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
/// `ENOMSG`: the `ee_errno` of a timestamp report.
const ENOMSG: u32 = 42;

impl Tcb {
    /// `sock_set_timestamping` on a connection: unknown flags and `OPT_ID_TCP`
    /// without `OPT_ID` are `EINVAL`, as is turning `OPT_ID` on in CLOSE or LISTEN;
    /// turning it on starts the keys at `snd_una` (`write_seq` with `OPT_ID_TCP`),
    /// before the checks of [`check_late_flags`], which leave the flags as they were.
    /// `new` is `SO_TIMESTAMPING_NEW` (`SOCK_TSTAMP_NEW`, whichever way it was).
    pub(crate) fn set_timestamping(&mut self, flags: u32, new: bool) -> Result<(), SocketError> {
        check_flags(flags)?;
        let ts = &mut self.tstamp;
        if flags & SOF_TIMESTAMPING_OPT_ID != 0 && ts.flags & SOF_TIMESTAMPING_OPT_ID == 0 {
            if matches!(self.state, TcpState::Closed | TcpState::Listen) {
                return Err(SocketError::InvalidInput);
            }
            ts.tskey = match flags & SOF_TIMESTAMPING_OPT_ID_TCP {
                0 => self.snd_una,
                _ => self.write_seq,
            };
        }
        check_late_flags(flags, self.bind.bound_dev_if != 0)?;
        let ts = &mut self.tstamp;
        ts.flags = flags;
        ts.rx.tstamp_new = new;
        Ok(())
    }

    /// `tcp_has_tx_tstamp`: a byte of `[seq, end)` is marked for a transmit report.
    pub(crate) fn tstamp_marked(&self, seq: u64, end: u64) -> bool {
        self.tstamp
            .marks
            .iter()
            .any(|m| (seq..end).contains(&m.key))
    }

    /// `tcp_skb_collapse_tstamp` when an skb covering `dst` eats the one covering
    /// `src`: an skb has one `tskey`, so if the eaten skb had a transmit
    /// timestamp request, its key replaces the survivor's own.
    pub(crate) fn collapse_tstamp(&mut self, dst: (u64, u64), src: (u64, u64)) {
        if self.tstamp_marked(src.0, src.1) {
            self.tstamp
                .marks
                .retain(|m| !(dst.0..dst.1).contains(&m.key));
        }
    }

    /// `tcp_tx_timestamp` at the end of a write: with a transmit timestamp asked
    /// for, the last byte of the write queue's tail skb (still unsent) is marked;
    /// an earlier mark in that same skb is replaced (`shinfo->tskey` is one per skb).
    pub(crate) fn tx_timestamp(&mut self) {
        let flags = self.tstamp.flags & TX_RECORD_MASK;
        let Some(tail) = self.write_queue.back() else {
            return;
        };
        if flags == 0 || tail.data.is_empty() {
            return;
        }
        let (start, key) = (tail.seq, tail.seq + tail.data.len() as u64 - 1);
        let marks = &mut self.tstamp.marks;
        if marks.back().is_some_and(|m| m.key >= start) {
            marks.pop_back();
        }
        marks.push_back(Mark {
            key,
            flags,
            edt: Instant::ZERO,
        });
    }

    /// A segment `[seq, end)` of `ip_len` bytes leaves at `edt` (its
    /// `skb_mstamp_ns`): the `SCM_TSTAMP_SCHED` and `SCM_TSTAMP_SND` reports of the
    /// bytes it carries (a retransmission reports again, as its clone keeps the
    /// skb's flags).
    pub(crate) fn tstamp_sent(
        &mut self,
        ctx: &mut Ctx,
        (seq, end): (u64, u64),
        ip_len: usize,
        edt: Instant,
    ) {
        if self.tstamp.marks.is_empty() {
            return;
        }
        let mut hits = Vec::new();
        for m in self.tstamp.marks.iter_mut() {
            if m.key >= seq && m.key < end {
                m.edt = edt;
                hits.push(*m);
            }
        }
        for m in hits {
            if m.flags & SOF_TIMESTAMPING_TX_SCHED != 0 {
                self.tstamp_report(ctx, m, SCM_TSTAMP_SCHED, ip_len as u32, None);
            }
            if m.flags & SOF_TIMESTAMPING_TX_SOFTWARE != 0 {
                self.tstamp_report(ctx, m, SCM_TSTAMP_SND, ip_len as u32, None);
            }
        }
    }

    /// Before `tcp_clean_rtx_queue` frees or trims the skbs an ACK of `ack` covers:
    /// for each mark it will report, the `skb->len` of the skb holding it as the
    /// clean leaves it, which `__skb_tstamp_tx` clones for the report: the whole
    /// payload of an skb acknowledged whole or of a one-segment head left as it
    /// was, the rest of a multi-segment head that `tcp_tso_acked` trims.
    pub(crate) fn tstamp_ack_holders(&self, ack: u64) -> Vec<(u64, u32)> {
        let marks = self.tstamp.marks.iter();
        let acked = marks.filter(|m| (self.snd_una..ack).contains(&m.key));
        acked
            .filter_map(|m| {
                let s = self
                    .rtx
                    .iter_from(m.key)
                    .next()
                    .filter(|s| s.seq <= m.key)?;
                let len = s.data.len() as u64;
                let trimmed = match s.end_seq > ack && s.pcount > 1 {
                    true => ack - s.seq,
                    false => 0,
                };
                Some((m.key, len.saturating_sub(trimmed) as u32))
            })
            .collect()
    }

    /// `tcp_ack_tstamp`: `snd_una` moved from `prior` past marked bytes; those with
    /// `SOF_TIMESTAMPING_TX_ACK` report `SCM_TSTAMP_ACK`, a copy of the skb that
    /// held the mark (its length in `holders`, [`Tcb::tstamp_ack_holders`]), and
    /// every mark below `snd_una` is done.
    pub(crate) fn tstamp_acked(&mut self, ctx: &mut Ctx, prior: u64, holders: &[(u64, u32)]) {
        while let Some(m) = self.tstamp.marks.front().copied() {
            if m.key >= self.snd_una {
                break;
            }
            self.tstamp.marks.pop_front();
            if m.key >= prior && m.flags & SOF_TIMESTAMPING_TX_ACK != 0 {
                let ttl = Some(self.rx_ttl);
                let len = holders.iter().find(|h| h.0 == m.key).map_or(0, |h| h.1);
                self.tstamp_report(ctx, m, SCM_TSTAMP_ACK, len, ttl);
            }
        }
    }

    /// `__skb_tstamp_tx` and `__skb_complete_tx_timestamp`: the report on the error
    /// queue, and a wakeup. The report copies the packet (`len` bytes), or with
    /// `OPT_TSONLY` carries nothing but, with `OPT_STATS`, the statistics
    /// (`tcp_get_timestamping_opt_stats`; `ack_ttl` for an ACK's report).
    fn tstamp_report(&mut self, ctx: &mut Ctx, m: Mark, kind: u32, len: u32, ack_ttl: Option<u8>) {
        let ts = &self.tstamp;
        let data = match ts.flags & SOF_TIMESTAMPING_OPT_ID {
            0 => 0,
            _ => m.key.wrapping_sub(ts.tskey) as u32,
        };
        let stats_flags = SOF_TIMESTAMPING_OPT_TSONLY | SOF_TIMESTAMPING_OPT_STATS;
        let opt_stats = (ts.flags & stats_flags == stats_flags)
            .then(|| self.timestamping_opt_stats(ctx.now, m.edt, ack_ttl));
        let len = match ts.flags & SOF_TIMESTAMPING_OPT_TSONLY {
            0 => len,
            _ => opt_stats.map_or(0, |s| s.nla_len()),
        };
        let entry = super::errqueue::ErrEntry {
            ee: super::errqueue::SockExtendedErr {
                errno: ENOMSG,
                origin: SO_EE_ORIGIN_TIMESTAMPING,
                info: kind,
                data,
                ..Default::default()
            },
            tstamp: Some(ctx.now),
            len,
            offender: None,
            opt_stats,
        };
        if self.errq.queue_report(entry, self.rcvbuf) {
            self.notify(ctx, EventKind::ErrQueue);
        }
    }

    /// `SO_TIMESTAMPING` (getsockopt): `sk_tsflags`.
    pub(crate) fn timestamping(&self) -> u32 {
        self.tstamp.flags
    }
}

/// `sock_set_timestamping`'s checks that do not depend on the socket's state.
pub fn check_flags(flags: u32) -> Result<(), SocketError> {
    if flags & !SOF_TIMESTAMPING_MASK != 0
        || (flags & SOF_TIMESTAMPING_OPT_ID_TCP != 0 && flags & SOF_TIMESTAMPING_OPT_ID == 0)
    {
        return Err(SocketError::InvalidInput);
    }
    Ok(())
}

/// `sock_set_timestamping`'s checks after its `OPT_ID` step: `OPT_STATS` without
/// `OPT_TSONLY` is `EINVAL`; `BIND_PHC` (`sock_timestamping_bind_phc`) needs a
/// socket bound to a device (`bound`), else `EOPNOTSUPP`, and then a virtual PHC
/// clock of that device with the index asked for, which no device of lowtide's
/// has (`ethtool_get_phc_vclocks` finds none): `EINVAL`.
pub fn check_late_flags(flags: u32, bound: bool) -> Result<(), SocketError> {
    if flags & SOF_TIMESTAMPING_OPT_STATS != 0 && flags & SOF_TIMESTAMPING_OPT_TSONLY == 0 {
        return Err(SocketError::InvalidInput);
    }
    if flags & SOF_TIMESTAMPING_BIND_PHC != 0 {
        return Err(match bound {
            false => SocketError::NotSupported,
            true => SocketError::InvalidInput,
        });
    }
    Ok(())
}

/// The time a report carries as `struct timespec` seconds and nanoseconds, given
/// what `CLOCK_REALTIME` read at [`Instant::ZERO`].
pub fn realtime(at: Instant, realtime_zero: core::time::Duration) -> (i64, i64) {
    let t = realtime_zero + at.saturating_since(Instant::ZERO);
    (t.as_secs() as i64, t.subsec_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tcp_ack_tstamp's clone is the skb holding the mark as tcp_clean_rtx_queue
    /// leaves it: whole when acknowledged whole, a one-segment head untrimmed, a
    /// multi-segment head trimmed to what the ACK left (tcp_tso_acked).
    #[test]
    fn ack_report_length_is_the_holding_skbs() {
        use crate::tcp::rtx::skb::Skb;
        let mut t = Tcb::for_test(&crate::config::Config::default());
        t.snd_una = 1;
        t.rtx.push(Skb::sent_for_test(1, 600, 1, Instant::ZERO));
        t.rtx.push(Skb::sent_for_test(601, 400, 1, Instant::ZERO));
        t.rtx.push(Skb::sent_for_test(1001, 500, 1, Instant::ZERO));
        t.rtx.push(Skb::sent_for_test(1501, 2000, 2, Instant::ZERO));
        let mark = |key| Mark {
            key,
            flags: SOF_TIMESTAMPING_TX_ACK,
            edt: Instant::ZERO,
        };
        t.tstamp.marks.extend([1000, 1499, 3499].map(mark));
        assert_eq!(t.tstamp_ack_holders(1001), [(1000, 400)]);
        assert_eq!(t.tstamp_ack_holders(1500), [(1000, 400), (1499, 500)]);
        t.snd_una = 1501;
        assert_eq!(t.tstamp_ack_holders(3500), [(3499, 1)]);
        assert_eq!(t.tstamp_ack_holders(3501), [(3499, 2000)]);
    }

    /// sock_set_timestamping: its checks in order, and the OPT_ID step before
    /// the late ones (the key reset even when they refuse, the flags kept).
    #[test]
    fn set_timestamping_checks_each_branch() {
        let tsonly = SOF_TIMESTAMPING_OPT_TSONLY;
        let stats = SOF_TIMESTAMPING_OPT_STATS;
        assert_eq!(check_flags(1 << 19), Err(SocketError::InvalidInput));
        let id_tcp = SOF_TIMESTAMPING_OPT_ID_TCP;
        assert_eq!(check_flags(id_tcp), Err(SocketError::InvalidInput));
        assert_eq!(
            check_late_flags(stats, false),
            Err(SocketError::InvalidInput)
        );
        assert_eq!(check_late_flags(stats | tsonly, false), Ok(()));
        let phc = SOF_TIMESTAMPING_BIND_PHC;
        assert_eq!(check_late_flags(phc, false), Err(SocketError::NotSupported));
        assert_eq!(check_late_flags(phc, true), Err(SocketError::InvalidInput));
        let mut t = Tcb::for_test(&crate::config::Config::default());
        let id = SOF_TIMESTAMPING_OPT_ID;
        assert_eq!(
            t.set_timestamping(id, false),
            Err(SocketError::InvalidInput)
        );
        t.state = TcpState::Established;
        (t.snd_una, t.write_seq) = (100, 300);
        t.set_timestamping(tsonly, false).unwrap();
        let r = t.set_timestamping(id | id_tcp | stats, false);
        assert_eq!(r, Err(SocketError::InvalidInput));
        assert_eq!((t.tstamp.flags, t.tstamp.tskey), (tsonly, 300));
        t.set_timestamping(id | stats | tsonly, true).unwrap();
        assert_eq!((t.tstamp.tskey, t.tstamp.rx.tstamp_new), (100, true));
    }
}
