//! `tcp_sendmsg` and `tcp_push` against an established connection as a
//! packetdrill peer leaves it (tcp/api.rs's push tests).

use super::*;
use crate::time::Instant;

fn with_ctx<R>(cfg: &Config, f: impl FnOnce(&mut Ctx) -> R) -> R {
    let mut st = crate::tcp::TestStack::default();
    f(&mut st.ctx(cfg, Instant(1_000_000_000), true))
}

/// An established connection as a packetdrill peer leaves it: MSS 1000, window
/// 32896, cwnd 10, 10 ms RTT.
fn established(cfg: &Config) -> Tcb {
    let mut t = Tcb::for_test(cfg);
    t.state = TcpState::Established;
    t.snd_una = 1;
    t.snd_nxt = 1;
    t.write_seq = 1;
    t.mss_cache = 1000;
    t.snd_wnd = 32896;
    t.max_window = 32896;
    t.rtt.srtt_us = 10_000;
    // tcp_update_pacing_rate in slow start: 200% of cwnd * mss / srtt.
    t.pace.pacing_rate = 2_000_000;
    t
}

#[test]
fn notsent_lowat_counts_after_push_one_and_forced_push() {
    // tcp_sendmsg_locked: a full skb that is the send head goes out at once
    // (tcp_push_one); the unsent remainder keeps filling up to size_goal, and
    // only a new skb checks sk_stream_memory_free (notsent < lowat).
    let cfg = Config::default();
    let mut t = established(&cfg);
    t.notsent_lowat = 4000;
    let n = with_ctx(&cfg, |ctx| {
        t.sendmsg(ctx, &[0u8; 59000], &[], SendFlags::default())
    });
    assert_eq!(t.size_goal(&cfg, Instant::ZERO), 16000);
    assert_eq!(t.snd_nxt, 10001, "cwnd 10 of 1000 bytes went out");
    assert_eq!(n, Ok(26000));
}

/// tcp_xmit_size_goal bounds the GSO size with tcp_bound_to_half_wnd: half the
/// peer's largest window, all of a window of at most TCP_MSS_DEFAULT (536)
/// bytes, nothing for a window of 0; then whole segments.
#[test]
fn size_goal_takes_all_of_a_small_window() {
    let cfg = Config::default();
    let mut t = established(&cfg);
    let cases = [
        (32896, 1000, 16000),
        (1000, 500, 500),
        (537, 268, 268),
        (536, 536, 536),
        (257, 257, 257),
        (0, 1000, 65000),
    ];
    for (max_window, mss, goal) in cases {
        (t.max_window, t.mss_cache) = (max_window, mss);
        let got = t.size_goal(&cfg, Instant::ZERO);
        assert_eq!(got, goal, "max_window {max_window}");
    }
}

/// tcp_xmit_size_goal's bound is sk_gso_max_size, 65536 - (MAX_TCP_HEADER + 1) =
/// 65279 bytes (sk_dst_gso_max_size), in whole segments: 121 of 536 bytes (65536
/// would hold 122), 45 of 1448, 65 of 1000; a window bound under it wins.
#[test]
fn size_goal_is_sk_gso_max_size_in_whole_segments() {
    let cfg = Config::default();
    let mut t = established(&cfg);
    assert_eq!(crate::tcp::consts::SK_GSO_MAX_SIZE, 65279);
    for (max_window, mss, goal) in [
        (1 << 20, 536, 121 * 536),
        (1 << 20, 1448, 45 * 1448),
        (1 << 20, 1000, 65000),
        (130_558, 536, 121 * 536),
        (130_556, 536, 121 * 536),
        (130_000, 536, 121 * 536),
        (129_000, 536, 120 * 536),
    ] {
        (t.max_window, t.mss_cache) = (max_window, mss);
        let got = t.size_goal(&cfg, Instant::ZERO);
        assert_eq!(got, goal, "max_window {max_window} mss {mss}");
    }
}

