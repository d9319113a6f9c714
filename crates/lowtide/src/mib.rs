//! Stack-wide counters under Linux's nstat names (`/proc/net/snmp`, `netstat`).

use serde::ser::{Serialize, SerializeMap, Serializer};

macro_rules! mib {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// One counter, named exactly as `nstat` names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[allow(clippy::upper_case_acronyms)]
        pub enum Mib { $($(#[$doc])* $name,)* }

        impl Mib {
            /// Every counter, in display order.
            pub const ALL: &'static [Mib] = &[$(Mib::$name,)*];
            /// The nstat name.
            pub fn name(self) -> &'static str {
                match self { $(Mib::$name => stringify!($name),)* }
            }
            /// Looks a counter up by its nstat name.
            pub fn from_name(name: &str) -> Option<Mib> {
                Self::ALL.iter().copied().find(|m| m.name() == name)
            }
        }
    };
}

mib! {
    /// IP packets received (a GRO super-packet counts once).
    IpInReceives,
    /// IP packets dropped for a header error (bad checksum, bad length, bad version;
    /// `ip_rcv_core`).
    IpInHdrErrors,
    /// IP packets addressed to an address this stack does not own.
    IpInAddrErrors,
    /// IP packets with a protocol this stack does not handle.
    IpInUnknownProtos,
    /// IP packets delivered to TCP, UDP or ICMP.
    IpInDelivers,
    /// IPv4 fragment queues that timed out (`ip_expire`).
    IpReasmTimeout,
    /// IPv4 fragments received for reassembly (`ip_defrag`).
    IpReasmReqds,
    /// IPv4 datagrams reassembled (`ip_frag_reasm`).
    IpReasmOKs,
    /// IPv4 reassembly failures: a datagram dropped (overlap, bad length, ECN,
    /// timeout), a fragment refused for memory, a queue started over
    /// (`ip_frag_too_far`).
    IpReasmFails,
    /// IPv4 datagrams dropped for overlapping fragments (`ip_frag_queue`).
    IpExtReasmOverlaps,
    /// IPv4 datagrams of this host fragmented (`ip_do_fragment`).
    IpFragOKs,
    /// IPv4 datagrams that needed fragmenting and could not be (DF that may not be
    /// cleared: `ip_fragment`).
    IpFragFails,
    /// IPv4 fragments made (`ip_do_fragment`).
    IpFragCreates,
    /// IP packets handed to the device (a GSO packet counts once).
    IpOutRequests,
    /// IP packets transmitted (`ip_finish_output2`, `ip6_finish_output2`: after any
    /// fragmentation, a GSO packet once).
    IpOutTransmits,
    /// IP packets shorter than their header's total length (`ip_rcv_core`; not in
    /// [`Mib::IpInHdrErrors`]).
    IpExtInTruncatedPkts,
    /// IP bytes received.
    IpExtInOctets,
    /// IP bytes sent.
    IpExtOutOctets,
    /// IPv4 packets whose header checksum fails (`ip_rcv_core`, also counted in
    /// [`Mib::IpInHdrErrors`]).
    IpExtInCsumErrors,
    /// IP packets received without ECN (Not-ECT), a GRO packet counting its
    /// segments (`ip_rcv_core`, `ip6_rcv_core`).
    IpExtInNoECTPkts,
    /// IP packets received marked ECT(1), counted as [`Mib::IpExtInNoECTPkts`].
    IpExtInECT1Pkts,
    /// IP packets received marked ECT(0), counted as [`Mib::IpExtInNoECTPkts`].
    IpExtInECT0Pkts,
    /// IP packets received marked CE, counted as [`Mib::IpExtInNoECTPkts`].
    IpExtInCEPkts,
    /// ICMP messages received.
    IcmpInMsgs,
    /// ICMP messages dropped as malformed (short, bad checksum).
    IcmpInErrors,
    /// ICMP destination-unreachable messages received.
    IcmpInDestUnreachs,
    /// ICMP time-exceeded messages received.
    IcmpInTimeExcds,
    /// ICMP parameter-problem messages received.
    IcmpInParmProbs,
    /// IPv6 packets received (`/proc/net/snmp6`; IPv4 ones count in `IpInReceives`).
    Ip6InReceives,
    /// IPv6 packets dropped for a header error (`ip6_rcv_core`: shorter than the
    /// fixed header, or a loopback or multicast address where RFC 4291 forbids it).
    Ip6InHdrErrors,
    /// IPv6 packets addressed to an address this stack does not own.
    Ip6InAddrErrors,
    /// IPv6 packets with a next header this stack does not handle.
    Ip6InUnknownProtos,
    /// IPv6 packets shorter than their payload length says (`ip6_rcv_core`).
    Ip6InTruncatedPkts,
    /// IPv6 packets delivered to TCP, UDP or ICMPv6.
    Ip6InDelivers,
    /// IPv6 fragment queues that timed out (`ip6_frag_expire`).
    Ip6ReasmTimeout,
    /// IPv6 fragments received for reassembly (`ipv6_frag_rcv`).
    Ip6ReasmReqds,
    /// IPv6 datagrams reassembled, an atomic fragment counting as one
    /// (`ipv6_frag_rcv`, `ip6_frag_reasm`).
    Ip6ReasmOKs,
    /// IPv6 reassembly failures (as [`Mib::IpReasmFails`]).
    Ip6ReasmFails,
    /// IPv6 datagrams of this host fragmented (`ip6_fragment`).
    Ip6FragOKs,
    /// IPv6 datagrams over the MTU that could not be fragmented (`ip6_fragment`).
    Ip6FragFails,
    /// IPv6 fragments made (`ip6_fragment`).
    Ip6FragCreates,
    /// IPv6 packets handed to the device (a GSO packet counts once).
    Ip6OutRequests,
    /// IPv6 bytes received.
    Ip6InOctets,
    /// IPv6 bytes sent.
    Ip6OutOctets,
    /// IPv6 packets received without ECN, a GRO packet counting its segments.
    Ip6InNoECTPkts,
    /// IPv6 packets received marked ECT(1), counted as [`Mib::Ip6InNoECTPkts`].
    Ip6InECT1Pkts,
    /// IPv6 packets received marked ECT(0), counted as [`Mib::Ip6InNoECTPkts`].
    Ip6InECT0Pkts,
    /// IPv6 packets received marked CE, counted as [`Mib::Ip6InNoECTPkts`].
    Ip6InCEPkts,
    /// IPv6 packets transmitted (`ip6_finish_output2`, a GSO packet once).
    Ip6OutTransmits,
    /// ICMPv6 messages received.
    Icmp6InMsgs,
    /// ICMPv6 messages dropped as malformed (short, bad checksum).
    Icmp6InErrors,
    /// ICMPv6 destination-unreachable messages received.
    Icmp6InDestUnreachs,
    /// ICMPv6 "packet too big" messages received (path MTU discovery).
    Icmp6InPktTooBigs,
    /// ICMPv6 time-exceeded messages received.
    Icmp6InTimeExcds,
    /// ICMPv6 parameter-problem messages received.
    Icmp6InParmProblems,
    /// ICMP echo requests received.
    IcmpInEchos,
    /// ICMP messages sent.
    IcmpOutMsgs,
    /// ICMP echo replies sent.
    IcmpOutEchoReps,
    /// ICMP destination unreachables sent (port unreachable for UDP).
    IcmpOutDestUnreachs,
    /// ICMP time exceeded sent (a fragment queue's timeout, `ip_expire`).
    IcmpOutTimeExcds,
    /// ICMP errors not sent for the global limit (`net.ipv4.icmp_msgs_per_sec`).
    IcmpRateLimitGlobal,
    /// ICMP errors not sent for the per-destination limit (`net.ipv4.icmp_ratelimit`).
    IcmpRateLimitHost,
    /// ICMPv6 echo requests received.
    Icmp6InEchos,
    /// ICMPv6 messages sent.
    Icmp6OutMsgs,
    /// ICMPv6 echo replies sent.
    Icmp6OutEchoReplies,
    /// ICMPv6 destination unreachables sent (port unreachable for UDP).
    Icmp6OutDestUnreachs,
    /// ICMPv6 parameter problems sent (an unknown next header:
    /// `ip6_protocol_deliver_rcu`).
    Icmp6OutParmProblems,
    /// ICMPv6 time exceeded sent (a fragment queue's timeout, `ip6_frag_expire`).
    Icmp6OutTimeExcds,
    /// ICMPv6 errors not sent for the global limit.
    Icmp6RateLimitGlobal,
    /// ICMPv6 errors not sent for the per-destination limit
    /// (`net.ipv6.icmp.ratelimit`).
    Icmp6RateLimitHost,
    /// UDP datagrams delivered to a socket.
    UdpInDatagrams,
    /// UDP datagrams to a port no socket has (answered with a port unreachable).
    UdpNoPorts,
    /// UDP datagrams dropped: malformed, bad checksum, or no room in the socket.
    UdpInErrors,
    /// UDP datagrams sent.
    UdpOutDatagrams,
    /// UDP datagrams dropped for a full receive buffer (`sk_rcvbuf`).
    UdpRcvbufErrors,
    /// UDP datagrams with a bad checksum.
    UdpInCsumErrors,
    /// UDP over IPv6: datagrams delivered to a socket.
    Udp6InDatagrams,
    /// UDP over IPv6: datagrams to a port no socket has.
    Udp6NoPorts,
    /// UDP over IPv6: datagrams dropped.
    Udp6InErrors,
    /// UDP over IPv6: datagrams sent.
    Udp6OutDatagrams,
    /// UDP over IPv6: datagrams dropped for a full receive buffer.
    Udp6RcvbufErrors,
    /// UDP over IPv6: datagrams with a bad checksum.
    Udp6InCsumErrors,
    /// Active opens (SYN sent).
    TcpActiveOpens,
    /// Passive opens (SYN received on a listener).
    TcpPassiveOpens,
    /// Failed connection attempts.
    TcpAttemptFails,
    /// Resets received in ESTABLISHED or CLOSE-WAIT.
    TcpEstabResets,
    /// Segments received (MSS-sized; a GRO packet counts its segments).
    TcpInSegs,
    /// Segments sent (MSS-sized; a GSO packet counts its segments), retransmissions
    /// included, as Linux counts `TCP_MIB_OUTSEGS` in `__tcp_transmit_skb`.
    TcpOutSegs,
    /// Segments retransmitted.
    TcpRetransSegs,
    /// Segments received with a TCP error (bad checksum, bad header).
    TcpInErrs,
    /// ICMP errors about a sequence number outside `snd_una..=snd_nxt` (`tcp_v4_err`),
    /// ignored.
    TcpExtOutOfWindowIcmps,
    /// Segments with a bad checksum.
    TcpInCsumErrors,
    /// Resets sent.
    TcpOutRsts,
    /// Retransmission timeouts (`tcp_retransmit_timer`, counted before
    /// `tcp_write_timeout`, so a timeout that kills the connection counts too) and
    /// SYN-ACK timeouts of requests (`tcp_syn_ack_timeout`).
    TcpExtTCPTimeouts,
    /// RTOs that did not abort and picked a new transmit hash (`tcp_write_timeout`'s
    /// `sk_rethink_txhash`, `net.core.txrehash`; `LINUX_MIB_TCPTIMEOUTREHASH`).
    TcpExtTcpTimeoutRehash,
    /// Data received again under a new IPv6 flow label (the sender's RTO) that
    /// picked a new transmit hash for our ACKs (`tcp_rcv_spurious_retrans`'s
    /// `sk_rethink_txhash`; `LINUX_MIB_TCPDUPLICATEDATAREHASH`).
    TcpExtTcpDuplicateDataRehash,
    /// First RTOs of an episode with SACK, in Disorder or with SACKed data
    /// (`tcp_retransmit_timer`, `LINUX_MIB_TCPSACKFAILURES`).
    TcpExtTCPSackFailures,
    /// First RTOs of an episode without SACK, in Disorder
    /// (`LINUX_MIB_TCPRENOFAILURES`).
    TcpExtTCPRenoFailures,
    /// First RTOs of an episode in Loss (`LINUX_MIB_TCPLOSSFAILURES`).
    TcpExtTCPLossFailures,
    /// First RTOs of an episode in Recovery, with SACK
    /// (`LINUX_MIB_TCPSACKRECOVERYFAIL`).
    TcpExtTCPSackRecoveryFail,
    /// First RTOs of an episode in Recovery, without SACK
    /// (`LINUX_MIB_TCPRENORECOVERYFAIL`).
    TcpExtTCPRenoRecoveryFail,
    /// Segments of new data sent, retransmissions excluded (`tcp_event_new_data_sent`,
    /// a Fast Open SYN's data skb in `tcp_send_syn_data`; `LINUX_MIB_TCPORIGDATASENT`).
    TcpExtTCPOrigDataSent,
    /// Fast retransmits.
    TcpExtTCPFastRetrans,
    /// Retransmits in slow start after an RTO.
    TcpExtTCPSlowStartRetrans,
    /// Retransmits for other reasons.
    TcpExtTCPLostRetransmit,
    /// Segments of retransmissions that were not sent: the host's own device queue
    /// refused them (`__tcp_retransmit_skb` failing in `tcp_transmit_skb`).
    TcpExtTCPRetransFail,
    /// Loss recovery episodes entered on SACK.
    TcpExtTCPSackRecovery,
    /// Loss recovery episodes entered without SACK (NewReno).
    TcpExtTCPRenoRecovery,
    /// SACKed bytes moved onto an already SACKed skb (`tcp_shift_skb_data`).
    TcpExtTCPSackShifted,
    /// SACKed skbs merged away.
    TcpExtTCPSackMerged,
    /// Skbs a SACK walk visited that `tcp_shift_skb_data` could not shift onto the
    /// skb before them (its `fallback:`), tagged by `tcp_match_skb_to_sack` instead.
    TcpExtTCPSackShiftFallback,
    /// SACK blocks ignored as invalid.
    TcpExtTCPSACKDiscard,
    /// D-SACK blocks ignored as invalid (below `snd_una`, older than `undo_marker`).
    TcpExtTCPDSACKIgnoredOld,
    /// D-SACK blocks below `snd_una` ignored because no recovery could be undone.
    TcpExtTCPDSACKIgnoredNoUndo,
    /// D-SACKs ignored as dubious: longer than the largest window, or reporting more
    /// duplicates than were ever retransmitted (`tcp_dsack_seen`).
    TcpExtTCPDSACKIgnoredDubious,
    /// The peer reneged on SACKed data.
    TcpExtTCPSACKReneging,
    /// D-SACK blocks received.
    TcpExtTCPDSACKRecv,
    /// D-SACK blocks received for out-of-order duplicates (inside the second block).
    TcpExtTCPDSACKOfoRecv,
    /// Segments the accepted D-SACKs reported duplicated.
    TcpExtTCPDSACKRecvSegs,
    /// D-SACK blocks sent for old (below rcv_nxt) duplicates.
    TcpExtTCPDSACKOldSent,
    /// D-SACK blocks sent for out-of-order duplicates.
    TcpExtTCPDSACKOfoSent,
    /// Tail loss probes sent.
    TcpExtTCPLossProbes,
    /// Spurious RTOs detected (F-RTO).
    TcpExtTCPSpuriousRTOs,
    /// Retransmissions (RTO, recovery, loss probe) not made because the skb's last
    /// transmission was still in the host's qdisc or driver
    /// (`skb_still_in_host_queue`).
    TcpExtTCPSpuriousRtxHostQueues,
    /// Losses repaired by a tail loss probe's retransmission (`TCPLossProbeRecovery`).
    TcpExtTCPLossProbeRecovery,
    /// Recoveries undone because D-SACKs showed every retransmission was spurious.
    TcpExtTCPDSACKUndo,
    /// Recoveries undone when they ended (`tcp_try_undo_recovery`).
    TcpExtTCPFullUndo,
    /// Recoveries undone part way: a hole filled by a delayed original.
    TcpExtTCPPartialUndo,
    /// Loss (RTO) states undone (`tcp_try_undo_loss`).
    TcpExtTCPLossUndo,
    /// Reordering detected from SACKs (`TCPSACKReorder`).
    TcpExtTCPSACKReorder,
    /// Reordering detected without SACK: more duplicate ACKs than segments out
    /// (`tcp_check_reno_reordering`, `TCPRenoReorder`).
    TcpExtTCPRenoReorder,
    /// Reordering detected from timestamps: a partial ACK in Recovery filled by a
    /// delayed original (`TCPTSReorder`).
    TcpExtTCPTSReorder,
    /// Delayed ACKs sent.
    TcpExtDelayedACKs,
    /// Duplicate data received, answered with an immediate ACK
    /// (`LINUX_MIB_DELAYEDACKLOST`: our ACK was probably lost).
    TcpExtDelayedACKLost,
    /// Data segments taken by header prediction, `tcp_rcv_established`'s fast path
    /// (`TCPHPHits`; tcp/fastpath.rs).
    TcpExtTCPHPHits,
    /// Acceptable ACKs without data that took `tcp_ack`'s slow path
    /// (`TCPPureAcks`).
    TcpExtTCPPureAcks,
    /// ACKs that advanced `snd_una` on the fast path (`TCPHPAcks`).
    TcpExtTCPHPAcks,
    /// Segments queued out of order.
    TcpExtTCPOFOQueue,
    /// Received segments joined to the skb before them, in the receive queue or the
    /// out-of-order queue (`tcp_try_coalesce`, `LINUX_MIB_TCPRCVCOALESCE`).
    TcpExtTCPRcvCoalesce,
    /// Out-of-order segments dropped: no receive memory even after pruning
    /// (`tcp_data_queue_ofo`).
    TcpExtTCPOFODrop,
    /// Out-of-order segments dropped for holding nothing new, or covered by a later
    /// one (`LINUX_MIB_TCPOFOMERGE`).
    TcpExtTCPOFOMerge,
    /// Receive queues pruned for memory (`tcp_prune_queue`, `LINUX_MIB_PRUNECALLED`).
    TcpExtPruneCalled,
    /// Segments dropped because pruning found no room (`LINUX_MIB_RCVPRUNED`).
    TcpExtRcvPruned,
    /// Out-of-order queues pruned from the top (`tcp_prune_ofo_queue`,
    /// `LINUX_MIB_OFOPRUNED`).
    TcpExtOfoPruned,
    /// Received segments copied into fuller buffers to cut their overhead
    /// (`tcp_collapse`, `LINUX_MIB_TCPRCVCOLLAPSED`).
    TcpExtTCPRcvCollapsed,
    /// ACKs not sent while out-of-order data was held (SACK compression,
    /// `LINUX_MIB_TCPACKCOMPRESSED`).
    TcpExtTCPAckCompressed,
    /// Segments dropped for lack of receive space.
    TcpExtTCPRcvQDrop,
    /// In-sequence data dropped because our window was closed
    /// (`LINUX_MIB_TCPZEROWINDOWDROP`, `tcp_data_queue`).
    TcpExtTCPZeroWindowDrop,
    /// Segments dropped by the PAWS check
    /// ([RFC 7323 section 5](https://www.rfc-editor.org/rfc/rfc7323#section-5)).
    TcpExtPAWSEstab,
    /// Old pure ACKs dropped by the PAWS check, without a duplicate ACK
    /// (`LINUX_MIB_PAWS_OLD_ACK`, Linux 6.14+).
    TcpExtPAWSOldAck,
    /// Final handshake ACKs dropped because their TSecr echoes none of the request's
    /// SYN-ACKs (`LINUX_MIB_TSECRREJECTED`, `tcp_check_req`, Linux 6.15+).
    TcpExtTSEcrRejected,
    /// Segments starting or (with data queued) ending beyond the receive window
    /// (`LINUX_MIB_BEYOND_WINDOW`, `tcp_sequence`, Linux 6.17+).
    TcpExtBeyondWindow,
    /// SYN-ACKs refused with a reset because their TSecr echoes no time since our
    /// first SYN (`LINUX_MIB_PAWSACTIVEREJECTED`).
    TcpExtPAWSActive,
    /// Segments without a TCP-MD5 option from a peer the socket has a key for,
    /// dropped (`tcp_inbound_hash`, `LINUX_MIB_TCPMD5NOTFOUND`).
    TcpExtTCPMD5NotFound,
    /// Segments carrying a TCP-MD5 option for a socket with no key, dropped
    /// (`tcp_inbound_md5_hash`, `LINUX_MIB_TCPMD5UNEXPECTED`).
    TcpExtTCPMD5Unexpected,
    /// Segments dropped for a TTL / hop limit below the socket's `IP_MINTTL` /
    /// `IPV6_MINHOPCOUNT` (`LINUX_MIB_TCPMINTTLDROP`).
    TcpExtTCPMinTTLDrop,
    /// Segments whose TCP-MD5 digest is wrong, dropped (`tcp_inbound_md5_hash`,
    /// `LINUX_MIB_TCPMD5FAILURE`).
    TcpExtTCPMD5Failure,
    /// Challenge ACKs sent (RFC 5961).
    TcpExtTCPChallengeACK,
    /// SYNs received in window
    /// ([RFC 5961 section 4](https://www.rfc-editor.org/rfc/rfc5961#section-4)).
    TcpExtTCPSYNChallenge,
    /// Duplicate ACKs for out-of-window segments not sent (rate limited).
    TcpExtTCPACKSkippedSeq,
    /// Duplicate ACKs for PAWS-rejected segments not sent (rate limited).
    TcpExtTCPACKSkippedPAWS,
    /// Challenge ACKs not sent (rate limited per socket).
    TcpExtTCPACKSkippedChallenge,
    /// SYN-ACKs not resent for a retransmitted SYN: the per-socket rate limit held
    /// them back (`tcp_check_req`).
    TcpExtTCPACKSkippedSynRecv,
    /// SYNs and SYN-ACKs retransmitted.
    TcpExtTCPSynRetrans,
    /// MTU probes lost (`tcp_mtup_probe_failed`, RFC 4821).
    TcpExtTCPMTUPFail,
    /// MTU probes acknowledged (`tcp_mtup_probe_success`).
    TcpExtTCPMTUPSuccess,
    /// Zero-window probes sent.
    TcpExtTCPWinProbe,
    /// Keepalive probes sent (`LINUX_MIB_TCPKEEPALIVE`).
    TcpExtTCPKeepAlive,
    /// Times the receive window was advertised as zero.
    TcpExtTCPToZeroWindowAdv,
    /// Times the receive window reopened from zero.
    TcpExtTCPFromZeroWindowAdv,
    /// Times `__tcp_select_window` wanted a zero window that the right edge
    /// already offered kept from it (`tcp_select_window`).
    TcpExtTCPWantZeroWindowAdv,
    /// Connections reset on data after close.
    TcpExtTCPAbortOnData,
    /// Connections aborted by close with unread data.
    TcpExtTCPAbortOnClose,
    /// `close(2)` in FIN-WAIT-2 with `TCP_LINGER2` negative: reset at once
    /// (`LINUX_MIB_TCPABORTONLINGER`).
    TcpExtTCPAbortOnLinger,
    /// Connections aborted after too many retransmissions.
    TcpExtTCPAbortOnTimeout,
    /// Orphans reset for too many orphaned sockets (`tcp_check_oom`,
    /// `LINUX_MIB_TCPABORTONMEMORY`).
    TcpExtTCPAbortOnMemory,
    /// Times the stack entered TCP memory pressure, over `tcp_mem[1]`
    /// (`tcp_enter_memory_pressure`, `LINUX_MIB_TCPMEMORYPRESSURES`).
    TcpExtTCPMemoryPressures,
    /// Milliseconds spent under TCP memory pressure (`tcp_leave_memory_pressure`,
    /// `LINUX_MIB_TCPMEMORYPRESSURESCHRONO`).
    TcpExtTCPMemoryPressuresChrono,
    /// Connections closed without a TIME-WAIT socket because `tcp_max_tw_buckets`
    /// were taken (`LINUX_MIB_TCPTIMEWAITOVERFLOW`).
    TcpExtTCPTimeWaitOverflow,
    /// Listen queue overflows: a SYN, or a handshake's final ACK, that found the
    /// accept queue full (`LINUX_MIB_LISTENOVERFLOWS`).
    TcpExtListenOverflows,
    /// SYNs and final ACKs dropped at a listener for any reason (`tcp_listendrop`).
    TcpExtListenDrops,
    /// Requests in SYN-RECV ended by a reset, a SYN, or a reset sent on accept-queue
    /// overflow with `tcp_abort_on_overflow` (`tcp_check_req`'s `embryonic_reset`,
    /// `LINUX_MIB_EMBRYONICRSTS`).
    TcpExtEmbryonicRsts,
    /// Bare final ACKs a request dropped while `TCP_DEFER_ACCEPT` waits for data
    /// (`LINUX_MIB_TCPDEFERACCEPTDROP`).
    TcpExtTCPDeferAcceptDrop,
    /// SYN cookies sent (SYN-ACKs without state).
    TcpExtSyncookiesSent,
    /// Valid SYN cookies received (connections rebuilt from an ACK).
    TcpExtSyncookiesRecv,
    /// ACKs to a listener whose cookie did not check.
    TcpExtSyncookiesFailed,
    /// A full SYN queue answered with cookies.
    TcpExtTCPReqQFullDoCookies,
    /// A full SYN queue without cookies: the SYN dropped.
    TcpExtTCPReqQFullDrop,
    /// TIME-WAIT sockets scheduled for more than 4 s (`__inet_twsk_schedule`,
    /// `LINUX_MIB_TIMEWAITED`).
    TcpExtTW,
    /// TIME-WAIT sockets a `connect` took over (`tcp_tw_reuse`,
    /// `LINUX_MIB_TIMEWAITRECYCLED`).
    TcpExtTWRecycled,
    /// TIME-WAIT sockets (orphaned FIN-WAIT-2 ones) scheduled for 4 s or less
    /// (`LINUX_MIB_TIMEWAITKILLED`).
    TcpExtTWKilled,
    /// Segments to a TIME-WAIT socket rejected by PAWS (`LINUX_MIB_PAWS_TW_REJECTED`).
    TcpExtPAWSTimewait,
    /// ACKs a FIN-WAIT-2 timewait socket did not send (rate limited,
    /// `LINUX_MIB_TCPACKSKIPPEDFINWAIT2`).
    TcpExtTCPACKSkippedFinWait2,
    /// ACKs a TIME-WAIT socket did not send (rate limited,
    /// `LINUX_MIB_TCPACKSKIPPEDTIMEWAIT`).
    TcpExtTCPACKSkippedTimeWait,
    /// Fast Open: our SYN's data was acknowledged (active).
    TcpExtTCPFastOpenActive,
    /// Fast Open: our SYN's data was not acknowledged, or a blackhole was suspected.
    TcpExtTCPFastOpenActiveFail,
    /// Fast Open: a child was created from a SYN (passive).
    TcpExtTCPFastOpenPassive,
    /// Fast Open: a SYN's cookie did not check (passive).
    TcpExtTCPFastOpenPassiveFail,
    /// Fast Open: a listener's Fast Open queue was full.
    TcpExtTCPFastOpenListenOverflow,
    /// Fast Open: a SYN asked for a cookie.
    TcpExtTCPFastOpenCookieReqd,
    /// Fast Open: active Fast Open paused for a suspected blackhole.
    TcpExtTCPFastOpenBlackhole,
    /// Fast Open: a SYN's cookie was made with the backup key.
    TcpExtTCPFastOpenPassiveAltKey,
    /// Segments dropped for malformed TCP options.
    TcpExtTCPBadOptions,
    /// Packets the device dropped (its queue was full), as `qdisc drops`.
    TcpExtTCPQdiscDrops,
    /// Times `tcp_push` held back a partial tail skb for a TX completion
    /// (`LINUX_MIB_TCPAUTOCORKING`; counted when it sets `TSQ_THROTTLED`).
    TcpExtTCPAutoCorking,
    /// Segments newly delivered to the peer (`LINUX_MIB_TCPDELIVERED`,
    /// `tcp_newly_delivered`).
    TcpExtTCPDelivered,
    /// Of those, delivered with an ECE ACK (`LINUX_MIB_TCPDELIVEREDCE`).
    TcpExtTCPDeliveredCE,
    /// CUBIC's HyStart left slow start on an ACK train (`hystart_update`).
    TcpExtTCPHystartTrainDetect,
    /// The cwnd summed over those exits (`LINUX_MIB_TCPHYSTARTTRAINCWND`).
    TcpExtTCPHystartTrainCwnd,
    /// CUBIC's HyStart left slow start on a delay increase (`hystart_update`).
    TcpExtTCPHystartDelayDetect,
    /// The cwnd summed over those exits (`LINUX_MIB_TCPHYSTARTDELAYCWND`).
    TcpExtTCPHystartDelayCwnd,
    /// lowtide's own (Linux has none): segments dropped by `RxChecksum::Verify`
    /// whose checksum field holds only the pseudo-header sum, i.e. another stack's
    /// [`crate::Stack::poll_transmit`] output that no device stage finished (also
    /// counted in `TcpInCsumErrors`). See [`crate::Stack::handle_transmit`].
    LowtideInCsumPartial,
    /// lowtide's own (Linux counts it only in /proc/net/stat/rt_cache's
    /// `in_martian_src`): IPv4 packets dropped for a martian source
    /// (`ip_route_input_slow`'s `martian_source:`: multicast, broadcast, 0.0.0.0/8,
    /// loopback, or one of our own addresses).
    LowtideInMartianSrc,
    /// lowtide's own (rt_cache's `in_martian_dst`): IPv4 packets dropped for a
    /// martian destination (0.0.0.0/8, loopback).
    LowtideInMartianDst,
}

/// Stack-wide counters, indexed by [`Mib`].
#[derive(Debug, Clone)]
pub struct Counters {
    values: Vec<u64>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            values: vec![0; Mib::ALL.len()],
        }
    }
}

