//! The socket calls (tcp.c): `tcp_sendmsg`, `tcp_recvmsg`, `tcp_shutdown`,
//! `tcp_close`, `tcp_disconnect`.

use super::consts::{GSO_MAX_SEGS, SKB_OVERHEAD, SK_GSO_MAX_SIZE};
use super::mem::MemKind;
use super::nagle::{TCP_NAGLE_CORK, TCP_NAGLE_OFF, TCP_NAGLE_PUSH};
use super::rtx::skb::{self as skb, WriteData, WriteSkb, FLAG_EOR, FLAG_FIN, FLAG_PSH};
use super::sock::{SendCall, Tcb};
use super::{Ctx, TcpState};
use crate::config::Config;
use crate::mib::Mib;
use crate::socket::{SendFlags, SendPart, Shutdown, SocketError};
use crate::time::Instant;

impl Tcb {
    /// The `TCP_NOTSENT_LOWAT` in force: the socket's own value if set, else the
    /// sysctl (`tcp_notsent_lowat()`), read at every use so a sysctl change applies
    /// at once.
    pub(crate) fn effective_lowat(&self, cfg: &Config) -> u32 {
        if self.notsent_lowat != 0 {
            self.notsent_lowat
        } else {
            cfg.tcp_notsent_lowat
        }
    }

    /// `tcp_stream_memory_free(sk, wake)`: `(notsent << wake) < lowat` (seeds 000/001).
    fn stream_memory_free(&self, cfg: &Config, wake: u32) -> bool {
        (self.notsent_bytes() << wake) < self.effective_lowat(cfg) as u64
    }

    /// `sk_stream_memory_free`: may a new skb be queued? (writer side: wake = 0)
    fn memory_free(&self, cfg: &Config) -> bool {
        self.wmem_queued < self.sndbuf as u64 && self.stream_memory_free(cfg, 0)
    }

    /// `sk_stream_is_writeable` as `tcp_poll` reports it: free space at least half of
    /// what is queued, and notsent below lowat/2 (wake = 1, seed 001; wake = 0 with
    /// `experimental.notsent_wake_hysteresis = false`).
    pub(crate) fn is_writeable(&self, cfg: &Config) -> bool {
        let wspace = (self.sndbuf as i64) - self.wmem_queued as i64;
        let wake = cfg.notsent_wake_hysteresis as u32;
        wspace >= (self.wmem_queued / 2) as i64
            && self.wmem_queued < self.sndbuf as u64
            && self.stream_memory_free(cfg, wake)
    }

    /// `TCP_NOTSENT_LOWAT` setsockopt: applies at once and calls `sk_write_space`,
    /// which wakes the socket's waiters if it is writable under the new mark.
    pub(crate) fn set_notsent_lowat(&mut self, ctx: &mut Ctx, bytes: u32) {
        self.notsent_lowat = bytes;
        self.write_space(ctx);
    }

    /// `SO_SNDBUF` (`sk_setsockopt`'s `set_sndbuf`) on a connection: the buffer,
    /// then `sk_write_space` ("Wake up sending tasks if we upped the value").
    pub(crate) fn set_sndbuf_and_wake(&mut self, ctx: &mut Ctx, bytes: u32) {
        self.set_sndbuf(bytes);
        self.write_space(ctx);
    }

    /// `tcp_xmit_size_goal`: `sk_gso_max_size` ([`SK_GSO_MAX_SIZE`]) bounded to
    /// half the peer's largest window (`tcp_bound_to_half_wnd`), in whole segments
    /// (`tp->gso_segs`, at most `sk_gso_max_segs`), at least one.
    ///
    /// Before seed 004 (`experimental.size_goal_at = write`) the goal was also cut to
    /// the TSO autosize of the moment, so a slow-starting flow wrote small skbs.
    pub(crate) fn size_goal(&self, cfg: &Config, now: Instant) -> u32 {
        let mss = self.current_mss(cfg, now);
        // tcp_bound_to_half_wnd: half the largest window, or all of one of at
        // most TCP_MSS_DEFAULT bytes.
        let mut goal = self.bound_to_half_wnd(SK_GSO_MAX_SIZE);
        if cfg.size_goal_at == crate::config::SizeGoalAt::Write {
            goal = goal.min(self.tso_autosize(cfg, mss) * mss);
        }
        let gso_segs = (goal / mss).min(GSO_MAX_SEGS);
        (gso_segs * mss).max(mss)
    }

    /// `tcp_sendmsg`, the one way bytes enter the write queue: copies as much of
    /// `data` as the send buffer takes, then `tcp_push`es (`MSG_MORE` corks);
    /// `MSG_EOR` marks the last skb when all of `data` was taken. A `MSG_ZEROCOPY`
    /// send lays out its page fragments (`frags`: their lengths, in order, summing
    /// to `data.len()`; ignored otherwise) one skb fragment each
    /// (`skb_zerocopy_iter_stream`); its notification id is taken first
    /// (`msg_zerocopy_realloc`) and given back if nothing was taken.
    pub(crate) fn sendmsg(
        &mut self,
        ctx: &mut Ctx,
        data: &[u8],
        frags: &[ZcFrag],
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        self.sendmsg_data(ctx, SendData::Bytes(data), frags, flags)
    }

