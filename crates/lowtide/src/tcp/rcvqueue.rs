//! The receive queue as Linux keeps it (`sk_receive_queue`): the in-order payload of
//! received packets, held by reference instead of copied into one ring (issue 14).
//!
//! A segment that arrives in shared buffers (a GRO packet whose frags are slices of
//! the wire's buffers, [`Payload::Frags`]) is queued as those slices: its bytes are
//! copied once, out to the reader. A segment that arrives in a borrowed packet
//! ([`Payload::Flat`], e.g. a TUN read the device reuses) is copied into payload
//! memory carved from the stack's arenas ([`PageFrag`], reclaimed once read), so
//! neither path allocates per packet in steady state.

use super::page_frag::PageFrag;
use bytes::Bytes;
use std::collections::VecDeque;

/// A segment's payload as the input path sees it.
#[derive(Debug, Clone, Copy)]
pub enum Payload<'a> {
    /// Contiguous bytes borrowed from the packet.
    Flat(&'a [u8]),
    /// Shared buffers (skb frags) from `skip` bytes into them, `len` bytes long.
    Frags {
        /// The buffers, in order.
        frags: &'a [Bytes],
        /// Bytes of the first buffers that are not part of the payload.
        skip: usize,
        /// The payload's length.
        len: usize,
    },
}

impl<'a> Payload<'a> {
    /// All of `frags`.
    pub fn frags(frags: &'a [Bytes]) -> Payload<'a> {
        let len = frags.iter().map(Bytes::len).sum();
        Payload::Frags {
            frags,
            skip: 0,
            len,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Flat(b) => b.len(),
            Payload::Frags { len, .. } => *len,
        }
    }

    /// No bytes?
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The payload without its first `n` bytes (`n` at most its length).
    pub fn skip(self, n: usize) -> Payload<'a> {
        match self {
            Payload::Flat(b) => Payload::Flat(&b[n..]),
            Payload::Frags { frags, skip, len } => Payload::Frags {
                frags,
                skip: skip + n,
                len: len - n,
            },
        }
    }

    /// Calls `f` with the payload's bytes in order, one contiguous piece at a time.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&'a [u8])) {
        match *self {
            Payload::Flat(b) => f(b),
            Payload::Frags { frags, skip, len } => {
                for_each_slice(frags, skip, len, |b, r| f(&b.as_ref()[r]));
            }
        }
    }

    /// The payload's bytes copied into one buffer carved from `frag`'s arenas.
    pub fn copy_to(&self, frag: &mut PageFrag) -> bytes::BytesMut {
        let mut b = frag.take(self.len());
        self.for_each_chunk(|c| b.extend_from_slice(c));
        b
    }

    /// The payload's bytes in one piece: borrowed if flat, else copied into `scratch`.
    pub fn contiguous<'s>(&self, scratch: &'s mut Vec<u8>) -> &'s [u8]
    where
        'a: 's,
    {
        match *self {
            Payload::Flat(b) => b,
            Payload::Frags { .. } => {
                scratch.clear();
                self.for_each_chunk(|c| scratch.extend_from_slice(c));
                scratch
            }
        }
    }
}

/// Calls `f` with each buffer of `frags` and the range of it that lies within `len`
/// bytes from `skip`.
fn for_each_slice<'b>(
    frags: &'b [Bytes],
    mut skip: usize,
    mut len: usize,
    mut f: impl FnMut(&'b Bytes, core::ops::Range<usize>),
) {
    for b in frags {
        if len == 0 {
            break;
        }
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let n = (b.len() - skip).min(len);
        f(b, skip..skip + n);
        len -= n;
        skip = 0;
    }
}

/// The in-order bytes not yet read (see the module docs).
#[derive(Debug, Default)]
pub struct RcvQueue {
    chunks: VecDeque<Bytes>,
    len: usize,
}

impl RcvQueue {
    /// Bytes queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing queued?
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops everything queued.
    pub fn clear(&mut self) {
        self.chunks.clear();
        self.len = 0;
    }

