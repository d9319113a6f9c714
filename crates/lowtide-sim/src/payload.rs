//! The payload every flow sends: each byte is a function of (run seed, flow, offset),
//! so the receiver can check any byte at any offset without keeping a copy.
//!
//! Byte `o` of flow `f` is byte `o % 8` (little-endian) of the 64-bit word
//! `mix(key ^ o / 8)` with `key = splitmix64(seed ^ splitmix64(f))` and `mix` one multiply
//! and a fold (`x * φ·2^64`, then high half xored into the low): not a statistical
//! RNG, but no two nearby words are alike, so a flipped, missing or extra byte shows,
//! and it costs about a cycle per 8 bytes, generated and compared a word at a time.

/// SplitMix64's output function (Steele, Lea, Flood 2014): a fast, well-mixed hash.
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload of one flow of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    key: u64,
}

impl Payload {
    /// The payload of flow `flow` in the run seeded with `seed`.
    pub fn new(seed: u64, flow: u32) -> Payload {
        Payload {
            key: splitmix64(seed ^ splitmix64(flow as u64)),
        }
    }

    /// The word at index `index` (stream offsets `8 * index ..`, little-endian).
    #[inline(always)]
    fn word_u64(&self, index: u64) -> u64 {
        let m = (self.key ^ index).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        m ^ (m >> 29)
    }

    /// The 8 bytes at word index `index`.
    #[inline(always)]
    fn word(&self, index: u64) -> [u8; 8] {
        self.word_u64(index).to_le_bytes()
    }

    /// The byte at stream offset `offset`.
    pub fn byte_at(&self, offset: u64) -> u8 {
        self.word(offset / 8)[(offset % 8) as usize]
    }

    /// Fills `buf` with the stream bytes starting at `offset`.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let head = head_len(offset, buf.len());
        for (i, b) in buf[..head].iter_mut().enumerate() {
            *b = self.byte_at(offset + i as u64);
        }
        let mut index = (offset + head as u64) / 8;
        let mut chunks = buf[head..].chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.word_u64(index).to_le_bytes());
            index += 1;
        }
        let w = self.word(index);
        let rest = chunks.into_remainder();
        let n = rest.len();
        rest.copy_from_slice(&w[..n]);
    }

    /// Checks that `data` equals the stream bytes starting at `offset`; on a mismatch
    /// returns the stream offset of the first wrong byte.
    pub fn verify(&self, offset: u64, data: &[u8]) -> Result<(), u64> {
        let head = head_len(offset, data.len());
        if let Some(i) = (0..head).find(|&i| data[i] != self.byte_at(offset + i as u64)) {
            return Err(offset + i as u64);
        }
        let base = offset + head as u64;
        let first = base / 8;
        let body = &data[head..];
        // Compare 64 bytes at a time without branching per word; locate on a miss.
        let mut blocks = body.chunks_exact(64);
        for (b, block) in (&mut blocks).enumerate() {
            let index = first + 8 * b as u64;
            let mut diff = 0u64;
            for (k, c) in block.chunks_exact(8).enumerate() {
                let got = u64::from_le_bytes(c.try_into().expect("8 bytes"));
                diff |= got ^ self.word_u64(index + k as u64);
            }
            if diff != 0 {
                return Err(self.first_diff(base + 64 * b as u64, block));
            }
        }
        let done = body.len() - blocks.remainder().len();
        let mut index = first + done as u64 / 8;
        let mut chunks = blocks.remainder().chunks_exact(8);
        for (k, c) in (&mut chunks).enumerate() {
            if c != self.word(index) {
                return Err(self.first_diff(base + (done + 8 * k) as u64, c));
            }
            index += 1;
        }
        let rest = chunks.remainder();
        let w = self.word(index);
        match rest.iter().zip(w).position(|(a, b)| *a != b) {
            Some(i) => Err(base + (data.len() - head - rest.len()) as u64 + i as u64),
            None => Ok(()),
        }
    }

    fn first_diff(&self, offset: u64, chunk: &[u8]) -> u64 {
        let i = chunk
            .iter()
            .enumerate()
            .position(|(i, &b)| b != self.byte_at(offset + i as u64))
            .unwrap_or(0);
        offset + i as u64
    }
}