    /// `MSG_ZEROCOPY` without the copy: the skbs take slices of `data` itself
    /// (`skb_zerocopy_iter_stream` pinning the user's pages), laid out in page
    /// fragments of [`ZC_PAGE`] bytes from its start (as a page-aligned buffer),
    /// at most [`MAX_SKB_FRAGS`] per skb. Its completion carries `ee_code` 0 unless
    /// a device copied the bytes ([`Ctx::tx_orphan_frags`]). Without `SO_ZEROCOPY`
    /// the flag is ignored and the bytes copied, as Linux does; a device that
    /// takes no payload apart from the headers ([`Ctx::tx_apart`], Linux's
    /// `NETIF_F_SG` in `sk_route_caps`) gets them copied too, with a notification
    /// id and `SO_EE_CODE_ZEROCOPY_COPIED` (`uarg->zerocopy = 0`). Otherwise as
    /// [`Tcb::sendmsg`].
    pub(crate) fn send_zerocopy(
        &mut self,
        ctx: &mut Ctx,
        data: &bytes::Bytes,
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        let flags = SendFlags {
            zerocopy: true,
            ..flags
        };
        let frags = zc_page_frags(data.len());
        if !self.errq.zerocopy || !ctx.tx_apart {
            return self.sendmsg(ctx, data, &frags, flags);
        }
        self.sendmsg_data(ctx, SendData::Shared(data), &frags, flags)
    }

    /// A send of pattern mode: `len` bytes of the socket's payload source, which
    /// the write queue counts but does not store (see [`super::rtx::data`]);
    /// otherwise as [`Tcb::sendmsg`] without flags.
    pub(crate) fn send_pattern(&mut self, ctx: &mut Ctx, len: usize) -> Result<usize, SocketError> {
        self.sendmsg_data(ctx, SendData::Pattern(len), &[], SendFlags::default())
    }

    /// [`Tcb::sendmsg`] of bytes or of a pattern's count: a socket with a payload
    /// source takes only the latter, one without only the former.
    fn sendmsg_data(
        &mut self,
        ctx: &mut Ctx,
        data: SendData<'_>,
        frags: &[ZcFrag],
        flags: SendFlags,
    ) -> Result<usize, SocketError> {
        if self.payload_source.is_some() != matches!(data, SendData::Pattern(_)) {
            return Err(SocketError::InvalidInput);
        }
        // A blocking call's later attempt goes on with its id; any other starts a
        // call (ending one its caller left waiting).
        let cont = match flags.part {
            SendPart::Cont => self.send_call.take(),
            _ => None,
        };
        if cont.is_none() {
            self.send_call_finish(ctx);
        }
        let zc = match (cont, flags.zerocopy) {
            (Some(c), _) => c.zc,
            (None, true) => self.zerocopy_begin(ctx, data.len())?,
            (None, false) => None,
        };
        let r = self.sendmsg_locked(ctx, data, zc.map(|id| (id, frags)), flags, cont.is_none());
        let copied = *r.as_ref().unwrap_or(&0);
        let call = SendCall {
            zc,
            copied: cont.map_or(0, |c| c.copied) + copied,
            // A send of slices copies the caller's bytes (uarg->zerocopy = 0:
            // SO_EE_CODE_ZEROCOPY_COPIED); a send of a Bytes keeps them.
            copied_data: !matches!(data, SendData::Shared(_)),
        };
        let waits = match &r {
            Ok(n) => *n < data.len(),
            Err(e) => *e == SocketError::WouldBlock,
        };
        self.send_call = Some(call);
        if flags.part == SendPart::Whole || !waits {
            self.send_call_finish(ctx);
        }
        r
    }

    /// `tcp_sendmsg_locked`'s `out:` for a blocking call its caller ends before all
    /// was copied (`SO_SNDTIMEO`, an error, a signal): the timestamp record of its
    /// last byte and a push (`tcp_tx_timestamp`, `tcp_push` with the call's flags),
    /// then its zerocopy id let go. Nothing without such a call.
    pub(crate) fn send_end(&mut self, ctx: &mut Ctx, flags: SendFlags) {
        if self.send_call.is_some_and(|c| c.copied > 0) {
            self.tx_timestamp();
            self.tcp_push(ctx, flags.more, false, flags.oob);
        }
        self.send_call_finish(ctx);
    }

    /// The end of a send call: `net_zcopy_put` of its id ([`ErrQueue::sent`]).
    fn send_call_finish(&mut self, ctx: &mut Ctx) {
        let Some(call) = self.send_call.take() else {
            return;
        };
        if call.zc.is_some() {
            self.errq
                .sent(call.copied, self.write_seq, call.copied_data);
            self.zerocopy_release(ctx);
        }
    }

    /// `tcp_sendmsg_locked` after the zerocopy step.
    fn sendmsg_locked(
        &mut self,
        ctx: &mut Ctx,
        data: SendData<'_>,
        zc: Option<(u32, &[ZcFrag])>,
        flags: SendFlags,
        starts: bool,
    ) -> Result<usize, SocketError> {
        let more = flags.more;
        // tcp_sendmsg_locked checks for a bubble before anything can fail (past the
        // zerocopy and Fast Open steps): a send that waits for the connection, is
        // refused with EPIPE or carries no bytes still marks it; once per call,
        // not after a wait for space.
        if starts {
            self.rate_check_app_limited(); // is sending application-limited?
        }
        self.writable_state()?;
        if data.is_empty() {
            return Ok(0);
        }
        self.sync_dst_mtu(ctx); // tcp_send_mss -> tcp_current_mss
        let copied = self.copy_to_write_queue(ctx, data, zc, flags.oob);
        if copied == 0 {
            self.nospace = true;
            return Err(SocketError::WouldBlock);
        }
        if copied == data.len() && flags.eor {
            // tcp_sendmsg_locked: "if (!msg_data_left(msg)) ... eor = 1".
            if let Some(t) = self.write_queue.back_mut() {
                t.flags |= FLAG_EOR;
            }
        }
        if copied < data.len() {
            // wait_for_space: tcp_push(flags & ~MSG_MORE, TCP_NAGLE_PUSH), before
            // the write ends (out:) with tcp_tx_timestamp and tcp_push.
            self.nospace = true;
            self.tcp_push(ctx, false, true, flags.oob);
            if flags.part == SendPart::Whole {
                self.tx_timestamp(); // out: the call ends here
            }
        } else {
            self.tx_timestamp();
            self.tcp_push(ctx, more, false, flags.oob);
        }
        Ok(copied)
    }

