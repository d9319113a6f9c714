//! Receive buffers lent to the engine's receive queue (issue 14): a packet read from
//! the device is handed to the stack as shared bytes ([`bytes::Bytes`]), whose payload
//! the receive queue keeps by reference until the reader has copied it out; the
//! buffer then comes back here and on to the runtime's pool, instead of being freed
//! (glibc would give large freed buffers back to the kernel and fault fresh pages in
//! for the next read) or copied into the queue.

use bytes::Bytes;
use lowtide_wire::pool::BufPool;
use std::sync::{Arc, Mutex};

/// Buffers whose lenders have dropped their last reference, waiting to be pooled.
#[derive(Debug, Default, Clone)]
pub(crate) struct Returns(Arc<Mutex<Vec<Vec<u8>>>>);

/// A buffer on loan; given back to its [`Returns`] when dropped.
struct Lent {
    buf: Vec<u8>,
    home: Returns,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        // A poisoned lock (a panic elsewhere) just lets the buffer be freed.
        if let Ok(mut back) = self.home.0.lock() {
            back.push(std::mem::take(&mut self.buf));
        }
    }
}

impl Returns {
    /// Lends `buf` out as shared bytes; it comes back when the last slice is dropped.
    pub(crate) fn lend(&self, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Lent {
            buf,
            home: self.clone(),
        })
    }

    /// Moves the buffers given back into `pool`.
    pub(crate) fn give_back(&self, pool: &mut BufPool) {
        if let Ok(mut back) = self.0.lock() {
            back.drain(..).for_each(|b| pool.give(b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_buffer_comes_back_after_its_last_slice() {
        let r = Returns::default();
        let mut pool = BufPool::new();
        let mut buf = pool.take(60_000);
        buf.resize(1500, 7);
        let ptr = buf.as_ptr();
        let b = r.lend(buf);
        let tail = b.slice(10..);
        drop(b);
        r.give_back(&mut pool);
        assert!(pool.is_empty(), "a slice still holds it");
        drop(tail);
        r.give_back(&mut pool);
        let again = pool.take(60_000);
        assert_eq!(again.as_ptr(), ptr, "back in the pool");
    }
}