/// tcp_push's auto corking (Linux 3.14, tcp_autocorking 1): with a full skb of
/// ours still in the device queue, a partial tail waits for its TX completion;
/// with the sysctl off (or no TSQ) it goes out at once, as before.
#[test]
fn autocork_holds_a_partial_tail_until_the_tx_completion() {
    for (autocork, tsq, corked) in [
        (true, true, true),
        (false, true, false),
        (true, false, false),
    ] {
        let cfg = Config {
            tcp_autocorking: autocork,
            tsq,
            ..Config::default()
        };
        let mut t = established(&cfg);
        // 100 MB/s: a 65000-byte size goal and room under TSQ for one such skb.
        t.pace.pacing_rate = 100_000_000;
        t.cw.snd_cwnd = 100;
        (t.snd_wnd, t.max_window, t.sndbuf) = (1 << 20, 1 << 20, 1 << 20);
        let mut st = crate::tcp::TestStack::default();
        let now = Instant(1_000_000_000);
        let send = |t: &mut Tcb, st: &mut crate::tcp::TestStack, n: usize| {
            t.sendmsg(
                &mut st.ctx(&cfg, now, false),
                &vec![0u8; n],
                &[],
                SendFlags::default(),
            )
        };
        // A full skb goes out at once (tcp_push_one) and stays in the device
        // queue: no TX completion yet.
        assert_eq!(t.size_goal(&cfg, Instant::ZERO), 65000);
        assert_eq!(
            (send(&mut t, &mut st, 65000), t.snd_nxt),
            (Ok(65000), 65001)
        );
        let in_device = t.wmem_alloc;
        assert!(in_device > 65000, "{in_device}");
        assert_eq!(send(&mut t, &mut st, 500), Ok(500));
        let held = u64::from(corked);
        assert_eq!(
            t.snd_nxt,
            if corked { 65001 } else { 65501 },
            "{autocork} {tsq}"
        );
        assert_eq!(st.mib.get(Mib::TcpExtTCPAutoCorking), held);
        if !corked {
            continue;
        }
        // More writes join the held skb instead of going out one by one.
        assert_eq!(send(&mut t, &mut st, 700), Ok(700));
        assert_eq!(st.mib.get(Mib::TcpExtTCPAutoCorking), 1, "counted once");
        assert_eq!(t.snd_nxt, 65001);
        // The completion sends the tail: 1200 bytes in one packet.
        let packets = st.out.len();
        let token = crate::socket::TxToken {
            truesize: in_device as u32,
            ..st.out[0].token
        };
        t.on_tx_complete(&mut st.ctx(&cfg, now, false), &token);
        assert_eq!((t.snd_nxt, st.out.len()), (66201, packets + 1));
    }
}

/// Figures of this machine's kernel (Linux 6.18, x86_64, MAX_TCP_HEADER 256),
/// read with `ss -tmi` on iperf3 through `lowtide link`: a 37-byte skb (iperf3's
/// cookie) shows `w869` (37 + SKB_TRUESIZE(MAX_TCP_HEADER) = 37 + 832), and a
/// flow whose cwnd peaked at 137 shows `tb631296` = 2 * 137 * 2304.
#[test]
fn sndbuf_and_truesize_as_this_kernel() {
    let cfg = Config::default();
    let mut t = established(&cfg);
    t.mss_cache = 1448;
    assert_eq!(
        with_ctx(&cfg, |ctx| t.sendmsg(
            ctx,
            &[0u8; 37],
            &[],
            SendFlags::default()
        )),
        Ok(37)
    );
    assert_eq!(t.wmem_queued, 869, "sk_wmem_queued of one 37-byte skb");
    // tcp_sndbuf_expand: per_mss = roundup_pow_of_two(1448 + 256 + 320) + 256.
    t.sndbuf = 0;
    t.cw.snd_cwnd = 137;
    with_ctx(&cfg, |ctx| t.sndbuf_expand(ctx));
    assert_eq!(t.sndbuf, 631_296);
    t.cw.snd_cwnd = 4;
    t.sndbuf = 0;
    with_ctx(&cfg, |ctx| t.sndbuf_expand(ctx));
    assert_eq!(t.sndbuf, 2 * 10 * 2304, "at least TCP_INIT_CWND segments");
}