    /// `forced_push`: more than half the peer's largest window written since the
    /// last PSH.
    fn forced_push(&self) -> bool {
        self.write_seq > self.pushed_seq + (self.max_window >> 1) as u64
    }

    /// `tcp_mark_push`: PSH on the write queue's tail.
    fn mark_push(&mut self) {
        if let Some(t) = self.write_queue.back_mut() {
            t.flags |= FLAG_PSH;
        }
        self.pushed_seq = self.write_seq;
    }

    /// `tcp_push`: marks the tail PSH unless `MSG_MORE` (or when forced) and the
    /// urgent pointer for `MSG_OOB` (`tcp_mark_urg`), then sends with
    /// `TCP_NAGLE_CORK` for `MSG_MORE`, `TCP_NAGLE_PUSH` if `push`.
    fn tcp_push(&mut self, ctx: &mut Ctx, more: bool, push: bool, oob: bool) {
        if self.write_queue.is_empty() {
            return;
        }
        if !more || self.forced_push() {
            self.mark_push();
        }
        if oob {
            self.mark_urg();
        }
        if self.should_autocork(ctx) {
            // The TX completion (`on_tx_complete`) sends it, with what the next
            // writes add meanwhile.
            if !self.pace.tsq_throttled {
                ctx.mib.inc(Mib::TcpExtTCPAutoCorking);
                self.pace.tsq_throttled = true;
            }
            return;
        }
        // MSG_MORE pushes with TCP_NAGLE_CORK, whatever the socket's bits.
        match (more, push) {
            (true, _) => self.push_pending_frames_with(ctx, TCP_NAGLE_CORK),
            (false, true) => self.push_pending_frames_with(ctx, TCP_NAGLE_PUSH),
            (false, false) => self.write_xmit(ctx),
        }
    }

    /// `tcp_should_autocork` (tcp.c, Linux 3.14's auto corking): hold back a tail skb
    /// smaller than the size goal while data of ours waits in the device queue (at
    /// least the tail's own truesize, `sk_wmem_alloc`'s own reference making up the
    /// `>`, so an ACK alone there does not count); the TX
    /// completion sends it. It rides on TSQ's completion handler (`tcp_wfree`), which
    /// `experimental.tsq` off (a kernel before TSQ) does not have.
    fn should_autocork(&self, ctx: &Ctx) -> bool {
        let Some(tail) = self.write_queue.back() else {
            return false;
        };
        // Linux's truesize of a tail skb: its overhead plus the bytes copied in so
        // far (pinned pages whole).
        let truesize = SKB_OVERHEAD as u64 + tail.data.len() as u64 + tail.slack as u64;
        tail.data.len() < self.size_goal(ctx.cfg, ctx.now) as usize
            && skb::can_collapse_to(tail.flags) // MSG_EOR: nothing more joins it
            && ctx.cfg.tcp_autocorking
            && ctx.cfg.tsq
            && !self.rtx.is_empty()
            // refcount_read(&sk->sk_wmem_alloc) > skb->truesize: the socket's own
            // reference counts (sk_alloc sets it to 1).
            && self.wmem_alloc + 1 > truesize
    }

    /// Errors that forbid writing in the current state.
    fn writable_state(&mut self) -> Result<(), SocketError> {
        if let Some(e) = self.sk_err.take() {
            return Err(e);
        }
        if self.shut_wr {
            return Err(SocketError::BrokenPipe);
        }
        match self.state {
            TcpState::Established | TcpState::CloseWait => Ok(()),
            // tcp_sendmsg_locked: a passive Fast Open child may send at once.
            TcpState::SynRecv if self.passive_fastopen() => Ok(()),
            TcpState::SynSent | TcpState::SynRecv => Err(SocketError::WouldBlock),
            TcpState::Closed => Err(SocketError::NotConnected),
            _ => Err(SocketError::BrokenPipe),
        }
    }