    /// Queues a buffer as it is.
    pub fn push(&mut self, b: Bytes) {
        if !b.is_empty() {
            self.len += b.len();
            self.chunks.push_back(b);
        }
    }

    /// Queues `payload`: shared buffers by reference, borrowed bytes copied into
    /// memory from `frag`.
    pub fn push_payload(&mut self, frag: &mut PageFrag, payload: Payload) {
        match payload {
            Payload::Flat(_) => self.push(payload.copy_to(frag).freeze()),
            Payload::Frags { frags, skip, len } => {
                for_each_slice(frags, skip, len, |b, r| self.push(b.slice(r)));
            }
        }
    }

    /// Hands up to `max` bytes to `read` in order (one call per buffer) and consumes
    /// them; returns how many.
    pub fn read(&mut self, max: usize, mut read: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let take = front.len().min(max - n);
            read(&front[..take]);
            n += take;
            if take == front.len() {
                self.chunks.pop_front();
            } else {
                bytes::Buf::advance(front, take);
            }
        }
        self.len -= n;
        n
    }

    /// Copies the first bytes into `buf` without consuming them (`MSG_PEEK`).
    pub fn peek(&self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for c in &self.chunks {
            let take = c.len().min(buf.len() - n);
            buf[n..n + take].copy_from_slice(&c[..take]);
            n += take;
            if n == buf.len() {
                break;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(r: core::ops::Range<u8>) -> Vec<u8> {
        r.collect()
    }

    #[test]
    fn frags_are_queued_by_reference_and_read_in_order() {
        let a = Bytes::from(bytes(0..10));
        let b = Bytes::from(bytes(10..30));
        let frags = [a.clone(), b.clone()];
        let p = Payload::frags(&frags).skip(4);
        assert_eq!(p.len(), 26);
        let mut q = RcvQueue::default();
        q.push_payload(&mut PageFrag::default(), p);
        assert_eq!(q.len(), 26);
        assert_eq!(q.chunks[0].as_ptr(), a[4..].as_ptr(), "no copy");
        assert_eq!(q.chunks[1].as_ptr(), b.as_ptr(), "no copy");
        let mut peeked = [0u8; 8];
        assert_eq!(q.peek(&mut peeked), 8);
        assert_eq!(peeked.to_vec(), bytes(4..12));
        let mut got = Vec::new();
        assert_eq!(q.read(9, |c| got.extend_from_slice(c)), 9);
        assert_eq!(got, bytes(4..13));
        assert_eq!(q.len(), 17);
        assert_eq!(q.read(100, |c| got.extend_from_slice(c)), 17);
        assert_eq!(got, bytes(4..30));
        assert!(q.is_empty());
    }

    #[test]
    fn flat_payload_is_copied_into_arena_memory() {
        let mut frag = PageFrag::default();
        let mut q = RcvQueue::default();
        let data = bytes(0..100);
        q.push_payload(&mut frag, Payload::Flat(&data[..60]));
        q.push_payload(&mut frag, Payload::Flat(&data[60..]));
        let mut got = Vec::new();
        q.read(usize::MAX, |c| got.extend_from_slice(c));
        assert_eq!(got, data);
    }

    #[test]
    fn a_skip_past_whole_frags_and_a_short_length_take_only_their_bytes() {
        let frags = [
            Bytes::from(bytes(0..5)),
            Bytes::from(bytes(5..10)),
            Bytes::from(bytes(10..20)),
        ];
        let p = Payload::frags(&frags).skip(7);
        let Payload::Frags { frags, skip, .. } = p else {
            unreachable!()
        };
        let short = Payload::Frags {
            frags,
            skip,
            len: 5,
        };
        let mut got = Vec::new();
        short.for_each_chunk(|c| got.extend_from_slice(c));
        assert_eq!(got, bytes(7..12));
        let mut scratch = Vec::new();
        assert_eq!(p.contiguous(&mut scratch), &bytes(7..20)[..]);
    }
}