/// tcp_sendmsg_locked checks for an application-limited bubble once per
/// call: a blocking call's attempt after its wait for space (SendPart::Cont)
/// does not check again; a new call does.
#[test]
fn a_blocking_call_checks_app_limited_once() {
    let cfg = Config::default();
    let mut t = established(&cfg);
    t.sndbuf = 8192;
    t.cw.snd_cwnd = 0; // keep everything in the write queue
    let part = |part| SendFlags {
        part,
        ..SendFlags::default()
    };
    let send =
        |t: &mut Tcb, f: SendFlags| with_ctx(&cfg, |ctx| t.sendmsg(ctx, &[0u8; 100_000], &[], f));
    let n = send(&mut t, part(SendPart::First)).unwrap();
    assert!(n > 0 && n < 100_000, "{n}: a partial copy, the call waits");
    assert!(t.send_call.is_some());
    // Now all of it out (as if sent) and room in cwnd: a check would mark.
    t.snd_nxt = t.write_seq;
    t.cw.snd_cwnd = 100;
    t.rate.app_limited = 0;
    let _ = send(&mut t, part(SendPart::Cont));
    assert_eq!(t.rate.app_limited, 0, "the same call: no second check");
    let _ = send(&mut t, part(SendPart::Whole));
    assert_ne!(t.rate.app_limited, 0, "a new call checks");
    assert!(t.send_call.is_none());
}

/// tcp_sendmsg_locked with MSG_EOR: the record's last skb takes no later data
/// (tcp_skb_can_collapse_to); without it, writes fill the tail up to size_goal;
/// a partial write (not all of the data taken) marks nothing.
#[test]
fn eor_closes_the_tail_skb_to_later_writes() {
    let cfg = Config::default();
    let eor = SendFlags {
        eor: true,
        ..SendFlags::default()
    };
    let mut t = established(&cfg);
    t.cw.snd_cwnd = 0; // keep everything in the write queue
    let send = |t: &mut Tcb, n: usize, f: SendFlags| {
        with_ctx(&cfg, |ctx| t.sendmsg(ctx, &vec![0u8; n], &[], f))
    };
    assert_eq!(send(&mut t, 400, SendFlags::default()), Ok(400));
    assert_eq!(send(&mut t, 400, eor), Ok(400));
    assert_eq!(send(&mut t, 400, eor), Ok(400));
    assert_eq!(send(&mut t, 400, SendFlags::default()), Ok(400));
    assert_eq!(send(&mut t, 400, SendFlags::default()), Ok(400));
    let lens: Vec<_> = t.write_queue.iter().map(|w| w.data.len()).collect();
    assert_eq!(lens, [800, 400, 800]);
    let eors: Vec<_> = t
        .write_queue
        .iter()
        .map(|w| w.flags & FLAG_EOR != 0)
        .collect();
    assert_eq!(eors, [true, true, false]);
    // A write the send buffer cannot take whole leaves the tail open.
    let mut t = established(&cfg);
    t.cw.snd_cwnd = 0;
    t.sndbuf = 4000;
    let n = send(&mut t, 100_000, eor).expect("some taken");
    assert!(n < 100_000);
    assert!(t.write_queue.iter().all(|w| w.flags & FLAG_EOR == 0));
}