    /// `tcp_sendmsg_locked`'s copy loop: appends to the tail skb up to `size_goal`,
    /// starts new skbs while `sk_stream_memory_free` holds, and sends a full skb at
    /// once when it is the send head (`tcp_push_one`) or when `forced_push`.
    ///
    /// With `zc` (the send's notification id and fragment lengths), each piece of a
    /// fragment becomes an skb fragment carrying the id; an skb whose fragments
    /// ran out (`MAX_SKB_FRAGS`) or that carries another id is marked PSH and a new
    /// one started (`skb_zerocopy_iter_stream`'s `-EMSGSIZE`/`-EEXIST`).
    fn copy_to_write_queue(
        &mut self,
        ctx: &mut Ctx,
        data: SendData<'_>,
        zc: Option<(u32, &[ZcFrag])>,
        oob: bool,
    ) -> usize {
        // tcp_send_mss: no large skbs for MSG_OOB (tcp_xmit_size_goal's
        // large_allowed), one MSS each.
        let goal = match oob {
            true => self.current_mss(ctx.cfg, ctx.now) as usize,
            false => self.size_goal(ctx.cfg, ctx.now) as usize,
        };
        let mut copied = 0;
        let mut frags = FragCursor::new(zc.map_or(&[][..], |z| z.1));
        let shared = matches!(data, SendData::Shared(_));
        // A zerocopy send's new skbs hold slices of its buffer, none of their own.
        let own_id = zc.filter(|_| shared).map(|z| z.0);
        while copied < data.len() {
            let room = match self.write_queue.back() {
                Some(t)
                    if t.data.len() < goal
                        && t.flags & FLAG_FIN == 0
                        && skb::can_collapse_to(t.flags) =>
                {
                    let takes = t.data.takes(shared, data.bytes(), copied);
                    // Copied data after zerocopy data needs a fragment of its own.
                    let full = match zc {
                        Some((id, _)) => zc_full(t, id),
                        None => t.frag_zc && t.nr_frags >= MAX_SKB_FRAGS,
                    };
                    if full || (zc.is_some() && !takes) {
                        self.mark_push();
                        0
                    } else if !takes {
                        0 // copied data after a zerocopy buffer: an skb of its own
                    } else {
                        goal - t.data.len()
                    }
                }
                _ => 0,
            };
            let room = match room {
                0 if !self.memory_free(ctx.cfg) => break,
                0 if !self.new_write_skb(ctx, goal, own_id) => break,
                0 => goal,
                r => r,
            };
            let Some(mut n) = self.tail_schedule(ctx, zc.is_some(), room.min(data.len() - copied))
            else {
                break; // wait_for_space
            };
            let tail = self.write_queue.back_mut().expect("tail exists");
            if let Some((id, _)) = zc {
                n = n.min(frags.left(copied));
                tail.zc = Some(id);
                tail.nr_frags += 1;
            } else if tail.frag_zc {
                tail.nr_frags += 1; // skb_fill_page_desc: not merged
            }
            tail.frag_zc = zc.is_some();
            if copied == 0 {
                tail.flags &= !FLAG_PSH;
            }
            match data {
                SendData::Shared(src) => {
                    let id = zc.expect("a shared send takes an id").0;
                    tail.data.append_zerocopy(src, copied, n, id);
                }
                _ => tail.data.append(data.bytes().map(|d| &d[copied..]), n),
            }
            // __zerocopy_sg_from_iter: pinned pages count whole
            // (PAGE_ALIGN(copied + start), `start` the offset in its page of the
            // user's buffer where this piece begins), uncharged in a pure skb.
            let truesize = match zc {
                None => n,
                Some(_) => zc_truesize(frags.page_offset(copied), n),
            };
            tail.slack += (truesize - n) as u32;
            if tail.pure {
                self.wq_uncharged += truesize as u64;
            }
            let full = tail.data.len() >= goal;
            copied += n;
            self.wmem_queued += truesize as u64;
            self.write_seq += n as u64;
            // tcp_sendmsg_locked: MSG_OOB data waits for the final tcp_push.
            if copied == data.len() || !full || oob {
                continue;
            }
            if self.forced_push() {
                self.mark_push();
                self.push_pending_frames_with(ctx, TCP_NAGLE_PUSH);
            } else if self.write_queue.len() == 1 {
                // tcp_push_one: tcp_write_xmit(TCP_NAGLE_PUSH, push_one = 1).
                self.push_one = 1;
                self.push_pending_frames_with(ctx, TCP_NAGLE_PUSH);
                self.push_one = 0;
            }
        }
        copied
    }

    /// `tcp_sendmsg_locked`'s charge before up to `copy` bytes join the tail
    /// skb: zerocopy data makes an empty skb pure (`SKBFL_PURE_ZEROCOPY`) and
    /// asks nothing for a pure one, else `tcp_wmem_schedule`; copied data first
    /// downgrades a pure skb (`tcp_downgrade_zcopy_pure`). None: wait for space.
    fn tail_schedule(&mut self, ctx: &mut Ctx, zerocopy: bool, copy: usize) -> Option<usize> {
        let tail = self.write_queue.back_mut().expect("tail exists");
        if zerocopy {
            tail.pure |= tail.data.is_empty();
            if tail.pure {
                return Some(copy);
            }
        } else if tail.pure && !self.downgrade_zcopy_pure(ctx) {
            return None;
        }
        Some(self.wmem_schedule(ctx, copy)).filter(|&n| n > 0)
    }

    /// `tcp_downgrade_zcopy_pure`: the tail's pinned pages are charged to the
    /// reserve (`sk_wmem_schedule`, `sk_mem_charge`) so that copied data may join
    /// it; false if `tcp_mem` refuses.
    fn downgrade_zcopy_pure(&mut self, ctx: &mut Ctx) -> bool {
        let extra = self.write_queue.back().map_or(0, |t| t.uncharged());
        if !self.mem_schedule(ctx, extra, MemKind::Send) {
            return false;
        }
        self.wq_uncharged -= extra;
        if let Some(t) = self.write_queue.back_mut() {
            t.pure = false;
        }
        true
    }

