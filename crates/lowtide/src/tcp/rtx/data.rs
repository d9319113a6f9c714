//! The payload an skb of the send side carries: the bytes the application wrote,
//! stored (the default, what Linux does), or, for a socket with a
//! [`PayloadSource`], only their length: the bytes are a function of their stream
//! offset, described to the device when a segment is sent ([`PatternPayload`])
//! and made by the device when it sends the packet, again for each
//! retransmission, so neither the write and retransmit queues nor a packet
//! waiting in a device queue hold payload (the simulator's `--payload pattern`,
//! for many flows at little memory).
//!
//! Every decision of the engine reads only lengths, so a socket behaves the same
//! either way; only the memory the queues touch differs.

use crate::socket::TxPayload;
use bytes::{Bytes, BytesMut};
use std::sync::Arc;

/// The content of a socket's send stream as a function of the offset: what a
/// socket in pattern mode ([`crate::SocketMut::set_payload_source`]) sends.
pub trait PayloadSource: core::fmt::Debug + Send + Sync {
    /// Fills `buf` with the stream bytes from `offset` on (offset 0: the first byte
    /// written).
    fn fill(&self, offset: u64, buf: &mut [u8]);
}

/// A shared [`PayloadSource`].
pub type SharedSource = Arc<dyn PayloadSource>;

/// A pattern transmission's payload, not made yet: `len` bytes of a socket's
/// [`PayloadSource`] from stream offset `offset`. The engine hands the device this
/// instead of the bytes ([`TxPayload::Pattern`]), so a packet waiting in a device
/// queue holds its headers only; the device makes the bytes when it sends the
/// packet ([`PatternPayload::fill`]), as it finishes the checksum then.
#[derive(Debug, Clone)]
pub struct PatternPayload {
    source: SharedSource,
    offset: u64,
    len: usize,
}

impl PatternPayload {
    /// Bytes it stands for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if it stands for no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stream offset of its first byte.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Makes the bytes into `buf`, which must be [`PatternPayload::len`] long.
    pub fn fill(&self, buf: &mut [u8]) {
        assert_eq!(
            buf.len(),
            self.len,
            "a pattern payload fills its own length"
        );
        self.source.fill(self.offset, buf);
    }

    /// The bytes, made into a new buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut buf = vec![0; self.len];
        self.fill(&mut buf);
        Bytes::from(buf)
    }
}

/// The same source (by identity), offset and length: the same bytes.
impl PartialEq for PatternPayload {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.source, &other.source)
            && (self.offset, self.len) == (other.offset, other.len)
    }
}

impl Eq for PatternPayload {}

/// The payload of a write-queue skb (still growing, never sent).
#[derive(Debug)]
pub enum WriteData {
    /// The bytes copied in (`tcp_sendmsg_locked`'s copy).
    Stored(BytesMut),
    /// `len` bytes of the socket's [`PayloadSource`].
    Pattern {
        /// Bytes.
        len: usize,
    },
}

/// The payload of a sent skb (retransmit queue), or a piece of one being sent.
#[derive(Debug, Clone)]
pub enum SkbData {
    /// Shared bytes (splitting and handing them to the device count references).
    Stored(Bytes),
    /// `len` bytes of the socket's [`PayloadSource`] at the skb's offset.
    Pattern {
        /// Bytes.
        len: usize,
    },
}

impl Default for SkbData {
    fn default() -> Self {
        SkbData::EMPTY
    }
}

impl From<Bytes> for SkbData {
    fn from(b: Bytes) -> Self {
        SkbData::Stored(b)
    }
}

impl From<BytesMut> for WriteData {
    fn from(b: BytesMut) -> Self {
        WriteData::Stored(b)
    }
}

impl WriteData {
    /// Bytes held (or stood for).
    pub fn len(&self) -> usize {
        match self {
            WriteData::Stored(b) => b.len(),
            WriteData::Pattern { len } => *len,
        }
    }

    /// True if it has no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the next `n` bytes of the send, which are `src` when stored (a
    /// pattern skb takes only the count).
    pub fn append(&mut self, src: Option<&[u8]>, n: usize) {
        match (self, src) {
            (WriteData::Stored(b), Some(s)) => b.extend_from_slice(&s[..n]),
            (WriteData::Pattern { len }, None) => *len += n,
            _ => unreachable!("a send's kind matches its socket's skbs"),
        }
    }

    /// Appends a whole later skb's payload (`tcp_mtu_probe` building its probe).
    pub fn extend(&mut self, next: &WriteData) {
        match (self, next) {
            (WriteData::Stored(b), WriteData::Stored(n)) => b.extend_from_slice(n),
            (WriteData::Pattern { len }, n) => *len += n.len(),
            (WriteData::Stored(_), WriteData::Pattern { .. }) => {
                unreachable!("one socket's skbs are of one kind")
            }
        }
    }

    /// Moves the first `n` bytes of the next skb's payload to the end of this one
    /// (`skb_shift`, for `tcp_grow_skb`). Stored bytes carved one after the other
    /// from the same arena join in place (`BytesMut::unsplit`); others are copied.
    pub fn shift_from(&mut self, next: &mut WriteData, n: usize) {
        match (self, next) {
            (WriteData::Stored(b), WriteData::Stored(nb)) => b.unsplit(nb.split_to(n)),
            (WriteData::Pattern { len }, WriteData::Pattern { len: nlen }) => {
                *len += n;
                *nlen -= n;
            }
            _ => unreachable!("one socket's skbs are of one kind"),
        }
    }