/// tcp_sendmsg_locked's zerocopy branch: each page fragment is an skb fragment,
/// an skb out of fragments is pushed and a new one started; a send into the
/// unsent tail of the same range extends it; without SO_ZEROCOPY nothing is
/// tracked.
#[test]
fn zerocopy_sends_lay_out_fragments_and_share_a_tail_range() {
    let cfg = Config::default();
    let zc = SendFlags {
        zerocopy: true,
        ..SendFlags::default()
    };
    let mut t = established(&cfg);
    t.cw.snd_cwnd = 0; // keep everything in the write queue
    let send = |t: &mut Tcb, frags: &[usize]| {
        let data = vec![0u8; frags.iter().sum()];
        let frags: Vec<ZcFrag> = frags.iter().map(|&n| (n, 0)).collect();
        with_ctx(&cfg, |ctx| t.sendmsg(ctx, &data, &frags, zc))
    };
    assert_eq!(send(&mut t, &[1; 18]), Ok(18));
    assert!(
        t.write_queue.iter().all(|w| w.zc.is_none()),
        "no SO_ZEROCOPY"
    );
    let mut t = established(&cfg);
    t.cw.snd_cwnd = 0;
    t.errq.zerocopy = true;
    t.sndbuf = 1 << 30; // each pinned page counts whole
    assert_eq!(send(&mut t, &[1; 18]), Ok(18));
    let layout: Vec<_> = t
        .write_queue
        .iter()
        .map(|w| (w.data.len(), w.nr_frags, w.zc, w.flags & FLAG_PSH != 0))
        .collect();
    // tcp_push marks the tail too (no MSG_MORE).
    assert_eq!(layout, [(17, 17, Some(0), true), (1, 1, Some(0), true)]);
    // The next send continues range 0 in the unsent tail skb.
    assert_eq!(send(&mut t, &[100, 200]), Ok(300));
    let tail = t.write_queue.back().unwrap();
    assert_eq!((tail.data.len(), tail.nr_frags, tail.zc), (301, 3, Some(0)));
    assert_eq!(
        t.errq.realloc(1, None, (0, u32::MAX)),
        Some(2),
        "ids 0 and 1 used"
    );
}

/// A send of a Bytes (Stack::send_zerocopy): its skbs hold slices of it up to
/// the size goal; copied data after it starts an skb of its own, and so does
/// zerocopy data after copied data or after another buffer, even when its
/// send shares the tail's notification range (msg_zerocopy_realloc), as
/// skb_zerocopy_iter_stream's -EEXIST does.
#[test]
fn zerocopy_bytes_take_skbs_of_their_own() {
    let cfg = Config::default();
    let mut t = established(&cfg);
    t.cw.snd_cwnd = 0; // keep everything in the write queue
    t.sndbuf = 1 << 30;
    t.errq.zerocopy = true;
    assert_eq!(t.size_goal(&cfg, Instant::ZERO), 16000);
    let buf = bytes::Bytes::from(vec![7u8; 10 * ZC_PAGE]);
    let zc = |t: &mut Tcb, b: bytes::Bytes| {
        with_ctx(&cfg, |ctx| {
            ctx.tx_apart = true; // the device takes payload apart: NETIF_F_SG
            t.send_zerocopy(ctx, &b, SendFlags::default())
        })
    };
    let copy = |t: &mut Tcb, n: usize| {
        with_ctx(&cfg, |ctx| {
            t.sendmsg(ctx, &vec![1u8; n], &[], SendFlags::default())
        })
    };
    assert_eq!(zc(&mut t, buf.slice(..20_000)), Ok(20_000));
    assert_eq!(copy(&mut t, 300), Ok(300));
    assert_eq!(zc(&mut t, buf.slice(30_000..31_000)), Ok(1000));
    // The next slice of that buffer is another Bytes: a new skb, though its
    // send extends the tail's range (ids 1 and 2 complete together).
    assert_eq!(zc(&mut t, buf.slice(31_000..31_100)), Ok(100));
    let layout: Vec<_> = t
        .write_queue
        .iter()
        .map(|w| (w.data.len(), w.data.zerocopy_id(), w.nr_frags))
        .collect();
    assert_eq!(
        layout,
        [
            (16000, Some(0), 4), // pages 0-3
            (4000, Some(0), 2),  // the rest of page 3, page 4
            (300, None, 0),
            (1000, Some(1), 1),
            (100, Some(1), 1),
        ]
    );
    let at = |i: usize| match &t.write_queue[i].data {
        WriteData::Zerocopy(b, _) => b.as_ptr(),
        _ => panic!("zerocopy"),
    };
    assert_eq!(at(0), buf.as_ptr(), "the caller's bytes");
    assert_eq!(at(1), buf[16000..].as_ptr());
    assert_eq!(at(4), buf[31_000..].as_ptr());
    assert_eq!(t.errq.zckey, 3);
    assert!(t.errq.pending.iter().all(|u| u.zerocopy), "nothing copied");
}