    /// `tcp_stream_alloc_skb` and `tcp_skb_entail`: a new skb for the writer, its
    /// truesize charged under `tcp_mem` (granted whatever `tcp_mem` says when
    /// both queues are empty, so that a writer always makes progress); false if
    /// refused (`wait_for_space`). Entailing it ends a `TCP_NAGLE_PUSH` left in
    /// `tp->nonagle` and may restart an idle window
    /// (`tcp_slow_start_after_idle_check`).
    /// A zerocopy send's skb (`zc`: its notification id) holds no buffer of its own.
    fn new_write_skb(&mut self, ctx: &mut Ctx, goal: usize, zc: Option<u32>) -> bool {
        let first_skb = self.write_queue.is_empty() && self.rtx.is_empty();
        if !first_skb && !self.mem_schedule(ctx, SKB_OVERHEAD as u64, MemKind::Send) {
            return false;
        }
        let data = match zc {
            Some(id) => WriteData::Zerocopy(bytes::Bytes::new(), id),
            None => self.new_write_data(ctx, goal),
        };
        self.add_write_queue_tail(ctx, data, 0);
        self.nonagle_push = false;
        self.slow_start_after_idle_check(ctx);
        true
    }

    /// `tcp_add_write_queue_tail` of a new skb with `flags`, charged to
    /// `sk_wmem_queued`.
    fn add_write_queue_tail(&mut self, ctx: &mut Ctx, data: WriteData, flags: u8) {
        // The first unsent skb starts the busy chrono.
        if self.write_queue.is_empty() {
            self.chrono_start(ctx.now, super::chrono::Chrono::Busy);
        }
        self.write_queue
            .push_back(WriteSkb::copied(self.write_seq, data, flags));
        self.wmem_queued += SKB_OVERHEAD as u64;
    }

    /// The payload of a new skb: room for `goal` copied bytes, or none in pattern
    /// mode.
    fn new_write_data(&self, ctx: &mut Ctx, goal: usize) -> WriteData {
        match self.payload_source {
            Some(_) => WriteData::Pattern { len: 0 },
            None => WriteData::Stored(ctx.frag.take(goal)),
        }
    }

    /// `tcp_wmem_schedule`: how much of `copy` bytes may be charged; when
    /// `tcp_mem` refuses, a queue below `tcp_wmem[0]` still takes up to that much
    /// (`sk_forced_mem_schedule`), and the rest of the reserve.
    fn wmem_schedule(&mut self, ctx: &mut Ctx, copy: usize) -> usize {
        if self.mem_schedule(ctx, copy as u64, MemKind::Send) {
            return copy;
        }
        let left = ctx.cfg.tcp_wmem[0] as i64 - self.wmem_queued as i64;
        if left > 0 {
            self.mem_forced_schedule(ctx.mem, (left as u64).min(copy as u64));
        }
        copy.min(self.forward_alloc().max(0) as usize)
    }

    /// `inet_shutdown` and `tcp_shutdown`: `SHUT_RD` marks the socket (what is
    /// queued stays readable); `SHUT_WR` sends the FIN of `tcp_close_state` from
    /// ESTABLISHED and CLOSE-WAIT (whatever `sk_shutdown` already held); in SYN-RECV
    /// (a Fast Open child, a simultaneous open) it only sets `SEND_SHUTDOWN`, and
    /// the FIN goes once the handshake's ACK establishes the connection
    /// (`tcp_rcv_state_process`); in SYN-SENT `inet_shutdown` calls `tcp_disconnect`
    /// instead (no segment, the connect fails with `ECONNRESET`); a closed
    /// connection is `ENOTCONN`.
    pub(crate) fn shutdown(&mut self, ctx: &mut Ctx, how: Shutdown) -> Result<(), SocketError> {
        match self.state {
            TcpState::Closed | TcpState::Listen => return Err(SocketError::NotConnected),
            TcpState::SynSent => {
                self.disconnect(ctx);
                return Ok(());
            }
            _ => {}
        }
        if matches!(how, Shutdown::Read | Shutdown::Both) {
            // inet_shutdown: RCV_SHUTDOWN only; what is queued stays readable.
            self.shut_rd = true;
        }
        if matches!(how, Shutdown::Write | Shutdown::Both) {
            self.shut_wr = true;
            // tcp_shutdown: "If we've already sent a FIN, or it's a closed state,
            // skip this": TCPF_ESTABLISHED | TCPF_SYN_SENT | TCPF_CLOSE_WAIT only.
            if matches!(self.state, TcpState::Established | TcpState::CloseWait) {
                self.close_state_fin(ctx);
            }
        }
        Ok(())
    }

    /// `__tcp_close` (`linger_zero`: `SO_LINGER` on with a zero time): unread data
    /// resets the connection first
    /// ([RFC 2525 section 2.17](https://www.rfc-editor.org/rfc/rfc2525#section-2.17),
    /// `TcpExtTCPAbortOnClose`); then a zero linger time is `tcp_disconnect`
    /// (`TcpExtTCPAbortOnData`); else the FIN of `tcp_close_state` (none from
    /// SYN-SENT), and an orphan in FIN-WAIT-2 waits `tcp_fin_time` or, with
    /// `TCP_LINGER2` negative, is reset at once.
    pub(crate) fn close(&mut self, ctx: &mut Ctx, linger_zero: bool) {
        self.close_lingering(ctx, linger_zero, false);
    }