    /// Splits off the first `n` bytes, to send (`tso_fragment`).
    pub fn split_to(&mut self, n: usize) -> SkbData {
        match self {
            WriteData::Stored(b) => SkbData::Stored(b.split_to(n).freeze()),
            WriteData::Pattern { len } => {
                *len -= n;
                SkbData::Pattern { len: n }
            }
        }
    }

    /// The whole payload, to send.
    pub fn freeze(self) -> SkbData {
        match self {
            WriteData::Stored(b) => SkbData::Stored(b.freeze()),
            WriteData::Pattern { len } => SkbData::Pattern { len },
        }
    }
}

impl SkbData {
    /// No payload (a bare SYN, FIN or ACK).
    pub const EMPTY: SkbData = SkbData::Stored(Bytes::new());

    /// Bytes held (or stood for).
    pub fn len(&self) -> usize {
        match self {
            SkbData::Stored(b) => b.len(),
            SkbData::Pattern { len } => *len,
        }
    }

    /// True if it has no payload.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Splits off the part from `n` on; `self` keeps the first `n` bytes.
    pub fn split_off(&mut self, n: usize) -> SkbData {
        match self {
            SkbData::Stored(b) => SkbData::Stored(b.split_off(n)),
            SkbData::Pattern { len } => {
                let tail = *len - n;
                *len = n;
                SkbData::Pattern { len: tail }
            }
        }
    }

    /// The stored bytes, if stored.
    pub fn stored(&self) -> Option<&Bytes> {
        match self {
            SkbData::Stored(b) => Some(b),
            SkbData::Pattern { .. } => None,
        }
    }

    /// `self` followed by `next` (the skb after it in the stream), `self`'s buffer
    /// reused when it is ours alone and `reuse` allows (else a new one of
    /// `new_cap(total)` bytes).
    pub fn concat(&mut self, next: &SkbData, reuse: bool, new_cap: impl Fn(usize) -> usize) {
        match (self, next) {
            (SkbData::Stored(a), SkbData::Stored(b)) => {
                let taken = core::mem::take(a);
                let mut m = match reuse {
                    true => taken.try_into_mut(),
                    false => Err(taken),
                }
                .unwrap_or_else(|shared| {
                    let mut m = BytesMut::with_capacity(new_cap(shared.len() + b.len()));
                    m.extend_from_slice(&shared);
                    m
                });
                m.extend_from_slice(b);
                *a = m.freeze();
            }
            (SkbData::Pattern { len }, n) => *len += n.len(),
            (SkbData::Stored(_), SkbData::Pattern { .. }) => {
                unreachable!("one socket's skbs are of one kind")
            }
        }
    }

    /// The payload of an skb whose first payload byte is stream offset `offset`, as
    /// the device gets it: the stored bytes (shared), or the description of the
    /// source's bytes there, which the device makes when it sends the packet.
    pub(crate) fn for_device(&self, source: Option<&SharedSource>, offset: u64) -> TxPayload {
        match self {
            SkbData::Stored(b) => TxPayload::Bytes(b.clone()),
            SkbData::Pattern { len } => TxPayload::Pattern(PatternPayload {
                source: source.expect("a pattern skb's socket has a source").clone(),
                offset,
                len: *len,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Counting;
    impl PayloadSource for Counting {
        fn fill(&self, offset: u64, buf: &mut [u8]) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = (offset + i as u64) as u8;
            }
        }
    }

    #[test]
    fn pattern_pieces_make_the_bytes_of_their_offsets() {
        let mut w = WriteData::Pattern { len: 0 };
        w.append(None, 700);
        w.extend(&WriteData::Pattern { len: 300 });
        let head = w.split_to(400);
        assert_eq!((head.len(), w.len()), (400, 600));
        let mut rest = w.freeze();
        let tail = rest.split_off(100);
        assert_eq!((rest.len(), tail.len()), (100, 500));
        let src: SharedSource = Arc::new(Counting);
        let TxPayload::Pattern(p) = tail.for_device(Some(&src), 500) else {
            panic!("a pattern skb goes to the device as a description");
        };
        assert_eq!((p.offset(), p.len()), (500, 500));
        let b = p.to_bytes();
        assert!(b.iter().enumerate().all(|(i, &x)| x == (500 + i) as u8));
        assert_eq!(tail.for_device(Some(&src), 500), TxPayload::Pattern(p));
        let mut joined = rest.clone();
        joined.concat(&tail, true, |n| n);
        assert_eq!(joined.len(), 600);
    }

    #[test]
    fn stored_concat_reuses_or_copies() {
        let mut a = SkbData::from(Bytes::from(vec![1u8, 2]));
        a.concat(&SkbData::from(Bytes::from(vec![3u8])), true, |n| n);
        assert_eq!(a.stored().map(|b| b.to_vec()), Some(vec![1, 2, 3]));
        a.concat(&SkbData::from(Bytes::from(vec![4u8])), false, |n| n * 2);
        assert_eq!(a.stored().map(|b| b.to_vec()), Some(vec![1, 2, 3, 4]));
    }
}