/// skb_zcopy_pure: zerocopy data into an empty skb counts its pages whole in
/// sk_wmem_queued (PAGE_ALIGN) but charges nothing to the reserve, and the
/// parts of it sent and freed keep that; copied data after it downgrades the
/// skb (tcp_downgrade_zcopy_pure), and zerocopy data after copied data is
/// charged (no pure skb).
#[test]
fn pure_zerocopy_skbs_count_pages_but_charge_no_reserve() {
    let cfg = Config::default();
    let zc = ZC;
    let buf = vec![0u8; 3 * ZC_PAGE];
    let at = (ZC_PAGE - buf.as_ptr() as usize % ZC_PAGE) % ZC_PAGE;
    let page = &buf[at..at + ZC_PAGE]; // a page-aligned buffer
    let send = |t: &mut Tcb, d: &[u8], f: SendFlags| {
        let frags = [(d.len(), d.as_ptr() as usize % ZC_PAGE)];
        with_ctx(&cfg, |ctx| {
            t.sendmsg(ctx, d, &frags[..f.zerocopy as usize], f)
        })
    };
    let head = SKB_OVERHEAD as u64;
    let mut t = established(&cfg);
    t.errq.zerocopy = true;
    t.cw.snd_cwnd = 1; // one segment goes, the rest stays
    assert_eq!(send(&mut t, &page[..2000], zc), Ok(2000));
    // The skb was split as it went: the part sent keeps the page's rest.
    let sent = t.rtx.first().map(|s| (s.len(), s.truesize, s.uncharged));
    assert_eq!(sent, Some((1000, 1000 + SKB_OVERHEAD + 2096, 3096)));
    assert_eq!((t.rtx.uncharged, t.wq_uncharged), (3096, 1000));
    assert_eq!(t.wmem_queued, 2 * head + 4096);
    assert_eq!(t.mem_charged(), 2 * head, "the page is not charged");
    with_ctx(&cfg, |ctx| t.clean_rtx_queue(ctx, 1001));
    assert_eq!((t.rtx.uncharged, t.wmem_queued), (0, head + 1000));
    // Copied data joins the pure skb, which is charged from then on.
    t.cw.snd_cwnd = 0;
    assert_eq!(send(&mut t, &[1; 50], SendFlags::default()), Ok(50));
    let tail = t.write_queue.back().unwrap();
    assert_eq!(
        (tail.data.len(), tail.pure, t.wq_uncharged),
        (1050, false, 0)
    );
    assert_eq!(t.mem_charged(), t.wmem_queued);
    // Zerocopy data after copied data: charged.
    let mut t = established(&cfg);
    t.errq.zerocopy = true;
    t.cw.snd_cwnd = 0;
    assert_eq!(send(&mut t, &[1; 50], SendFlags::default()), Ok(50));
    assert_eq!(send(&mut t, &page[..100], zc), Ok(100));
    let tail = t.write_queue.back().unwrap();
    assert_eq!((tail.data.len(), tail.pure, tail.slack), (150, false, 3996));
    assert_eq!(t.wmem_queued, head + 50 + 4096);
    assert_eq!(t.mem_charged(), t.wmem_queued);
}