    /// [`Tcb::close`] of a socket with `SO_LINGER` on and a time (`lingering`):
    /// `__tcp_close` sleeps in `sk_stream_wait_close` while the FIN is unacknowledged
    /// (FIN-WAIT-1, CLOSING, LAST-ACK) before `adjudge_to_death` orphans the socket,
    /// so until [`Tcb::adjudge_to_death`] it is no orphan (a zero window is probed by
    /// the live RTO, no orphan retries, no FIN-WAIT-2 timeout at the ACK). Returns
    /// whether that is still to come.
    pub(crate) fn close_lingering(
        &mut self,
        ctx: &mut Ctx,
        linger_zero: bool,
        lingering: bool,
    ) -> bool {
        // sock_orphan: SOCK_DEAD, no more MSG_ZEROCOPY notifications (at once when
        // the linger wait has nothing to wait for).
        self.errq.dead = true;
        let unread = !self.rcv_queue.is_empty();
        self.shut_rd = true;
        if matches!(self.state, TcpState::Closed | TcpState::Listen) {
            self.set_closed(ctx);
            return false;
        }
        if unread {
            ctx.mib.inc(Mib::TcpExtTCPAbortOnClose);
            self.send_active_reset(ctx);
            self.shut_wr = true;
            self.set_closed(ctx);
            return false;
        }
        if linger_zero {
            ctx.mib.inc(Mib::TcpExtTCPAbortOnData);
            self.disconnect(ctx);
            return false;
        }
        if self.state == TcpState::SynSent {
            self.set_closed(ctx);
            return false;
        }
        self.shut_wr = true;
        if lingering {
            self.errq.dead = false;
        }
        self.close_state_fin(ctx);
        let closing = matches!(
            self.state,
            TcpState::FinWait1 | TcpState::Closing | TcpState::LastAck
        );
        if lingering && closing {
            self.adjudge_pending = true;
            return true;
        }
        self.adjudge_to_death(ctx);
        false
    }

    /// `__tcp_close`'s `adjudge_to_death`: `sock_orphan` (SOCK_DEAD), then an
    /// orphan in FIN-WAIT-2 waits `tcp_fin_time` or, with `TCP_LINGER2` negative, is
    /// reset at once; one still there (FIN-WAIT-2 on its timer beyond 60 s) or
    /// still closing meets `tcp_check_oom`.
    pub(crate) fn adjudge_to_death(&mut self, ctx: &mut Ctx) {
        self.adjudge_pending = false;
        self.errq.dead = true;
        if self.state == TcpState::FinWait2 && self.linger2 < 0 {
            // tcp_close: TCP_LINGER2 negative ends FIN-WAIT-2 with a reset at once.
            self.send_active_reset(ctx);
            ctx.mib.inc(Mib::TcpExtTCPAbortOnLinger);
            self.set_closed(ctx);
        } else if self.state == TcpState::FinWait2 {
            self.close_fin_wait2(ctx);
        }
        if !matches!(self.state, TcpState::Closed | TcpState::TimeWait) {
            self.close_check_oom(ctx);
        }
    }

    /// `tcp_disconnect`: the states of `tcp_need_reset` (ESTABLISHED, CLOSE-WAIT,
    /// FIN-WAIT-1 and 2, SYN-RECV) send a reset and fail with `ECONNRESET`, CLOSING
    /// and LAST-ACK only while data or their FIN is unsent ("discrepancy of Linux
    /// wrt. RFC states"), SYN-SENT fails with `ECONNRESET` and sends nothing; then
    /// the connection is closed.
    pub(crate) fn disconnect(&mut self, ctx: &mut Ctx) {
        let reset = match self.state {
            TcpState::Established
            | TcpState::CloseWait
            | TcpState::FinWait1
            | TcpState::FinWait2
            | TcpState::SynRecv => Some(true),
            TcpState::Closing | TcpState::LastAck if self.snd_nxt != self.write_seq => Some(true),
            TcpState::SynSent => Some(false),
            _ => None,
        };
        self.shut_rd = true;
        self.shut_wr = true;
        match reset {
            Some(send) => {
                if send {
                    self.send_active_reset(ctx);
                }
                self.set_error(ctx, SocketError::ConnectionReset);
            }
            None => {
                self.write_queue_purge(ctx.now);
                self.set_closed(ctx);
            }
        }
        // Then the queues go: the out-of-order one after
        // tcp_fastopen_active_disable_ofo_check has looked at it.
        self.fastopen_active_disable_ofo_check();
        self.ofo.purge();
    }

    /// The `write_seq` `tcp_disconnect` leaves the socket of this connection for its
    /// next connect ([`super::sockopt::disconnect_write_seq`] of the wire
    /// `write_seq` and `max_window`).
    pub(crate) fn disconnect_write_seq(&self) -> u32 {
        super::sockopt::disconnect_write_seq(self.snd_seq(self.write_seq).0, self.max_window)
    }

    /// `tcp_close_state`: only ESTABLISHED, SYN-RECV and CLOSE-WAIT have a FIN to
    /// send (`TCP_ACTION_FIN`); the other states have sent theirs or send none.
    fn close_state_fin(&mut self, ctx: &mut Ctx) {
        if matches!(
            self.state,
            TcpState::Established | TcpState::SynRecv | TcpState::CloseWait
        ) {
            self.send_fin(ctx);
        }
    }

    /// `tcp_send_fin`: queue a FIN after the data and move to the closing states.
    pub(crate) fn send_fin(&mut self, ctx: &mut Ctx) {
        self.state = match self.state {
            TcpState::Established | TcpState::SynRecv => TcpState::FinWait1,
            TcpState::CloseWait => TcpState::LastAck,
            TcpState::SynSent => return self.set_closed(ctx),
            s => s,
        };
        match self.write_queue.back_mut() {
            Some(t) => t.flags |= FLAG_FIN,
            None => {
                // An skb of its own (tcp_queue_skb, not tcp_skb_entail), its memory
                // taken whatever tcp_mem says (sk_forced_mem_schedule).
                self.mem_forced_schedule(ctx.mem, SKB_OVERHEAD as u64);
                let data = self.new_write_data(ctx, 0);
                self.add_write_queue_tail(ctx, data, FLAG_FIN);
            }
        }
        self.fin_queued = true;
        self.write_seq += 1;
        // TCP_NAGLE_OFF: the FIN skb is neither held by Nagle nor split by it
        // (tcp_mss_split_point).
        self.push_pending_frames_with(ctx, TCP_NAGLE_OFF);
    }
}