impl Mib {
    /// The counter of the IP layer that carries a packet of IP version `ver` (its
    /// first nibble): Linux keeps IPv6's apart, in `/proc/net/snmp6`
    /// (`ip6_rcv_core`, `ip6_input_finish`, `ip6_forward`, `ip6_xmit` count
    /// `Ip6InReceives`... where `ip_rcv_core`, `ip_local_deliver_finish`,
    /// `ip_output` count `IpInReceives`...). `self` is the IPv4 counter; one that
    /// IPv6 has no twin for (an ICMP or TCP counter) is returned as it is.
    pub fn for_ip_version(self, ver: u8) -> Mib {
        if ver != 6 {
            return self;
        }
        match self {
            Mib::IpInReceives => Mib::Ip6InReceives,
            Mib::IpInHdrErrors => Mib::Ip6InHdrErrors,
            Mib::IpInAddrErrors => Mib::Ip6InAddrErrors,
            Mib::IpInUnknownProtos => Mib::Ip6InUnknownProtos,
            Mib::IpExtInTruncatedPkts => Mib::Ip6InTruncatedPkts,
            Mib::IpInDelivers => Mib::Ip6InDelivers,
            Mib::IpReasmTimeout => Mib::Ip6ReasmTimeout,
            Mib::IpReasmReqds => Mib::Ip6ReasmReqds,
            Mib::IpReasmOKs => Mib::Ip6ReasmOKs,
            Mib::IpReasmFails => Mib::Ip6ReasmFails,
            Mib::IpFragOKs => Mib::Ip6FragOKs,
            Mib::IpFragFails => Mib::Ip6FragFails,
            Mib::IpFragCreates => Mib::Ip6FragCreates,
            Mib::IpOutRequests => Mib::Ip6OutRequests,
            Mib::IpExtInOctets => Mib::Ip6InOctets,
            Mib::IpExtOutOctets => Mib::Ip6OutOctets,
            Mib::IpOutTransmits => Mib::Ip6OutTransmits,
            Mib::IpExtInNoECTPkts => Mib::Ip6InNoECTPkts,
            Mib::IpExtInECT1Pkts => Mib::Ip6InECT1Pkts,
            Mib::IpExtInECT0Pkts => Mib::Ip6InECT0Pkts,
            Mib::IpExtInCEPkts => Mib::Ip6InCEPkts,
            other => other,
        }
    }
}

