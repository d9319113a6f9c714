//! What a finished (or failed) test produced.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

use crate::interval::Interval;
use crate::protocol::{TestError, TestParams};
use crate::sockets::ConnStats;

/// Which end of the test we were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `iperf3 -c`.
    Client,
    /// `iperf3 -s`.
    Server,
}

/// What `poll` returns.
// `Done` is big but returned once per test; boxing it would only cost the callers.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Poll {
    /// Call `poll` again after the next network event, or at `wake_at` (a time on the
    /// `Sockets::now` clock) if nothing happens before; `Some(now)` means "at once", as
    /// more work remains.
    Pending {
        /// When to poll at the latest.
        wake_at: Option<Duration>,
    },
    /// The test is over.
    Done(TestOutcome),
}

/// One data stream's counts, from both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOutcome {
    /// iperf3's stream id (1, 3, 4, ...).
    pub id: u32,
    /// We sent on this stream (else we received).
    pub local_sender: bool,
    /// Bytes we sent or received.
    pub local_bytes: u64,
    /// Seconds from `TEST_START` to `TEST_END` on our side.
    pub local_seconds: f64,
    /// Bytes the peer reported in its results (received or sent), if it did.
    pub peer_bytes: Option<u64>,
    /// The peer's stream duration from its results.
    pub peer_seconds: Option<f64>,
    /// The sender's retransmits (ours when we send, the peer's report otherwise).
    pub retransmits: Option<u64>,
    /// Our connection's statistics at the end.
    pub stats: ConnStats,
    /// Our address.
    pub local_addr: Option<SocketAddr>,
    /// The peer's address.
    pub peer_addr: Option<SocketAddr>,
}

impl StreamOutcome {
    /// Bytes the sender sent (ours or the peer's count).
    pub fn sent_bytes(&self) -> Option<u64> {
        if self.local_sender {
            Some(self.local_bytes)
        } else {
            self.peer_bytes
        }
    }

    /// Bytes the receiver received (ours or the peer's count).
    pub fn received_bytes(&self) -> Option<u64> {
        if self.local_sender {
            self.peer_bytes
        } else {
            Some(self.local_bytes)
        }
    }

    /// The sender's duration.
    pub fn sender_seconds(&self) -> f64 {
        if self.local_sender {
            self.local_seconds
        } else {
            self.peer_seconds.unwrap_or(self.local_seconds)
        }
    }

    /// The receiver's duration.
    pub fn receiver_seconds(&self) -> f64 {
        if self.local_sender {
            self.peer_seconds.unwrap_or(self.local_seconds)
        } else {
            self.local_seconds
        }
    }
}

/// The result of one test.
#[derive(Debug, Clone, PartialEq)]
pub struct TestOutcome {
    /// Our role.
    pub role: Role,
    /// The test's parameters (what the client sent).
    pub params: TestParams,
    /// The test's cookie (36 characters).
    pub cookie: String,
    /// The control connection's local address.
    pub control_local: Option<SocketAddr>,
    /// The control connection's remote address.
    pub control_peer: Option<SocketAddr>,
    /// Per-stream counts, in stream order.
    pub streams: Vec<StreamOutcome>,
    /// The results JSON we sent, if we got that far.
    pub local_results: Option<Value>,
    /// The results JSON the peer sent, if it did.
    pub peer_results: Option<Value>,
    /// This side's interval statistics (`-i`), omitted ones included.
    pub intervals: Vec<Interval>,
    /// Why the test failed, if it did.
    pub error: Option<TestError>,
}

impl TestOutcome {
    /// An outcome with no streams yet.
    pub(crate) fn empty(role: Role, params: TestParams, cookie: String) -> Self {
        TestOutcome {
            role,
            params,
            cookie,
            control_local: None,
            control_peer: None,
            streams: Vec::new(),
            local_results: None,
            peer_results: None,
            intervals: Vec::new(),
            error: None,
        }
    }

    /// The test completed without error.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// The local side was the sender.
    pub fn local_sender(&self) -> bool {
        match self.role {
            Role::Client => !self.params.reverse,
            Role::Server => self.params.reverse,
        }
    }

    /// Bytes sent over all streams (the sender's count; unknown peer counts are 0).
    pub fn sum_sent(&self) -> u64 {
        self.streams.iter().filter_map(|s| s.sent_bytes()).sum()
    }

    /// Bytes received over all streams (the receiver's count).
    pub fn sum_received(&self) -> u64 {
        self.streams.iter().filter_map(|s| s.received_bytes()).sum()
    }

    /// Bytes moved by our side over all streams.
    pub fn local_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.local_bytes).sum()
    }
}