/// What a send writes: the caller's bytes, or (pattern mode) a count of the
/// socket's payload source's.
#[derive(Debug, Clone, Copy)]
enum SendData<'a> {
    /// `send(2)`'s buffer.
    Bytes(&'a [u8]),
    /// That many bytes of the payload source.
    Pattern(usize),
    /// A `MSG_ZEROCOPY` send's buffer, which the skbs keep slices of.
    Shared(&'a bytes::Bytes),
}

impl<'a> SendData<'a> {
    fn len(&self) -> usize {
        match self {
            SendData::Bytes(b) => b.len(),
            SendData::Pattern(n) => *n,
            SendData::Shared(b) => b.len(),
        }
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes, if the send has them.
    fn bytes(&self) -> Option<&'a [u8]> {
        match self {
            SendData::Bytes(b) => Some(b),
            SendData::Shared(b) => Some(&b[..]),
            SendData::Pattern(_) => None,
        }
    }
}

/// The page size a zerocopy send's buffer is laid out in (x86-64's `PAGE_SIZE`).
pub const ZC_PAGE: usize = 4096;

/// One page fragment of a zerocopy send: its length and the offset in its page
/// of its first byte in the user's buffer (`iov_iter_get_pages2`'s `start`).
pub type ZcFrag = (usize, usize);

/// The page fragments of a zerocopy buffer of `len` bytes, as
/// `iov_iter_get_pages2` pins a page-aligned buffer: whole pages, then the rest.
fn zc_page_frags(len: usize) -> Vec<ZcFrag> {
    let mut v = vec![(ZC_PAGE, 0); len / ZC_PAGE];
    if !len.is_multiple_of(ZC_PAGE) {
        v.push((len % ZC_PAGE, 0));
    }
    v
}

/// The truesize `n` zerocopy bytes from offset `start` in a page add to their
/// skb: the pages they span, whole (`zerocopy_fill_skb_from_iter`'s
/// `PAGE_ALIGN(copied + start)`).
fn zc_truesize(start: usize, n: usize) -> usize {
    (start + n).div_ceil(ZC_PAGE) * ZC_PAGE
}

/// `MAX_SKB_FRAGS`: page fragments an skb holds (`net.core.max_skb_frags`'s default).
pub const MAX_SKB_FRAGS: u16 = 17;

/// Can zerocopy data of notification `id` not join the skb `t`: its fragments are
/// used up, or it carries another notification's data (`skb_zerocopy_iter_stream`).
fn zc_full(t: &WriteSkb, id: u32) -> bool {
    t.nr_frags >= MAX_SKB_FRAGS || t.zc.is_some_and(|z| z != id)
}

/// Walks a send's page fragments by byte offset.
struct FragCursor<'a> {
    lens: &'a [ZcFrag],
    /// Offset where fragment `lens[0]` ends.
    end: usize,
}

impl<'a> FragCursor<'a> {
    fn new(lens: &'a [ZcFrag]) -> Self {
        FragCursor {
            end: lens.first().map_or(usize::MAX, |f| f.0),
            lens,
        }
    }

    /// The offset in its page of the user's byte at send offset `at` (after
    /// [`FragCursor::left`] reached its fragment).
    fn page_offset(&mut self, at: usize) -> usize {
        self.left(at);
        match self.lens.first() {
            Some(&(len, start)) => (start + at - (self.end - len)) % ZC_PAGE,
            None => at % ZC_PAGE,
        }
    }