/// The IP version of `packet` (its first nibble; 0 when empty).
pub(crate) fn ip_version(packet: &[u8]) -> u8 {
    packet.first().map_or(0, |b| b >> 4)
}

impl Counters {
    /// Adds `n` to a counter.
    #[inline]
    pub fn add(&mut self, mib: Mib, n: u64) {
        self.values[mib as usize] += n;
    }
    /// Adds one to a counter.
    #[inline]
    pub fn inc(&mut self, mib: Mib) {
        self.add(mib, 1);
    }
    /// Takes back `n` counted for a send that, heard later, never happened (Linux
    /// counts only after `tcp_transmit_skb` succeeded).
    pub(crate) fn take_back(&mut self, mib: Mib, n: u64) {
        let v = &mut self.values[mib as usize];
        *v = v.saturating_sub(n);
    }
    /// The value of a counter.
    pub fn get(&self, mib: Mib) -> u64 {
        self.values[mib as usize]
    }
    /// The value of the counter nstat names `name` (`"TcpRetransSegs"`,
    /// `"TcpExtTCPSynRetrans"`), or `None` for a name lowtide does not count.
    pub fn by_name(&self, name: &str) -> Option<u64> {
        Mib::from_name(name).map(|m| self.get(m))
    }
    /// Every counter with its nstat name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Mib::ALL.iter().map(|m| (m.name(), self.get(*m)))
    }
    /// Adds every counter of `other` into `self`.
    pub fn merge(&mut self, other: &Counters) {
        for (a, b) in self.values.iter_mut().zip(&other.values) {
            *a += b;
        }
    }
}

impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.values.len()))?;
        for (name, v) in self.iter() {
            map.serialize_entry(name, &v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_by_nstat_name() {
        let mut c = Counters::default();
        c.add(Mib::ALL[0], 3);
        assert_eq!(c.by_name(Mib::ALL[0].name()), Some(3));
        assert_eq!(c.by_name("NoSuchCounter"), None);
    }

    #[test]
    fn names_round_trip() {
        for m in Mib::ALL {
            assert_eq!(Mib::from_name(m.name()), Some(*m));
        }
        assert_eq!(Mib::IpOutRequests.name(), "IpOutRequests");
        assert_eq!(Mib::from_name("NoSuchCounter"), None);
    }

    /// IPv6 packets count in snmp6's table, IPv4 ones (and anything else) in snmp's.
    #[test]
    fn ip6_counters_for_ipv6_packets() {
        assert_eq!(Mib::IpInReceives.for_ip_version(6), Mib::Ip6InReceives);
        assert_eq!(Mib::IpExtOutOctets.for_ip_version(6), Mib::Ip6OutOctets);
        assert_eq!(Mib::IpInDelivers.for_ip_version(4), Mib::IpInDelivers);
        assert_eq!(Mib::IpInReceives.for_ip_version(0), Mib::IpInReceives);
        assert_eq!(Mib::TcpInSegs.for_ip_version(6), Mib::TcpInSegs);
        let trunc = Mib::IpExtInTruncatedPkts;
        assert_eq!(trunc.for_ip_version(6), Mib::Ip6InTruncatedPkts);
        assert_eq!(
            Mib::IpExtInCsumErrors.for_ip_version(6),
            Mib::IpExtInCsumErrors
        );
        assert_eq!((ip_version(&[0x60, 0]), ip_version(&[])), (6, 0));
    }

    #[test]
    fn add_and_merge() {
        let mut a = Counters::default();
        a.add(Mib::TcpOutSegs, 3);
        let mut b = Counters::default();
        b.inc(Mib::TcpOutSegs);
        a.merge(&b);
        assert_eq!(a.get(Mib::TcpOutSegs), 4);
    }
}
