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
//!
//! A third kind holds the caller's own bytes: a `MSG_ZEROCOPY` send of a [`Bytes`]
//! ([`crate::Stack::send_zerocopy`]) puts slices of it in the write queue
//! ([`WriteData::Zerocopy`], [`SkbData::Zerocopy`]), as
//! `skb_zerocopy_iter_stream` makes the user's pinned pages the skb's fragments:
//! splitting, retransmitting and handing to the device share the caller's
//! allocation, never copy it. Nothing joins such an skb but the next bytes of the
//! same buffer (`skb_zcopy`: one `uarg` per skb), and it joins no other
//! (`skb_shift` and `tcp_skb_can_collapse`'s `skb_pure_zcopy_same` refuse it).

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
    /// A slice of the caller's buffer, and the `MSG_ZEROCOPY` notification id
    /// (`skb_zcopy`'s `uarg`) its send took.
    Zerocopy(Bytes, u32),
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
    /// A slice of a `MSG_ZEROCOPY` sender's buffer, and the notification id its
    /// send took (see [`WriteData::Zerocopy`]).
    Zerocopy(Bytes, u32),
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
            WriteData::Zerocopy(b, _) => b.len(),
        }
    }

    /// The notification id of a `MSG_ZEROCOPY` sender's bytes (`skb_zcopy`), if
    /// it holds them.
    pub fn zerocopy_id(&self) -> Option<u32> {
        match self {
            WriteData::Zerocopy(_, id) => Some(*id),
            _ => None,
        }
    }

    /// May the next bytes of a send join it: a copying send (`src` its bytes, or
    /// none in pattern mode) joins stored or pattern data; a zerocopy send of
    /// `src`'s bytes from offset `at` joins only the slice of `src` that ends
    /// there (`skb_zerocopy_iter_stream`: an skb points to one `uarg`; and a later
    /// send's buffer, even of the same allocation, cannot join: `Bytes` slices do
    /// not merge), or an empty skb, which it then becomes.
    pub fn takes(&self, zerocopy: bool, src: Option<&[u8]>, at: usize) -> bool {
        match (self, zerocopy) {
            (WriteData::Stored(_), false) => src.is_some(),
            (WriteData::Pattern { .. }, false) => src.is_none(),
            (WriteData::Stored(b), true) => b.is_empty() && src.is_some(),
            (WriteData::Zerocopy(b, _), true) => src.is_some_and(|s| {
                b.is_empty() || (b.len() <= at && s[at - b.len()..].as_ptr() == b.as_ptr())
            }),
            _ => false,
        }
    }

    /// Appends the next `n` bytes of `src` from offset `at`, a zerocopy send's
    /// buffer (notification `id`): the slice grows, nothing is copied. An empty
    /// skb takes the slice; a non-empty one must end where it starts
    /// ([`WriteData::takes`]).
    pub fn append_zerocopy(&mut self, src: &Bytes, at: usize, n: usize, id: u32) {
        let start = at - self.len();
        debug_assert!(self.is_empty() || self.takes(true, Some(src), at));
        *self = WriteData::Zerocopy(src.slice(start..at + n), id);
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
            _ => unreachable!("a probe takes no zerocopy data, one socket's skbs one kind"),
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
            WriteData::Zerocopy(b, id) => SkbData::Zerocopy(b.split_to(n), *id),
        }
    }

    /// The whole payload, to send.
    pub fn freeze(self) -> SkbData {
        match self {
            WriteData::Stored(b) => SkbData::Stored(b.freeze()),
            WriteData::Pattern { len } => SkbData::Pattern { len },
            WriteData::Zerocopy(b, id) => SkbData::Zerocopy(b, id),
        }
    }
}

impl SkbData {
    /// No payload (a bare SYN, FIN or ACK).
    pub const EMPTY: SkbData = SkbData::Stored(Bytes::new());

    /// Bytes held (or stood for).
    pub fn len(&self) -> usize {
        match self {
            SkbData::Stored(b) | SkbData::Zerocopy(b, _) => b.len(),
            SkbData::Pattern { len } => *len,
        }
    }

    /// The notification id of a `MSG_ZEROCOPY` sender's bytes (`skb_zcopy`), if
    /// it holds them.
    pub fn zerocopy_id(&self) -> Option<u32> {
        match self {
            SkbData::Zerocopy(_, id) => Some(*id),
            _ => None,
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
            SkbData::Zerocopy(b, id) => SkbData::Zerocopy(b.split_off(n), *id),
            SkbData::Pattern { len } => {
                let tail = *len - n;
                *len = n;
                SkbData::Pattern { len: tail }
            }
        }
    }

    /// The bytes held (stored, or the zerocopy sender's), if held.
    pub fn stored(&self) -> Option<&Bytes> {
        match self {
            SkbData::Stored(b) | SkbData::Zerocopy(b, _) => Some(b),
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
            _ => unreachable!("zerocopy skbs join none, one socket's skbs are one kind"),
        }
    }

    /// The payload of an skb whose first payload byte is stream offset `offset`, as
    /// the device gets it: the stored bytes (shared), or the description of the
    /// source's bytes there, which the device makes when it sends the packet.
    pub(crate) fn for_device(&self, source: Option<&SharedSource>, offset: u64) -> TxPayload {
        match self {
            SkbData::Stored(b) | SkbData::Zerocopy(b, _) => TxPayload::Bytes(b.clone()),
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
    fn zerocopy_pieces_are_slices_of_the_senders_buffer() {
        let src = Bytes::from(vec![9u8; 5000]);
        let whole = src.as_ptr_range();
        let mut w = WriteData::Zerocopy(Bytes::new(), 3);
        assert!(w.takes(true, Some(&src), 0));
        assert!(!w.takes(false, Some(&src), 0), "copied bytes never join");
        w.append_zerocopy(&src, 0, 1000, 3);
        assert!(w.takes(true, Some(&src), 1000));
        assert!(!w.takes(true, Some(&src), 1500), "not where it ends");
        let later = src.slice(1000..);
        assert!(!w.takes(true, Some(&later), 0), "another send's buffer");
        w.append_zerocopy(&src, 1000, 3000, 3);
        let head = w.split_to(1500);
        let mut rest = w.freeze();
        let tail = rest.split_off(1000);
        for (d, at) in [(&head, 0), (&rest, 1500), (&tail, 2500)] {
            assert_eq!(d.zerocopy_id(), Some(3));
            let TxPayload::Bytes(b) = d.for_device(None, 0) else {
                panic!("bytes");
            };
            assert_eq!(b.as_ptr(), src[at..].as_ptr(), "a slice, not a copy");
            assert!(whole.start <= b.as_ptr() && b.as_ptr_range().end <= whole.end);
        }
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
