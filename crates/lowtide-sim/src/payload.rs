//! The payload every flow sends: each byte is a function of (run seed, flow, offset),
//! so the receiver can check any byte at any offset without keeping a copy.
//!
//! Byte `o` of flow `f` is byte `o % 8` (little-endian) of the 64-bit word
//! `TABLE[(o / 8 + rot) % 512] ^ mix(key ^ o / 4096)`: a fixed table of 512 random
//! words (4 KB, in L1) at a per-flow rotation `rot`, XORed with one constant per
//! 4 KB block of the stream (`key = splitmix64(seed ^ splitmix64(f))`, `mix` one
//! multiply and a fold). No two words of a block are alike and no two blocks or
//! flows share their constant, so a flipped, missing, extra or misplaced byte
//! shows; generating or checking a word is a load and an XOR (vectorized), so the
//! pattern costs about what a copy costs.

/// SplitMix64's output function (Steele, Lea, Flood 2014): a fast, well-mixed hash.
#[inline]
pub const fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Words per block of the stream (one block constant each): 4 KB.
const BLOCK_WORDS: usize = 512;

/// The table of words every block XORs its constant into, repeated twice so that
/// a block at any rotation is one contiguous slice.
static TABLE: [u64; 2 * BLOCK_WORDS] = table();

const fn table() -> [u64; 2 * BLOCK_WORDS] {
    let mut t = [0u64; 2 * BLOCK_WORDS];
    let mut i = 0;
    while i < BLOCK_WORDS {
        t[i] = splitmix64(0x6c6f_7774_6964_6521 ^ i as u64);
        t[i + BLOCK_WORDS] = t[i];
        i += 1;
    }
    t
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

    /// The flow's rotation of the table.
    #[inline(always)]
    fn rot(&self) -> usize {
        (self.key >> 55) as usize % BLOCK_WORDS
    }

    /// The constant of block `block` (stream words `512 * block ..`).
    #[inline(always)]
    fn block_const(&self, block: u64) -> u64 {
        let m = (self.key ^ block).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        m ^ (m >> 29)
    }

    /// The table words of stream words `index .. index + n` (within one block).
    #[inline(always)]
    fn table_run(&self, index: u64, n: usize) -> &'static [u64] {
        let at = (index as usize % BLOCK_WORDS + self.rot()) % BLOCK_WORDS;
        &TABLE[at..at + n]
    }

    /// The word at index `index` (stream offsets `8 * index ..`, little-endian).
    #[inline(always)]
    fn word_u64(&self, index: u64) -> u64 {
        self.table_run(index, 1)[0] ^ self.block_const(index / BLOCK_WORDS as u64)
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

    /// Calls `f(index, table words, block constant)` for the whole words from word
    /// `first` on, `words` of them, one block piece at a time.
    #[inline(always)]
    fn runs(&self, first: u64, words: usize, mut f: impl FnMut(usize, &[u64], u64)) {
        let mut done = 0;
        while done < words {
            let index = first + done as u64;
            let in_block = BLOCK_WORDS - (index as usize % BLOCK_WORDS);
            let n = in_block.min(words - done);
            let c = self.block_const(index / BLOCK_WORDS as u64);
            f(done, self.table_run(index, n), c);
            done += n;
        }
    }

    /// Fills `buf` with the stream bytes starting at `offset`.
    pub fn fill(&self, offset: u64, buf: &mut [u8]) {
        let head = head_len(offset, buf.len());
        for (i, b) in buf[..head].iter_mut().enumerate() {
            *b = self.byte_at(offset + i as u64);
        }
        let first = (offset + head as u64) / 8;
        let words = (buf.len() - head) / 8;
        let body = &mut buf[head..head + 8 * words];
        self.runs(first, words, |done, t, c| {
            let out = &mut body[8 * done..8 * (done + t.len())];
            for (o, w) in out.chunks_exact_mut(8).zip(t) {
                o.copy_from_slice(&(w ^ c).to_le_bytes());
            }
        });
        let w = self.word(first + words as u64);
        let rest = &mut buf[head + 8 * words..];
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
        let words = (data.len() - head) / 8;
        let body = &data[head..head + 8 * words];
        // XOR-accumulate without branching per word; locate on a miss.
        let mut bad = None;
        self.runs(base / 8, words, |done, t, c| {
            if bad.is_some() {
                return;
            }
            let got = &body[8 * done..8 * (done + t.len())];
            let mut diff = 0u64;
            for (g, w) in got.chunks_exact(8).zip(t) {
                diff |= u64::from_le_bytes(g.try_into().expect("8 bytes")) ^ w ^ c;
            }
            if diff != 0 {
                bad = Some(self.first_diff(base + 8 * done as u64, got));
            }
        });
        if let Some(at) = bad {
            return Err(at);
        }
        let rest = &data[head + 8 * words..];
        let w = self.word(base / 8 + words as u64);
        match rest.iter().zip(w).position(|(a, b)| *a != b) {
            Some(i) => Err(base + 8 * words as u64 + i as u64),
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

impl lowtide::PayloadSource for Payload {
    fn fill(&self, offset: u64, buf: &mut [u8]) {
        Payload::fill(self, offset, buf);
    }
}

/// How the senders hand their bytes to their sockets (`--payload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadMode {
    /// Each write copies its bytes into the socket's send queue, as `send(2)` does:
    /// the real data path.
    #[default]
    Stored,
    /// The sockets store no payload: each packet's bytes are made from the flow's
    /// [`Payload`] by the sending host's device when it takes the packet from its
    /// qdisc (and again for a retransmission; a queued packet holds its headers
    /// only), and checked by the reader as in the stored mode
    /// (`lowtide::SocketMut::set_payload_source`, `lowtide::Stack::make_tx_payload`).
    /// Every figure is the stored mode's; memory and speed differ.
    Pattern,
}

impl PayloadMode {
    /// The default, stored mode.
    pub fn is_stored(&self) -> bool {
        *self == PayloadMode::Stored
    }
}

impl core::str::FromStr for PayloadMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stored" => Ok(PayloadMode::Stored),
            "pattern" => Ok(PayloadMode::Pattern),
            _ => Err(format!("{s}: not a payload mode (stored, pattern)")),
        }
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
    fn shifts_by_whole_table_periods_are_detected() {
        // The table repeats every 4 KB: the block constants tell the periods apart.
        let p = Payload::new(9, 4);
        let buf = stream(&p, 5 * 4096);
        for k in [4096usize, 8192, 3 * 4096] {
            assert!(p.verify(k as u64, &buf[..4096]).is_err(), "shift by {k}");
            assert!(p.verify(0, &buf[k..k + 4096]).is_err(), "shift by -{k}");
        }
        // Another flow's bytes at the same offset are wrong everywhere.
        let q = Payload::new(9, 5);
        assert_eq!(q.verify(4096, &buf[4096..8192]), Err(4096));
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