    /// Bytes from `at` to the end of the fragment holding it (all, without
    /// fragments).
    fn left(&mut self, at: usize) -> usize {
        while at >= self.end && self.lens.len() > 1 {
            self.lens = &self.lens[1..];
            self.end += self.lens[0].0;
        }
        self.end.saturating_sub(at).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcb(cfg: &Config) -> Tcb {
        let mut t = Tcb::for_test(cfg);
        t.sndbuf = 1 << 30;
        t.snd_nxt = 1;
        t
    }

    #[test]
    fn notsent_lowat_edges_with_and_without_hysteresis() {
        let mut cfg = Config::default();
        let mut t = tcb(&cfg);
        t.notsent_lowat = 1000;
        // Writer (wake = 0): may queue while notsent < lowat.
        t.write_seq = 1 + 999;
        assert!(t.memory_free(&cfg));
        t.write_seq = 1 + 1000;
        assert!(!t.memory_free(&cfg));
        // Poll (wake = 1, seed 001): writable only below lowat / 2.
        t.write_seq = 1 + 499;
        assert!(t.is_writeable(&cfg));
        t.write_seq = 1 + 500;
        assert!(!t.is_writeable(&cfg));
        // Without the hysteresis (seed 000 alone): writable below lowat.
        cfg.notsent_wake_hysteresis = false;
        assert!(t.is_writeable(&cfg));
        t.write_seq = 1 + 1000;
        assert!(!t.is_writeable(&cfg));
    }

    #[test]
    fn socket_value_wins_over_sysctl_and_zero_means_unset() {
        let mut cfg = Config::default();
        let mut t = tcb(&cfg);
        assert_eq!(t.effective_lowat(&cfg), u32::MAX);
        cfg.tcp_notsent_lowat = 4096;
        assert_eq!(t.effective_lowat(&cfg), 4096, "sysctl applies at once");
        t.notsent_lowat = 100;
        assert_eq!(t.effective_lowat(&cfg), 100);
        t.notsent_lowat = 0;
        assert_eq!(t.effective_lowat(&cfg), 4096);
    }

    #[test]
    fn classic_free_space_rule_still_applies() {
        let cfg = Config::default();
        let mut t = tcb(&cfg);
        t.sndbuf = 3000;
        t.wmem_queued = 2002; // free 998 < queued / 2 = 1001
        assert!(!t.is_writeable(&cfg));
        t.sndbuf = 3003;
        assert!(t.is_writeable(&cfg)); // free 1001 >= 1001
    }

    /// tcp_disconnect: a reset in the states of tcp_need_reset, in CLOSING and
    /// LAST-ACK only with something unsent; ECONNRESET without a segment in
    /// SYN-SENT; nothing from TIME-WAIT or CLOSED.
    #[test]
    fn disconnect_resets_as_tcp_need_reset_says() {
        let cfg = Config::default();
        let cases = [
            (TcpState::Established, 0, true, true),
            (TcpState::CloseWait, 0, true, true),
            (TcpState::FinWait1, 0, true, true),
            (TcpState::FinWait2, 0, true, true),
            (TcpState::SynRecv, 0, true, true),
            (TcpState::LastAck, 0, false, false),
            (TcpState::LastAck, 1, true, true),
            (TcpState::Closing, 0, false, false),
            (TcpState::Closing, 1, true, true),
            (TcpState::SynSent, 0, false, true),
            (TcpState::TimeWait, 0, false, false),
        ];
        for (state, unsent, rst, err) in cases {
            let mut ts = crate::tcp::TestStack::default();
            let mut ctx = ts.ctx(&cfg, crate::time::Instant::ZERO, false);
            let mut t = Tcb::for_test(&cfg);
            (t.state, t.snd_nxt) = (state, 10);
            t.write_seq = 10 + unsent;
            t.disconnect(&mut ctx);
            assert_eq!(ctx.out.len(), rst as usize, "{state:?} {unsent}");
            assert_eq!(t.state, TcpState::Closed);
            let want = err.then_some(SocketError::ConnectionReset);
            assert_eq!(t.sk_err, want, "{state:?} {unsent}");
        }
    }

    #[test]
    fn peek_leaves_the_data() {
        let cfg = Config::default();
        let mut t = Tcb::for_test(&cfg);
        t.state = TcpState::Established;
        t.rcv_queue.push(bytes::Bytes::from_static(b"hello"), 901);
        let mut b = [0u8; 3];
        assert_eq!(t.peek(0, &mut b), Ok(3));
        assert_eq!(&b, b"hel");
        assert_eq!(t.rcv_queue.len(), 5);
        // SO_PEEK_OFF: from peek_seq = copied_seq + offset; at or past the end
        // of the data, an empty queue's answer.
        assert_eq!(t.peek(3, &mut b), Ok(2));
        assert_eq!(&b[..2], b"lo");
        assert_eq!(t.peek(5, &mut b), Err(SocketError::WouldBlock));
        assert_eq!(t.peek(100, &mut b), Err(SocketError::WouldBlock));
        t.rcv_shutdown = true;
        assert_eq!(t.peek(100, &mut b), Ok(0));
    }

    #[test]
    fn an_empty_queue_reads_error_then_eof_or_eagain_or_enotconn() {
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut ctx = st.ctx(&cfg, crate::time::Instant(1_000_000_000), true);
        let mut t = Tcb::for_test(&cfg);
        let mut b = [0u8; 4];
        assert_eq!(t.recvmsg(&mut ctx, &mut b), Err(SocketError::NotConnected));
        t.state = TcpState::Established;
        assert_eq!(t.recvmsg(&mut ctx, &mut b), Err(SocketError::WouldBlock));
        // sock_error: a peek reports the pending error and keeps it, a read takes it.
        t.sk_err = Some(SocketError::ConnectionReset);
        assert_eq!(t.peek(0, &mut b), Err(SocketError::ConnectionReset));
        assert_eq!(
            t.recvmsg(&mut ctx, &mut b),
            Err(SocketError::ConnectionReset)
        );
        assert_eq!(t.recvmsg(&mut ctx, &mut b), Err(SocketError::WouldBlock));
        t.rcv_shutdown = true;
        assert_eq!(t.peek(0, &mut b), Ok(0));
        assert_eq!(t.recvmsg(&mut ctx, &mut b), Ok(0));
    }
    /// `tcp_shutdown`: `SHUT_WR` sends the FIN of `tcp_close_state` from
    /// ESTABLISHED and CLOSE-WAIT only; in SYN-RECV (a Fast Open child, a
    /// simultaneous open) it sets `SEND_SHUTDOWN` and sends nothing: the FIN waits
    /// for the ACK that establishes the connection.
    #[test]
    fn shutdown_sends_no_fin_in_syn_recv() {
        let cfg = Config::default();
        let mut st = crate::tcp::TestStack::default();
        let mut ctx = st.ctx(&cfg, Instant::ZERO, false);
        for (state, fin, after) in [
            (TcpState::SynRecv, false, TcpState::SynRecv),
            (TcpState::Established, true, TcpState::FinWait1),
            (TcpState::CloseWait, true, TcpState::LastAck),
        ] {
            let mut t = tcb(&cfg);
            t.state = state;
            t.shutdown(&mut ctx, Shutdown::Write).unwrap();
            assert!(t.shut_wr, "{state:?}: SEND_SHUTDOWN");
            assert_eq!(t.fin_queued, fin, "{state:?}");
            assert_eq!(t.state, after);
        }
    }
}

#[cfg(test)]
mod push_tests;