/// zerocopy_fill_skb_from_iter's `PAGE_ALIGN(copied + start)`: `start` is where
/// the user's buffer lies in its page, not where a copy of it does. 4000 bytes
/// from offset 1728 in a page, given as the two page pieces a caller cuts them
/// into (2368 and 1632 bytes), pin two pages (8192), as one piece would; the
/// same pieces read from offset 2208 (a joined copy's) would count three.
#[test]
fn zerocopy_pages_follow_the_users_buffer_not_a_copy() {
    let cfg = Config::default();
    for (frags, pages) in [
        (&[(2368, 1728), (1632, 0)][..], 2),
        (&[(4000, 1728)][..], 2),
        (&[(4000, 0)][..], 1),
        (&[(2368, 2208), (1632, 480)][..], 3),
    ] {
        let mut t = zc_sender(&cfg);
        let data = vec![0u8; 4000];
        let r = with_ctx(&cfg, |ctx| t.sendmsg(ctx, &data, frags, ZC));
        assert_eq!(r, Ok(4000));
        let head = t.write_queue.len() as u64 * SKB_OVERHEAD as u64;
        assert_eq!(t.wmem_queued - head, pages * ZC_PAGE as u64, "{frags:?}");
    }
}

/// tcp_sendmsg_locked's copy path after zerocopy data: the copy cannot
/// coalesce into the user's page (skb_can_coalesce), so it takes a fragment
/// of its own, and a later copy merges into that one; an skb out of
/// fragments (max_skb_frags) is marked PSH and a new one started.
#[test]
fn copied_data_after_zerocopy_data_takes_a_fragment() {
    let cfg = Config::default();
    let zc = ZC;
    let mut t = zc_sender(&cfg);
    let send = |t: &mut Tcb, frags: &[usize], f: SendFlags| {
        let data = vec![0u8; frags.iter().sum()];
        let frags: Vec<ZcFrag> = frags.iter().map(|&n| (n, 0)).collect();
        with_ctx(&cfg, |ctx| t.sendmsg(ctx, &data, &frags, f))
    };
    let plain = SendFlags::default();
    assert_eq!(send(&mut t, &[1; 16], zc), Ok(16));
    assert_eq!(send(&mut t, &[10], plain), Ok(10));
    assert_eq!(send(&mut t, &[10], plain), Ok(10));
    let frags = |t: &Tcb| -> Vec<_> {
        let w = t.write_queue.iter();
        w.map(|w| (w.data.len(), w.nr_frags, w.flags & FLAG_PSH != 0))
            .collect()
    };
    assert_eq!(frags(&t), [(36, 17, true)], "one fragment for both copies");
    assert_eq!(send(&mut t, &[1], zc), Ok(1));
    assert_eq!(frags(&t), [(36, 17, true), (1, 1, true)], "-EMSGSIZE");
    let mut t = zc_sender(&cfg);
    assert_eq!(send(&mut t, &[1; 17], zc), Ok(17));
    assert_eq!(send(&mut t, &[10], plain), Ok(10));
    assert_eq!(
        frags(&t),
        [(17, 17, true), (10, 0, true)],
        "no fragment left"
    );
}

/// MSG_ZEROCOPY.
const ZC: SendFlags = SendFlags {
    zerocopy: true,
    more: false,
    eor: false,
    oob: false,
    part: SendPart::Whole,
};

/// An established SO_ZEROCOPY sender keeping everything in the write queue,
/// its send buffer large (each pinned page counts whole).
fn zc_sender(cfg: &Config) -> Tcb {
    let mut t = established(cfg);
    t.errq.zerocopy = true;
    t.cw.snd_cwnd = 0;
    t.sndbuf = 1 << 30;
    t
}
