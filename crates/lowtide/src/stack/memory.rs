//! Stack-wide memory and retransmit-queue work, summed over the sockets
//! (`/proc/net/sockstat` "TCP: mem"; a CPU cost model's inputs).

use super::{Sock, Stack};

/// Stack-wide TCP memory ([`Stack::tcp_memory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TcpMemory {
    /// Pages the sockets reserve under `tcp_mem` (`tcp_memory_allocated`,
    /// `sockstat` "mem"): each socket's charge rounded up to whole 4 KB pages.
    pub pages: u64,
    /// The stack is under TCP memory pressure (`tcp_memory_pressure`).
    pub pressure: bool,
    /// Sum of `sk_wmem_queued` (bytes).
    pub wmem_queued: u64,
    /// Sum of `sk_rmem_alloc` (bytes).
    pub rmem_alloc: u64,
    /// Sum of `sk_wmem_alloc`: bytes handed to the device and not completed.
    pub wmem_alloc: u64,
    /// TCP sockets counted.
    pub sockets: u64,
}

/// Work done on the retransmit queues of a host's live sockets
/// ([`Stack::rtx_work`]), for a CPU cost model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtxWork {
    /// Queue nodes visited, as Linux's tree or list would visit them.
    pub nodes_visited: u64,
    /// SACK blocks processed.
    pub sack_blocks: u64,
    /// Skbs now in the retransmit queues (the list a walk goes through: its length
    /// sets how much of it stays in the CPU's caches).
    pub queue_skbs: u64,
}

impl Stack {
    /// Stack-wide TCP memory, as `/proc/net/sockstat` "TCP: mem" (4 KB pages) counts it:
    /// the pages reserved for send queues (`sk_wmem_queued`) and receive queues
    /// (`sk_rmem_alloc`) under `net.ipv4.tcp_mem` (tcp/mem.rs).
    pub fn tcp_memory(&self) -> TcpMemory {
        let mut m = TcpMemory::default();
        for s in &self.slots {
            if let Some(Sock::Tcp(t)) = &s.sock {
                m.wmem_queued += t.wmem_queued;
                m.rmem_alloc += t.rmem_alloc();
                m.wmem_alloc += t.wmem_alloc;
                m.sockets += 1;
            }
        }
        m.pages = self.tcp_mem.allocated;
        m.pressure = self.tcp_mem.under_pressure();
        m
    }

    /// Sum of the TCP sockets' `sk_wmem_queued` (bytes) as each socket's last event
    /// left it: [`TcpMemory::wmem_queued`] without a pass over the sockets.
    pub fn wmem_queued(&self) -> u64 {
        self.wmem_queued
    }

    /// `tcp_memory_allocated`: [`TcpMemory::pages`] without a pass over the sockets.
    pub fn tcp_memory_allocated(&self) -> u64 {
        self.tcp_mem.allocated
    }

    /// Work on the retransmit queues so far, summed over the live sockets (a closed
    /// socket's work leaves the sum).
    pub fn rtx_work(&self) -> RtxWork {
        let mut w = RtxWork::default();
        for s in &self.slots {
            if let Some(Sock::Tcp(t)) = &s.sock {
                w.nodes_visited += t.rtx.nodes_visited();
                w.sack_blocks += t.rtx.sack_blocks();
                w.queue_skbs += t.rtx.len() as u64;
            }
        }
        w
    }
}
