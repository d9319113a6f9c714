//! Timewait sockets in the stack (inet_timewait_sock.c, tcp_ipv4.c's
//! `do_time_wait:`, inet_hashtables.c's `__inet_check_established`): a slot of
//! their own in the connection table in place of the connection's `Tcb`, their
//! timer, segments to them, and `connect` taking their 4-tuple over.

use super::{Sock, Stack};
use crate::mib::Mib;
use crate::tcp::minisocks::TwStatus;
use crate::tcp::rcvqueue::Payload;
use crate::tcp::{self, Ctx, FourTuple, TcpState};
use crate::time::Instant;
use lowtide_wire::ip::IpRepr;
use lowtide_wire::tcp::TcpRepr;
use std::cmp::Reverse;
use std::net::SocketAddr;

impl Stack {
    /// `inet_twsk_hashdance`: the timewait socket the connection in `index` made
    /// (`tcp_time_wait`) takes its place in the connection table, with its timer.
    pub(super) fn hash_timewait(&mut self, index: u32) {
        let Some(Sock::Tcp(tcb)) = &mut self.slots[index as usize].sock else {
            return;
        };
        let Some(tw) = tcb.tw_handoff.take() else {
            return;
        };
        let tuple = tw.tuple;
        let h = self.alloc(Sock::TimeWait(tw));
        self.conns.insert(tuple, h.index);
        self.count_death_row(h.index);
        self.arm_timewait(h.index);
    }

    /// Arms the slot's timer for when the wheel runs its timewait socket's timer (after
    /// `inet_twsk_schedule` or `inet_twsk_reschedule`).
    fn arm_timewait(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        let Some(Sock::TimeWait(tw)) = &slot.sock else {
            return;
        };
        if slot.armed != Some(tw.runs) {
            slot.armed = Some(tw.runs);
            self.timers.push(Reverse((tw.runs, index, slot.generation)));
        }
    }

    /// `tw_timer_handler`: the timewait socket in `index` is done
    /// (`inet_twsk_kill`).
    pub(super) fn timewait_expired(&mut self, now: Instant, index: u32) -> bool {
        if !matches!(self.slots[index as usize].sock, Some(Sock::TimeWait(_))) {
            return false;
        }
        self.free_slot(now, index);
        true
    }

    /// `tcp_v4_rcv`'s `do_time_wait:`: a segment for the timewait socket in
    /// `index`, after `tcp_timewait_state_process`.
    pub(super) fn timewait_rcv(
        &mut self,
        now: Instant,
        index: u32,
        ip: &IpRepr,
        th: &TcpRepr,
        payload: Payload,
    ) {
        let Some(Sock::TimeWait(tw)) = &mut self.slots[index as usize].sock else {
            return;
        };
        let mut ctx = ctx!(self, now);
        ctx.tx_delay_us = tw.tx_delay;
        let mut status = tw.state_process(&mut ctx, th, payload.len());
        let tuple = tw.tuple;
        if let TwStatus::Syn(isn) = status {
            // A listener takes the SYN with the ISN; without one it is ACKed.
            if let Some(l) = self.find_listener(tuple).or(self.catch_all) {
                self.free_slot(now, index);
                // `goto process`: the listener's min_ttl and tcp_inbound_hash
                // (its TCP-MD5 key for the peer) judge the SYN, as any other.
                if self.min_ttl_drop(l, ip) || !self.inbound_hash(l, ip, th, &payload) {
                    return;
                }
                let mut flat = Vec::new();
                let payload = payload.contiguous(&mut flat);
                return self.listen_rcv(now, l, tuple, ip, th, payload, Some(isn));
            }
            status = TwStatus::Ack;
        }
        // tcp_v4_send_reset(tw): not a full socket, so only a listener's key
        // signs a reset to a signed segment.
        let rst_key = match status {
            TwStatus::Rst => {
                let mut flat = Vec::new();
                let data = payload.contiguous(&mut flat);
                self.reset_md5_key(None, ip, th, data)
            }
            _ => None,
        };
        let Some(Sock::TimeWait(tw)) = &mut self.slots[index as usize].sock else {
            return;
        };
        let mut ctx = ctx!(self, now);
        ctx.tx_delay_us = tw.tx_delay;
        match status {
            TwStatus::Success | TwStatus::Syn(_) => {}
            TwStatus::Ack => tw.send_ack(&mut ctx, false),
            TwStatus::AckOow => tw.send_ack(&mut ctx, true),
            TwStatus::Kill => return self.free_slot(now, index),
            TwStatus::Rst => {
                if let Some(key) = rst_key {
                    let fl = tw.flow();
                    tcp::reply::send_reset(&mut ctx, (tuple, fl), th, payload.len(), key.as_ref());
                }
                return self.free_slot(now, index);
            }
        }
        self.arm_timewait(index);
    }

    /// `__inet_check_established` for `connect`: whether `tuple` is free, or held by
    /// a timewait socket `tcp_twsk_unique` lets go (`from_search`: the port is
    /// being picked). A reused one is killed (TcpExtTWRecycled) and its ISN and
    /// timestamps are returned for the new connection.
    pub(super) fn check_established(
        &mut self,
        now: Instant,
        tuple: FourTuple,
        from_search: bool,
    ) -> Option<Option<TwReuse>> {
        let Some(index) = self.conns.get(&tuple) else {
            return Some(None);
        };
        let Some(Sock::TimeWait(tw)) = &self.slots[index as usize].sock else {
            return None;
        };
        if !tw.unique(&self.cfg, now, from_search) {
            return None;
        }
        let reuse = TwReuse {
            isn: tw.reuse_isn(),
            ts_recent: tw.ts_recent,
            ts_recent_stamp: tw.ts_recent_stamp,
        };
        self.mib.inc(Mib::TcpExtTWRecycled);
        self.free_slot(now, index);
        Some(Some(reuse))
    }

    /// The substate (TIME-WAIT or FIN-WAIT-2) of the timewait socket that holds
    /// the 4-tuple `local`-`remote`, if one does (what `ss -t state time-wait`
    /// lists; the application's own socket reads CLOSED by then, as Linux's).
    pub fn timewait_state(&self, local: SocketAddr, remote: SocketAddr) -> Option<TcpState> {
        let index = self.conns.get(&FourTuple { local, remote })?;
        match &self.slots[index as usize].sock {
            Some(Sock::TimeWait(tw)) => Some(tw.substate),
            _ => None,
        }
    }
}

/// What a `connect` takes over from a timewait socket (`tcp_twsk_unique`): the
/// ISN `tw_snd_nxt + 65535 + 2` and the peer's last timestamp.
#[derive(Debug, Clone, Copy)]
pub(super) struct TwReuse {
    pub isn: u32,
    pub ts_recent: u32,
    pub ts_recent_stamp: Option<Instant>,
}