/// Checks a received stream against its [`Payload`] as it arrives, in order.
#[derive(Debug, Clone)]
pub struct Verifier {
    payload: Payload,
    /// Bytes received so far (the next expected stream offset).
    received: u64,
    /// Bytes the sender will send in total, if known (fixed-size transfers).
    expected: Option<u64>,
    /// The first bad stream offset: a wrong byte, a byte past `expected`, or for an
    /// early end of stream, the offset where it ended.
    first_error: Option<u64>,
    eof: bool,
}

impl Verifier {
    /// A verifier for `payload`; `expected` is the total length if known.
    pub fn new(payload: Payload, expected: Option<u64>) -> Verifier {
        Verifier {
            payload,
            received: 0,
            expected,
            first_error: None,
            eof: false,
        }
    }

    /// Checks the next `data` of the stream.
    pub fn consume(&mut self, data: &[u8]) {
        let end = self.received + data.len() as u64;
        if self.first_error.is_none() {
            let limit = self.expected.unwrap_or(u64::MAX);
            let good = (limit.saturating_sub(self.received) as usize).min(data.len());
            if let Err(at) = self.payload.verify(self.received, &data[..good]) {
                self.first_error = Some(at);
            } else if good < data.len() {
                self.first_error = Some(self.received + good as u64);
            }
        }
        self.received = end;
    }

    /// The stream ended (the peer's FIN was read).
    pub fn end_of_stream(&mut self) {
        self.eof = true;
        if self.first_error.is_none() && self.expected.is_some_and(|e| self.received < e) {
            self.first_error = Some(self.received);
        }
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Whether the end of stream was seen.
    pub fn eof(&self) -> bool {
        self.eof
    }

    /// The first bad offset, if any byte was wrong, extra or missing at EOF.
    pub fn first_error(&self) -> Option<u64> {
        self.first_error
    }

    /// Everything received so far is right, and for a fixed-size transfer the whole
    /// stream arrived and ended.
    pub fn complete_and_intact(&self) -> bool {
        self.first_error.is_none() && self.expected.is_none_or(|e| self.received == e && self.eof)
    }
}

/// Bytes before the first 8-byte-aligned stream offset, capped at `len`.
fn head_len(offset: u64, len: usize) -> usize {
    (((8 - offset % 8) % 8) as usize).min(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(p: &Payload, offset: u64, len: usize) -> Vec<u8> {
        (0..len as u64).map(|i| p.byte_at(offset + i)).collect()
    }

    #[test]
    fn fill_matches_bytewise_at_any_alignment() {
        let p = Payload::new(7, 3);
        for offset in 0..17u64 {
            for len in [0usize, 1, 5, 8, 9, 23, 64, 100] {
                let mut buf = vec![0u8; len];
                p.fill(offset, &mut buf);
                assert_eq!(buf, reference(&p, offset, len), "offset {offset} len {len}");
                assert_eq!(p.verify(offset, &buf), Ok(()));
            }
        }
    }

    #[test]
    fn flows_and_seeds_differ() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        Payload::new(1, 0).fill(0, &mut a);
        Payload::new(1, 1).fill(0, &mut b);
        assert_ne!(a, b);
        Payload::new(2, 0).fill(0, &mut b);
        assert_ne!(a, b);
        // Every byte position differs somewhere between flows (no shared lanes).
        let mut x = vec![0u8; 4096];
        let mut y = vec![0u8; 4096];
        Payload::new(1, 0).fill(0, &mut x);
        Payload::new(1, 1 << 30).fill(0, &mut y);
        let same = x.iter().zip(&y).filter(|(p, q)| p == q).count();
        assert!(same < 4096 / 128, "{same} equal bytes");
    }

    #[test]
    fn detects_a_single_flipped_byte_anywhere() {
        let p = Payload::new(42, 9);
        for offset in [0u64, 3, 8, 1001] {
            let mut buf = vec![0u8; 300];
            p.fill(offset, &mut buf);
            for i in 0..buf.len() {
                buf[i] ^= 0x10;
                assert_eq!(p.verify(offset, &buf), Err(offset + i as u64));
                buf[i] ^= 0x10;
            }
        }
    }

    #[test]
    fn any_shift_is_detected() {
        let p = Payload::new(9, 4);
        let mut buf = vec![0u8; 300];
        p.fill(0, &mut buf);
        for k in 1..64u64 {
            assert!(p.verify(k, &buf[..200]).is_err(), "shift by {k} undetected");
            assert!(p.verify(0, &buf[k as usize..k as usize + 200]).is_err());
        }
    }

    #[test]
    fn detects_missing_bytes() {
        // A gap in the stream shifts every later byte: verifying the data after the
        // gap at the expected offset fails at the gap.
        let p = Payload::new(5, 0);
        let mut buf = vec![0u8; 200];
        p.fill(0, &mut buf);
        let mut with_gap = buf[..50].to_vec();
        with_gap.extend_from_slice(&buf[51..]);
        assert_eq!(p.verify(0, &with_gap), Err(50));
    }

    fn stream(p: &Payload, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        p.fill(0, &mut buf);
        buf
    }

    #[test]
    fn verifier_accepts_a_stream_in_pieces() {
        let p = Payload::new(3, 1);
        let data = stream(&p, 1000);
        let mut v = Verifier::new(p, Some(1000));
        for piece in data.chunks(77) {
            v.consume(piece);
        }
        assert!(!v.complete_and_intact(), "no EOF yet");
        v.end_of_stream();
        assert!(v.complete_and_intact());
    }

    #[test]
    fn verifier_in_two_pieces_catches_one_flipped_or_misplaced_byte() {
        // The receiver checks the receive queue in place, in one or two slices
        // (`Stack::recv_with`): a single flipped byte, or two bytes swapped, is found
        // at its offset wherever the split falls.
        let p = Payload::new(11, 2);
        let data = stream(&p, 200);
        for split in [0usize, 1, 7, 8, 9, 63, 64, 65, 150, 200] {
            for at in [0usize, 5, 8, 63, 64, 100, 199] {
                let mut bad = data.clone();
                bad[at] ^= 0x01;
                let mut v = Verifier::new(p, None);
                v.consume(&bad[..split]);
                v.consume(&bad[split..]);
                assert_eq!(
                    v.first_error(),
                    Some(at as u64),
                    "flip at {at}, split {split}"
                );
                if at + 1 < data.len() && data[at] != data[at + 1] {
                    let mut swapped = data.clone();
                    swapped.swap(at, at + 1);
                    let mut v = Verifier::new(p, None);
                    v.consume(&swapped[..split]);
                    v.consume(&swapped[split..]);
                    assert_eq!(
                        v.first_error(),
                        Some(at as u64),
                        "swap at {at}, split {split}"
                    );
                }
            }
        }
    }

    #[test]
    fn verifier_flags_flip_missing_and_extra() {
        let p = Payload::new(3, 1);
        let mut data = stream(&p, 1001);
        let mut v = Verifier::new(p, Some(1000));
        v.consume(&data);
        v.end_of_stream();
        assert_eq!(v.first_error(), Some(1000), "extra byte");

        let mut v = Verifier::new(p, Some(1000));
        v.consume(&data[..999]);
        v.end_of_stream();
        assert_eq!(v.first_error(), Some(999), "missing byte at EOF");
        assert!(!v.complete_and_intact());

        data[500] ^= 1;
        let mut v = Verifier::new(p, None);
        v.consume(&data[..400]);
        v.consume(&data[400..]);
        assert_eq!(v.first_error(), Some(500), "flipped byte");
    }
}
