//! The TCP header
//! ([RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1)) and its
//! options.

use crate::ip::IpRepr;
use crate::WireError;
use std::net::SocketAddr;

/// TCP header flags: the twelve bits after the data offset, as Linux's
/// `tcp_flag_word` has them (`TCPHDR_*`, include/net/tcp.h): the low byte CWR ECE URG
/// ACK PSH RST SYN FIN, then AE (bit 8, Accurate ECN) and the three reserved bits
/// (`th->res1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct TcpFlags(pub u16);

impl TcpFlags {
    /// No more data from sender.
    pub const FIN: TcpFlags = TcpFlags(0x01);
    /// Synchronize sequence numbers.
    pub const SYN: TcpFlags = TcpFlags(0x02);
    /// Reset the connection.
    pub const RST: TcpFlags = TcpFlags(0x04);
    /// Push function.
    pub const PSH: TcpFlags = TcpFlags(0x08);
    /// Acknowledgment field is significant.
    pub const ACK: TcpFlags = TcpFlags(0x10);
    /// Urgent pointer field is significant.
    pub const URG: TcpFlags = TcpFlags(0x20);
    /// ECN-Echo (RFC 3168).
    pub const ECE: TcpFlags = TcpFlags(0x40);
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: TcpFlags = TcpFlags(0x80);
    /// Accurate ECN, the header's bit 8 (`TCPHDR_AE`, `th->ae`;
    /// [RFC 9768](https://www.rfc-editor.org/rfc/rfc9768), formerly the ECN-nonce's
    /// NS bit of RFC 3540).
    pub const AE: TcpFlags = TcpFlags(0x100);
    /// The three bits still reserved (`th->res1`, bits 9 to 11 of the flags field;
    /// [RFC 8311 section 4.3](https://www.rfc-editor.org/rfc/rfc8311#section-4.3)).
    pub const RES1: TcpFlags = TcpFlags(0xE00);
    /// The ACE field of AccECN: AE, CWR and ECE (`TCPHDR_ACE`).
    pub const ACE: TcpFlags = TcpFlags(0x1C0);

    /// True if every flag in `other` is set.
    pub fn contains(self, other: TcpFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// True if any flag in `other` is set.
    pub fn intersects(self, other: TcpFlags) -> bool {
        self.0 & other.0 != 0
    }
    /// These flags with every flag in `other` cleared.
    pub fn without(self, other: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 & !other.0)
    }
}

impl core::ops::BitOr for TcpFlags {
    type Output = TcpFlags;
    fn bitor(self, rhs: TcpFlags) -> TcpFlags {
        TcpFlags(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for TcpFlags {
    fn bitor_assign(&mut self, rhs: TcpFlags) {
        self.0 |= rhs.0;
    }
}

/// One SACK block (RFC 2018): `[start, end)` in sequence space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlock {
    /// Left edge: first sequence number of the block.
    pub start: u32,
    /// Right edge: sequence number just past the block.
    pub end: u32,
}

/// The options lowtide understands. Unknown options are skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOptions {
    /// Maximum segment size (kind 2), SYN only.
    pub mss: Option<u16>,
    /// Window scale shift (kind 3), SYN only; values above 14 are kept as sent
    /// ([RFC 7323 section 2.3](https://www.rfc-editor.org/rfc/rfc7323#section-2.3) says the
    /// receiver clamps them to 14).
    pub wscale: Option<u8>,
    /// SACK permitted (kind 4), SYN only.
    pub sack_permitted: bool,
    /// Timestamps (kind 8): (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (kind 5), the first `sack_len` entries are valid.
    pub sack: [SackBlock; 4],
    /// Number of valid SACK blocks (0..=4).
    pub sack_len: u8,
    /// TCP Fast Open (RFC 7413): option 34, or the experimental kind 254 with magic
    /// 0xF989; SYN and SYN-ACK only (`tcp_parse_fastopen_option`).
    pub fastopen: Option<FastOpenOption>,
    /// The authentication options (TCP-MD5, TCP-AO) as Linux's
    /// `tcp_parse_auth_options` finds them; received only, never written.
    pub auth: AuthOption,
    /// The digest of a TCP-MD5 option of the right length
    /// (`tcp_parse_md5sig_option`), whatever `auth` says. Written first, as
    /// `NOP NOP 19 18` and the 16 bytes (`tcp_options_write`'s `OPTION_MD5`): the
    /// sender fills the digest in once the segment is built
    /// ([RFC 2385 section 3.0](https://www.rfc-editor.org/rfc/rfc2385#section-3.0)).
    pub md5sig: Option<[u8; 16]>,
    /// The Accurate ECN option (kind 172 or 174), the last one in the header
    /// (`tcp_parse_options` keeps its offset, `opt_rx->accecn`).
    pub accecn: Option<AccEcnOption>,
}

/// `TCPOPT_ACCECN0`: the AccECN option with its byte counters in order 0, ECT(0),
/// CE, ECT(1) ([RFC 9768 section 3.2.3](https://www.rfc-editor.org/rfc/rfc9768#section-3.2.3)).
pub const TCPOPT_ACCECN0: u8 = 172;
/// `TCPOPT_ACCECN1`: order 1, ECT(1), CE, ECT(0) (the kind Linux sends).
pub const TCPOPT_ACCECN1: u8 = 174;
/// `TCPOLEN_ACCECN_BASE`: kind and length.
pub const TCPOLEN_ACCECN_BASE: usize = 2;
/// `TCPOLEN_ACCECN_PERFIELD`: one 24-bit byte counter.
pub const TCPOLEN_ACCECN_PERFIELD: usize = 3;
/// `TCP_ACCECN_NUMFIELDS`.
pub const TCP_ACCECN_NUMFIELDS: usize = 3;

/// An Accurate ECN option: up to three 24-bit counters of payload bytes received
/// per ECN codepoint. As Linux reads one (`tcp_accecn_process_option`,
/// `tcp_accecn_option_init`), any length from 2 is taken, its whole 3-byte fields
/// (at most 3) read and the rest ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccEcnOption {
    /// Kind 174, fields in order ECT(1), CE, ECT(0); else kind 172: ECT(0), CE,
    /// ECT(1).
    pub order1: bool,
    /// The number of fields, 0 to 3.
    pub fields: u8,
    /// The fields' values as sent (with the counters' initial offsets), in the
    /// option's order; those past `fields` are 0.
    pub counters: [u32; 3],
}

impl AccEcnOption {
    /// The option's own length (its length byte).
    pub fn len(&self) -> usize {
        TCPOLEN_ACCECN_BASE + self.fields.min(3) as usize * TCPOLEN_ACCECN_PERFIELD
    }

    /// Whether it has no field (an empty option, 2 bytes).
    pub fn is_empty(&self) -> bool {
        self.fields == 0
    }

    /// The bytes it takes in a header laid out as Linux's `tcp_options_write`
    /// lays it out, given how many bytes of other options' alignment it may fill
    /// (`max_combine_saving`: 2 before SACK blocks or a lone SACK-permitted, 1
    /// before the window scale, else 0): `tcp_options_fit_accecn`'s size.
    pub fn aligned_len(&self, max_combine_saving: usize) -> usize {
        let size = self.len();
        if size & 3 > max_combine_saving {
            (size + 3) & !3
        } else {
            size & !3
        }
    }
}

/// `TCPOPT_MD5SIG`: the TCP-MD5 signature option's kind
/// ([RFC 2385 section 3.0](https://www.rfc-editor.org/rfc/rfc2385#section-3.0)).
pub const TCPOPT_MD5SIG: u8 = 19;
/// `TCPOLEN_MD5SIG`: its length.
pub const TCPOLEN_MD5SIG: usize = 18;
/// `TCPOLEN_MD5SIG_ALIGNED`: the option with its two NOPs.
pub const TCPOLEN_MD5SIG_ALIGNED: usize = 20;
/// Where `emit` puts the TCP-MD5 digest in the header: after the fixed header and
/// `NOP NOP 19 18`.
pub const MD5SIG_DIGEST_OFFSET: usize = TCP_HEADER_LEN + 4;
/// `TCPOPT_AO`: the TCP Authentication Option's kind
/// ([RFC 5925 section 2.2](https://www.rfc-editor.org/rfc/rfc5925#section-2.2)).
pub const TCPOPT_AO: u8 = 29;

/// What `tcp_do_parse_auth_options` (include/net/tcp.h) makes of a header's
/// authentication options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthOption {
    /// None.
    #[default]
    None,
    /// One TCP-MD5 option.
    Md5,
    /// One TCP-AO option.
    Ao,
    /// A TCP-MD5 option of another length than 18, a TCP-AO one of 4 bytes or
    /// fewer, an option whose length is below 2 or beyond the header, or a second
    /// authentication option: the segment is dropped (`SKB_DROP_REASON_TCP_AUTH_HDR`).
    Bad,
}

/// `TCPOPT_FASTOPEN`: the Fast Open option's kind
/// ([RFC 7413 section 4.1.1](https://www.rfc-editor.org/rfc/rfc7413#section-4.1.1)).
pub const TCPOPT_FASTOPEN: u8 = 34;
/// `TCPOPT_EXP`: the experimental option kind (RFC 6994).
pub const TCPOPT_EXP: u8 = 254;
/// `TCPOPT_FASTOPEN_MAGIC`: the experiment id of Fast Open under kind 254.
pub const TCPOPT_FASTOPEN_MAGIC: u16 = 0xF989;
/// `TCP_FASTOPEN_COOKIE_MIN`.
pub const TCP_FASTOPEN_COOKIE_MIN: usize = 4;
/// `TCP_FASTOPEN_COOKIE_MAX`.
pub const TCP_FASTOPEN_COOKIE_MAX: usize = 16;

/// A Fast Open option: a cookie of 4 to 16 bytes (even), or a cookie request
/// (`len == 0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastOpenOption {
    /// Sent as the experimental option (kind 254, magic 0xF989) instead of kind 34.
    pub exp: bool,
    /// Cookie length in bytes; 0 is a cookie request.
    pub len: u8,
    /// The cookie's bytes (the first `len`).
    pub val: [u8; TCP_FASTOPEN_COOKIE_MAX],
}

impl FastOpenOption {
    /// A cookie request (an empty cookie).
    pub fn request(exp: bool) -> FastOpenOption {
        FastOpenOption {
            exp,
            ..FastOpenOption::default()
        }
    }

    /// An option carrying `cookie` (the first 16 bytes at most).
    pub fn cookie(exp: bool, cookie: &[u8]) -> FastOpenOption {
        let n = cookie.len().min(TCP_FASTOPEN_COOKIE_MAX);
        let mut val = [0u8; TCP_FASTOPEN_COOKIE_MAX];
        val[..n].copy_from_slice(&cookie[..n]);
        FastOpenOption {
            exp,
            len: n as u8,
            val,
        }
    }

    /// The cookie's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.val[..self.len as usize]
    }

    /// Bytes the option takes on the wire, padded to 4 (`tcp_syn_options`' `need`).
    pub fn wire_len(&self) -> usize {
        (self.unpadded_len() + 3) & !3
    }

    fn unpadded_len(&self) -> usize {
        self.len as usize + if self.exp { 4 } else { 2 }
    }
}

impl TcpOptions {
    /// The valid SACK blocks.
    pub fn sack_blocks(&self) -> &[SackBlock] {
        &self.sack[..self.sack_len as usize]
    }
}

/// A parsed TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags.
    pub flags: TcpFlags,
    /// Window field, unscaled as on the wire.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options.
    pub options: TcpOptions,
}

/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

impl TcpRepr {
    /// Parses a TCP header at the start of `segment` (TCP header followed by payload).
    /// Returns the header and the header length (data offset * 4); the payload is
    /// `&segment[header_len..]`. Does not verify the checksum (see
    /// [`crate::checksum`]). A data offset below 5 or past the segment, or an option
    /// whose length is below 2 or runs past the header, is `Malformed`; known options
    /// with an unexpected length are ignored as Linux's `tcp_parse_options` does.
    pub fn parse(segment: &[u8]) -> Result<(TcpRepr, usize), WireError> {
        if segment.len() < TCP_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let header_len = data_offset(segment);
        if header_len < TCP_HEADER_LEN || header_len > segment.len() {
            return Err(WireError::Malformed);
        }
        let repr = TcpRepr {
            src_port: be16(segment, 0),
            dst_port: be16(segment, 2),
            seq: be32(segment, 4),
            ack: be32(segment, 8),
            flags: TcpFlags(u16::from(segment[12] & 0x0F) << 8 | u16::from(segment[13])),
            window: be16(segment, 14),
            urgent: be16(segment, 18),
            options: parse_options(&segment[TCP_HEADER_LEN..header_len])?,
        };
        let mut repr = repr;
        // tcp_parse_fastopen_option: valid only in a SYN or SYN-ACK.
        if !repr.flags.contains(TcpFlags::SYN) {
            repr.options.fastopen = None;
        }
        Ok((repr, header_len))
    }

    /// Length of the header `emit` writes, options included, padded to 4 bytes.
    pub fn header_len(&self) -> usize {
        let o = self.emitted_options();
        TCP_HEADER_LEN + options_len(&o, self.emitted_sack_blocks())
    }

    /// How many SACK blocks `emit` writes: the first `sack_len` (at most 4), fewer if
    /// they would not fit in the 40 bytes of option space with the other options.
    pub fn emitted_sack_blocks(&self) -> usize {
        let o = self.emitted_options();
        let mut n = (o.sack_len as usize).min(4);
        while n > 0 && options_len(&o, n) > MAX_OPTIONS_LEN {
            n -= 1;
        }
        n
    }

    /// The AccECN option `emit` writes: `options.accecn` with its last fields
    /// dropped while it would not fit in the 40 bytes with the other options (SACK
    /// blocks aside, which yield to it), none if even an empty one does not. A
    /// sender that sizes it as Linux's `tcp_options_fit_accecn` never has it cut.
    pub fn emitted_accecn(&self) -> Option<AccEcnOption> {
        let mut o = self.options;
        let mut a = o.accecn?;
        a.fields = a.fields.min(TCP_ACCECN_NUMFIELDS as u8);
        loop {
            o.accecn = Some(a);
            if options_len(&o, 0) <= MAX_OPTIONS_LEN {
                return Some(a);
            }
            if a.fields == 0 {
                return None;
            }
            a.fields -= 1;
            a.counters[a.fields as usize] = 0;
        }
    }

    /// The options as `emit` lays them out (the AccECN option as
    /// [`TcpRepr::emitted_accecn`]).
    fn emitted_options(&self) -> TcpOptions {
        TcpOptions {
            accecn: self.emitted_accecn(),
            ..self.options
        }
    }

    /// Writes the header and options into `buf[..self.header_len()]`, with the
    /// checksum field set to zero. Option layout follows Linux (`tcp_options_write`):
    /// MSS, then SACK-permitted+timestamps packed (`NOP NOP TS` or `SACKOK TS`),
    /// NOP+wscale, NOP NOP + SACK blocks.
    ///
    /// SACK blocks that do not fit are dropped from the end (see
    /// [`TcpRepr::emitted_sack_blocks`]). Panics if `buf` is shorter than
    /// `header_len()`.
    pub fn emit(&self, buf: &mut [u8]) {
        let len = self.header_len();
        let buf = &mut buf[..len];
        buf[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        buf[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        buf[4..8].copy_from_slice(&self.seq.to_be_bytes());
        buf[8..12].copy_from_slice(&self.ack.to_be_bytes());
        buf[12] = ((len / 4) as u8) << 4 | (self.flags.0 >> 8) as u8 & 0x0F;
        buf[13] = self.flags.0 as u8;
        buf[14..16].copy_from_slice(&self.window.to_be_bytes());
        buf[16..18].fill(0);
        buf[18..20].copy_from_slice(&self.urgent.to_be_bytes());
        let n = self.emitted_sack_blocks();
        write_options(&self.emitted_options(), n, &mut buf[TCP_HEADER_LEN..]);
    }
}

/// The (source, destination) socket addresses of an IP + TCP packet, read without
/// parsing TCP options or verifying checksums (e.g. to find the connection quickly).
pub fn four_tuple(packet: &[u8]) -> Result<(SocketAddr, SocketAddr), WireError> {
    four_tuple_apart(packet, 0)
}

/// [`four_tuple`] of a packet whose last `apart` bytes are kept apart from `headers`
/// (see [`IpRepr::parse_apart`]).
pub fn four_tuple_apart(
    headers: &[u8],
    apart: usize,
) -> Result<(SocketAddr, SocketAddr), WireError> {
    let ip = IpRepr::parse_apart(headers, apart, false)?;
    let end = (ip.header_len + ip.payload_len).min(headers.len());
    let tcp = &headers[ip.header_len..end];
    if tcp.len() < TCP_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let src = SocketAddr::new(ip.src, be16(tcp, 0));
    Ok((src, SocketAddr::new(ip.dst, be16(tcp, 2))))
}

/// Option kinds
/// ([RFC 9293 section 3.1](https://www.rfc-editor.org/rfc/rfc9293#section-3.1), RFC 7323,
/// RFC 2018).
mod kind {
    pub const EOL: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WSCALE: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// Most option bytes a header can carry (data offset 15 words).
pub const MAX_OPTIONS_LEN: usize = 40;
/// Longest TCP header.
pub const MAX_TCP_HEADER_LEN: usize = TCP_HEADER_LEN + MAX_OPTIONS_LEN;

/// Reads a big-endian `u16` at `at` (caller checked the length).
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian `u32` at `at` (caller checked the length).
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Header length claimed by the data offset field (caller checked `len >= 13`).
fn data_offset(segment: &[u8]) -> usize {
    (segment[12] >> 4) as usize * 4
}

/// Walks the option bytes
/// ([RFC 9293 section 3.2](https://www.rfc-editor.org/rfc/rfc9293#section-3.2)) like
/// Linux's `tcp_parse_options`.
fn parse_options(mut opts: &[u8]) -> Result<TcpOptions, WireError> {
    let mut out = TcpOptions {
        auth: parse_auth_options(opts),
        md5sig: parse_md5sig_option(opts),
        ..TcpOptions::default()
    };
    while let Some(&k) = opts.first() {
        match k {
            kind::EOL => break,
            kind::NOP => opts = &opts[1..],
            _ => {
                let len = *opts.get(1).ok_or(WireError::Malformed)? as usize;
                if len < 2 || len > opts.len() {
                    return Err(WireError::Malformed);
                }
                apply_option(&mut out, k, &opts[2..len]);
                opts = &opts[len..];
            }
        }
    }
    Ok(out)
}

/// `tcp_do_parse_auth_options`, walking as Linux walks: only while at least
/// `TCPOLEN_MD5SIG` bytes are left (a kernel without `CONFIG_TCP_AO`, as this
/// machine's; with it the bound is 5), stopping at EOL.
fn parse_auth_options(mut opts: &[u8]) -> AuthOption {
    let mut found = AuthOption::None;
    while opts.len() >= TCPOLEN_MD5SIG {
        match opts[0] {
            kind::EOL => break,
            kind::NOP => opts = &opts[1..],
            k => {
                let size = opts[1] as usize;
                if size < 2 || size > opts.len() {
                    return AuthOption::Bad;
                }
                let this = match k {
                    TCPOPT_MD5SIG if size != TCPOLEN_MD5SIG => return AuthOption::Bad,
                    TCPOPT_MD5SIG => AuthOption::Md5,
                    TCPOPT_AO if size <= 4 => return AuthOption::Bad,
                    TCPOPT_AO => AuthOption::Ao,
                    _ => AuthOption::None,
                };
                if this != AuthOption::None {
                    if found != AuthOption::None {
                        return AuthOption::Bad; // -EEXIST
                    }
                    found = this;
                }
                opts = &opts[size..];
            }
        }
    }
    found
}

/// `tcp_parse_md5sig_option`: the digest of a TCP-MD5 option of 18 bytes, the
/// walk bounded as [`parse_auth_options`]'s.
fn parse_md5sig_option(mut opts: &[u8]) -> Option<[u8; 16]> {
    while opts.len() >= TCPOLEN_MD5SIG {
        match opts[0] {
            kind::EOL => return None,
            kind::NOP => opts = &opts[1..],
            k => {
                let size = opts[1] as usize;
                if size < 2 || size > opts.len() {
                    return None;
                }
                if k == TCPOPT_MD5SIG {
                    return (size == TCPOLEN_MD5SIG).then(|| {
                        let mut d = [0u8; 16];
                        d.copy_from_slice(&opts[2..TCPOLEN_MD5SIG]);
                        d
                    });
                }
                opts = &opts[size..];
            }
        }
    }
    None
}

/// Records one option; known kinds with an unexpected length are ignored.
fn apply_option(out: &mut TcpOptions, k: u8, body: &[u8]) {
    match (k, body.len()) {
        (kind::MSS, 2) => out.mss = Some(be16(body, 0)),
        (kind::WSCALE, 1) => out.wscale = Some(body[0]),
        (kind::SACK_PERMITTED, 0) => out.sack_permitted = true,
        (kind::TIMESTAMP, 8) => out.timestamp = Some((be32(body, 0), be32(body, 4))),
        // RFC 2018 section 3: 8 bytes per block, at least one.
        (kind::SACK, n) if n >= 8 && n % 8 == 0 => parse_sack(out, body),
        (TCPOPT_FASTOPEN, _) => parse_fastopen(out, body, false),
        (TCPOPT_ACCECN0 | TCPOPT_ACCECN1, n) => {
            let fields = (n / TCPOLEN_ACCECN_PERFIELD).min(TCP_ACCECN_NUMFIELDS);
            let mut counters = [0u32; 3];
            for (i, c) in counters.iter_mut().enumerate().take(fields) {
                let f = &body[i * TCPOLEN_ACCECN_PERFIELD..];
                *c = u32::from_be_bytes([0, f[0], f[1], f[2]]);
            }
            out.accecn = Some(AccEcnOption {
                order1: k == TCPOPT_ACCECN1,
                fields: fields as u8,
                counters,
            });
        }
        (TCPOPT_EXP, n) if n >= 2 && be16(body, 0) == TCPOPT_FASTOPEN_MAGIC => {
            parse_fastopen(out, &body[2..], true)
        }
        _ => {}
    }
}

/// `tcp_parse_fastopen_option`: an even length of 0 (a request) or 4..=16 is a
/// cookie; another even length leaves no cookie; an odd one is ignored.
fn parse_fastopen(out: &mut TcpOptions, cookie: &[u8], exp: bool) {
    let len = cookie.len();
    if len & 1 != 0 {
        return;
    }
    out.fastopen = match len {
        0 | TCP_FASTOPEN_COOKIE_MIN..=TCP_FASTOPEN_COOKIE_MAX => {
            Some(FastOpenOption::cookie(exp, cookie))
        }
        _ => None,
    };
}

/// Takes the first (at most 4) SACK blocks; a 40-byte option space holds no more.
fn parse_sack(out: &mut TcpOptions, body: &[u8]) {
    out.sack = [SackBlock::default(); 4];
    let mut n = 0;
    for (slot, b) in out.sack.iter_mut().zip(body.chunks_exact(8)) {
        *slot = SackBlock {
            start: be32(b, 0),
            end: be32(b, 4),
        };
        n += 1;
    }
    out.sack_len = n;
}

/// Bytes of every option except SACK blocks and AccECN, as `write_options` lays
/// them out.
fn fixed_options_len(o: &TcpOptions) -> usize {
    let mss = if o.mss.is_some() { 4 } else { 0 };
    let ts = if o.timestamp.is_some() { 12 } else { 0 };
    // With timestamps, SACK-permitted replaces the two NOPs before TS.
    let sackok = if o.sack_permitted && o.timestamp.is_none() {
        4
    } else {
        0
    };
    let ws = if o.wscale.is_some() { 4 } else { 0 };
    let fo = o.fastopen.map_or(0, |f| f.wire_len());
    let md5 = if o.md5sig.is_some() {
        TCPOLEN_MD5SIG_ALIGNED
    } else {
        0
    };
    md5 + mss + ts + sackok + ws + fo
}

/// The bytes the AccECN option adds, its leftover bytes filling the alignment of
/// the option after it (`tcp_options_write`'s `leftover_highbyte`/`_lowbyte`): the
/// two NOPs of a lone SACK-permitted or of SACK blocks (`sack`: some will be
/// written), else the NOP before the window scale if one byte is left.
fn accecn_len(o: &TcpOptions, sack: bool) -> usize {
    let Some(a) = o.accecn else {
        return 0;
    };
    let saving = match (o.sack_permitted && o.timestamp.is_none()) || sack {
        true => 2,
        false => o.wscale.map_or(0, |_| 1),
    };
    a.aligned_len(saving)
}

/// Bytes of every option with `sack_blocks` SACK blocks written.
fn options_len(o: &TcpOptions, sack_blocks: usize) -> usize {
    fixed_options_len(o) + accecn_len(o, sack_blocks > 0) + sack_option_len(sack_blocks)
}

/// Bytes of a `NOP NOP SACK` option with `n` blocks (0 if none).
fn sack_option_len(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        4 + 8 * n
    }
}

/// Writes the options in Linux's order (`tcp_options_write`: TCP-MD5 first); every
/// piece is a multiple of 4 bytes, so no trailing padding is needed. The AccECN
/// option comes after the timestamps; what of it does not fill whole words (its
/// kind and length when empty, the last byte of a 1-field one) takes the place of
/// the NOPs before a lone SACK-permitted or the SACK blocks, or of the NOP before
/// the window scale (one byte only), else a word of its own with NOPs.
fn write_options(o: &TcpOptions, sack_blocks: usize, buf: &mut [u8]) {
    let mut w = Writer { buf, at: 0 };
    // leftover_highbyte / leftover_lowbyte, and how many of them are the option's.
    let mut left: (u8, u8, usize) = (kind::NOP, kind::NOP, 0);
    if let Some(digest) = o.md5sig {
        w.put(&[kind::NOP, kind::NOP, TCPOPT_MD5SIG, TCPOLEN_MD5SIG as u8]);
        w.put(&digest);
    }
    if let Some(mss) = o.mss {
        w.put(&[kind::MSS, 4]);
        w.put(&mss.to_be_bytes());
    }
    if let Some((val, ecr)) = o.timestamp {
        if o.sack_permitted {
            w.put(&[kind::SACK_PERMITTED, 2]);
        } else {
            w.put(&[kind::NOP, kind::NOP]);
        }
        w.put(&[kind::TIMESTAMP, 10]);
        w.put(&val.to_be_bytes());
        w.put(&ecr.to_be_bytes());
    }
    if let Some(a) = o.accecn {
        let kind = if a.order1 {
            TCPOPT_ACCECN1
        } else {
            TCPOPT_ACCECN0
        };
        let [_, f0a, f0b, f0c] = a.counters[0].to_be_bytes();
        let [_, f1a, f1b, f1c] = a.counters[1].to_be_bytes();
        let [_, f2a, f2b, f2c] = a.counters[2].to_be_bytes();
        let len = a.len() as u8;
        match a.fields.min(3) {
            0 => left = (kind, len, 2),
            1 => {
                w.put(&[kind, len, f0a, f0b]);
                left = (f0c, kind::NOP, 1);
            }
            2 => w.put(&[kind, len, f0a, f0b, f0c, f1a, f1b, f1c]),
            _ => w.put(&[
                kind,
                len,
                f0a,
                f0b,
                f0c,
                f1a,
                f1b,
                f1c,
                f2a,
                f2b,
                f2c,
                kind::NOP,
            ]),
        }
    }
    if o.sack_permitted && o.timestamp.is_none() {
        w.put(&[left.0, left.1, kind::SACK_PERMITTED, 2]);
        left = (kind::NOP, kind::NOP, 0);
    }
    if let Some(ws) = o.wscale {
        let mut high = kind::NOP;
        if left.2 == 1 {
            high = left.0;
            left = (kind::NOP, kind::NOP, 0);
        }
        w.put(&[high, kind::WSCALE, 3, ws]);
    }
    if sack_blocks > 0 {
        w.put(&[
            left.0,
            left.1,
            kind::SACK,
            sack_option_len(sack_blocks) as u8 - 2,
        ]);
        for b in &o.sack[..sack_blocks] {
            w.put(&b.start.to_be_bytes());
            w.put(&b.end.to_be_bytes());
        }
    } else if left.2 > 0 {
        w.put(&[left.0, left.1, kind::NOP, kind::NOP]);
    }
    // tcp_options_write: the Fast Open cookie last, NOP-padded to 4 bytes.
    if let Some(f) = o.fastopen {
        let len = f.unpadded_len() as u8;
        if f.exp {
            w.put(&[TCPOPT_EXP, len]);
            w.put(&TCPOPT_FASTOPEN_MAGIC.to_be_bytes());
        } else {
            w.put(&[TCPOPT_FASTOPEN, len]);
        }
        w.put(f.bytes());
        for _ in f.unpadded_len()..f.wire_len() {
            w.put(&[kind::NOP]);
        }
    }
}

/// A cursor over the option bytes being written.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.buf[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn without_clears_only_the_flags_named() {
        let f = TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE | TcpFlags::CWR | TcpFlags::AE;
        assert_eq!(
            f.without(TcpFlags::ECE | TcpFlags::CWR),
            TcpFlags::SYN | TcpFlags::ACK | TcpFlags::AE
        );
        assert_eq!(f.without(TcpFlags::RES1), f);
        assert_eq!(f.without(f), TcpFlags::default());
    }

    /// An MD5 option (kind 19, 18 bytes) after `pre` bytes of NOPs.
    fn md5_after(pre: usize) -> Vec<u8> {
        let mut o = vec![1u8; pre];
        o.extend_from_slice(&[TCPOPT_MD5SIG, 18]);
        o.extend_from_slice(&[7u8; 16]);
        o
    }

    /// tcp_do_parse_auth_options: one MD5 or AO option; a second one, an MD5
    /// option of another length, a short AO one or a bad length is Bad; fewer
    /// than 18 bytes left end the walk.
    #[test]
    fn auth_options_as_linux_walks_them() {
        let p = |o: &[u8]| parse_options(o).map(|t| (t.auth, t.md5sig.is_some()));
        assert_eq!(p(&md5_after(2)), Ok((AuthOption::Md5, true)));
        assert_eq!(p(&[1, 1, 2, 4, 5, 180]), Ok((AuthOption::None, false)));
        let mut two = md5_after(0);
        two.extend_from_slice(&md5_after(0));
        assert_eq!(p(&two).map(|x| x.0), Ok(AuthOption::Bad), "-EEXIST");
        let mut ao = vec![TCPOPT_AO, 18, 1, 1];
        ao.extend_from_slice(&[0u8; 14]);
        assert_eq!(p(&ao), Ok((AuthOption::Ao, false)));
        ao.extend_from_slice(&md5_after(2));
        assert_eq!(p(&ao), Ok((AuthOption::Bad, true)), "AO then MD5");
        let mut short_ao = vec![TCPOPT_AO, 4, 1, 1];
        short_ao.extend_from_slice(&[1u8; 16]);
        assert_eq!(p(&short_ao).map(|x| x.0), Ok(AuthOption::Bad));
        // An MD5 option of 10 bytes: Bad, and tcp_parse_md5sig_option finds none.
        let mut md5_10 = vec![TCPOPT_MD5SIG, 10];
        md5_10.extend_from_slice(&[1u8; 16]);
        assert_eq!(p(&md5_10), Ok((AuthOption::Bad, false)));
        // Linux stops with fewer than TCPOLEN_MD5SIG bytes left.
        assert_eq!(
            p(&[1, 1, 1, 1, TCPOPT_AO, 4, 0, 0]),
            Ok((AuthOption::None, false))
        );
        assert_eq!(
            parse_options(&md5_after(2)).unwrap().md5sig,
            Some([7u8; 16])
        );
    }

    fn acc(fields: u8, counters: [u32; 3]) -> Option<AccEcnOption> {
        Some(AccEcnOption {
            order1: true,
            fields,
            counters,
        })
    }

    /// tcp_parse_options keeps the last AccECN option of either kind and any length
    /// from 2; tcp_accecn_process_option reads its whole 3-byte fields, at most 3.
    #[test]
    fn accecn_option_parse_as_linux_reads_it() {
        let p = |o: &[u8]| parse_options(o).expect("parses").accecn;
        assert_eq!(p(&[174, 2, 1, 1]), acc(0, [0; 3]));
        assert_eq!(p(&[174, 5, 0, 0, 1]), acc(1, [1, 0, 0]));
        assert_eq!(
            p(&[172, 11, 0, 0, 9, 0, 0, 0, 0, 1, 2, 1]),
            Some(AccEcnOption {
                order1: false,
                fields: 3,
                counters: [9, 0, 0x102],
            })
        );
        // A partial field is ignored; more than 3 fields read 3.
        assert_eq!(p(&[174, 7, 0, 0, 1, 0, 0]), acc(1, [1, 0, 0]));
        let mut long = vec![174, 14];
        long.extend_from_slice(&[0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 4]);
        assert_eq!(p(&long), acc(3, [1, 2, 3]));
        // The last one counts; a length below 2 or past the header is malformed.
        assert_eq!(
            p(&[174, 2, 172, 5, 0, 0, 7, 1]).map(|a| a.order1),
            Some(false)
        );
        assert!(parse_options(&[174, 1]).is_err());
        assert!(parse_options(&[174, 9, 0, 0, 1]).is_err());
    }

    /// tcp_options_write's layouts, and tcp_options_fit_accecn's sizes: after the
    /// timestamps, 3 fields take 12 bytes (a NOP after them), 2 fields 8; a 1-field
    /// option's last byte and an empty option's kind and length fill the NOPs of the
    /// SACK blocks (or of a lone SACK-permitted), one byte that of the window
    /// scale; otherwise they take a word of their own.
    #[test]
    fn accecn_option_layouts_as_tcp_options_write() {
        let opts = |r: &TcpRepr| emitted(r)[TCP_HEADER_LEN..].to_vec();
        let mut r = base();
        r.options.timestamp = Some((1, 2));
        r.options.accecn = acc(3, [1, 0, 0x10001]);
        assert_eq!(
            &opts(&r)[12..],
            [174, 11, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1],
            "e1b ceb e0b, NOP"
        );
        r.options.accecn = acc(2, [1, 5, 0]);
        assert_eq!(&opts(&r)[12..], [174, 8, 0, 0, 1, 0, 0, 5]);
        r.options.sack = [SackBlock { start: 7, end: 9 }; 4];
        r.options.sack_len = 1;
        r.options.accecn = acc(1, [0x20304, 0, 0]);
        assert_eq!(
            &opts(&r)[12..],
            [174, 5, 2, 3, 4, 1, 5, 10, 0, 0, 0, 7, 0, 0, 0, 9],
            "the last byte in the SACK option's first NOP"
        );
        r.options.accecn = acc(0, [0; 3]);
        assert_eq!(
            &opts(&r)[12..16],
            [174, 2, 5, 10],
            "kind and length for both"
        );
        r.options.sack_len = 0;
        assert_eq!(&opts(&r)[12..], [174, 2, 1, 1], "a word of its own");
        // A SYN-ACK without timestamps: SACK-permitted's NOPs, the window scale's.
        let mut syn = base();
        syn.options.mss = Some(1460);
        syn.options.sack_permitted = true;
        syn.options.wscale = Some(7);
        syn.options.accecn = acc(0, [0; 3]);
        assert_eq!(opts(&syn), [2, 4, 5, 180, 174, 2, 4, 2, 1, 3, 3, 7]);
        syn.options.sack_permitted = false;
        syn.options.accecn = acc(1, [1, 0, 0]);
        assert_eq!(opts(&syn), [2, 4, 5, 180, 174, 5, 0, 0, 1, 3, 3, 7]);
        syn.options.accecn = acc(0, [0; 3]);
        assert_eq!(
            opts(&syn),
            [2, 4, 5, 180, 1, 3, 3, 7, 174, 2, 1, 1],
            "two bytes do not fit the window scale's one NOP"
        );
        // SACK blocks yield to the option: 12 TS + 12 AccECN leave room for 1 block.
        r.options.accecn = acc(3, [1, 0, 1]);
        r.options.sack_len = 4;
        assert_eq!(r.emitted_sack_blocks(), 1);
        assert_eq!(r.header_len(), TCP_HEADER_LEN + 12 + 12 + 12);
        // Fields that do not fit beside the other options are dropped from the end.
        let mut full = base();
        full.flags = TcpFlags::SYN;
        full.options.mss = Some(1460);
        full.options.timestamp = Some((1, 2));
        full.options.wscale = Some(7);
        full.options.fastopen = Some(FastOpenOption::cookie(false, &[9; 8]));
        full.options.accecn = acc(3, [1, 2, 3]);
        assert_eq!(full.emitted_accecn(), acc(2, [1, 2, 0]));
        assert_eq!(full.header_len(), TCP_HEADER_LEN + 40);
        let (again, _) = TcpRepr::parse(&emitted(&full)).expect("parses");
        assert_eq!(again.options.accecn, acc(2, [1, 2, 0]));
    }

    /// tcp_options_write: the TCP-MD5 option goes first, `NOP NOP 19 18` and the
    /// digest at [`MD5SIG_DIGEST_OFFSET`], and counts in the 40 bytes SACK blocks
    /// share (with timestamps, none fits).
    #[test]
    fn md5_option_is_written_first() {
        let mut th = base();
        th.options.md5sig = Some([9u8; 16]);
        th.options.mss = Some(1460);
        let mut buf = [0u8; MAX_TCP_HEADER_LEN];
        th.emit(&mut buf);
        assert_eq!(th.header_len(), 20 + 20 + 4);
        assert_eq!(&buf[20..24], &[1, 1, TCPOPT_MD5SIG, 18]);
        assert_eq!(
            &buf[MD5SIG_DIGEST_OFFSET..MD5SIG_DIGEST_OFFSET + 16],
            &[9u8; 16]
        );
        assert_eq!(&buf[40..44], &[2, 4, 0x05, 0xb4]);
        let (back, _) = TcpRepr::parse(&buf[..th.header_len()]).unwrap();
        assert_eq!(back.options.md5sig, Some([9u8; 16]));
        th.options.mss = None;
        th.options.timestamp = Some((1, 2));
        th.options.sack_len = 3;
        assert_eq!(th.emitted_sack_blocks(), 0, "MD5 + TS leave 8 bytes");
        th.options.timestamp = None;
        assert_eq!(th.emitted_sack_blocks(), 2);
    }

    fn base() -> TcpRepr {
        TcpRepr {
            src_port: 1234,
            dst_port: 80,
            seq: 0x0102_0304,
            ack: 0x0a0b_0c0d,
            flags: TcpFlags::ACK,
            window: 512,
            urgent: 0,
            options: TcpOptions::default(),
        }
    }

    fn emitted(r: &TcpRepr) -> Vec<u8> {
        let mut buf = vec![0u8; r.header_len()];
        r.emit(&mut buf);
        buf
    }

    /// A header whose options area is `opts` (padded with EOL to 4 bytes).
    fn with_options(opts: &[u8]) -> Vec<u8> {
        let mut b = emitted(&base());
        b.extend_from_slice(opts);
        while b.len() & 3 != 0 {
            b.push(0);
        }
        b[12] = ((b.len() / 4) as u8) << 4;
        b
    }

    fn parse_opts(opts: &[u8]) -> Result<TcpOptions, WireError> {
        TcpRepr::parse(&with_options(opts)).map(|(r, _)| r.options)
    }

    fn sack(n: usize) -> [SackBlock; 4] {
        let mut s = [SackBlock::default(); 4];
        for (i, b) in s.iter_mut().enumerate().take(n) {
            *b = SackBlock {
                start: 100 * i as u32,
                end: 100 * i as u32 + 50,
            };
        }
        s
    }

    fn syn_with(opts: &[u8]) -> Option<FastOpenOption> {
        let mut b = with_options(opts);
        b[13] = TcpFlags::SYN.0 as u8;
        TcpRepr::parse(&b).expect("parses").0.options.fastopen
    }

    #[test]
    fn fastopen_option_parse_as_tcp_parse_fastopen_option() {
        let cookie = [1, 2, 3, 4, 5, 6, 7, 8];
        let mut o34 = vec![TCPOPT_FASTOPEN, 10];
        o34.extend_from_slice(&cookie);
        assert_eq!(syn_with(&o34), Some(FastOpenOption::cookie(false, &cookie)));
        let mut exp = vec![TCPOPT_EXP, 12, 0xF9, 0x89];
        exp.extend_from_slice(&cookie);
        assert_eq!(syn_with(&exp), Some(FastOpenOption::cookie(true, &cookie)));
        // A request; a wrong magic; an odd length; an even length out of range.
        assert_eq!(
            syn_with(&[TCPOPT_FASTOPEN, 2]),
            Some(FastOpenOption::request(false))
        );
        assert_eq!(syn_with(&[TCPOPT_EXP, 4, 0xF9, 0x88]), None);
        assert_eq!(syn_with(&[TCPOPT_FASTOPEN, 5, 1, 2, 3]), None);
        assert_eq!(syn_with(&[TCPOPT_FASTOPEN, 4, 1, 2]), None);
        // Not in a segment without SYN.
        assert_eq!(parse_opts(&o34).expect("parses").fastopen, None);
    }

    #[test]
    fn ae_and_the_reserved_bits_sit_beside_the_data_offset() {
        // Byte 12: data offset, then the reserved bits (res1) and AE, bit 8 of the
        // flags (RFC 9768; packetdrill writes it `A`, as in `SEWA`).
        let mut r = base();
        r.flags = TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR | TcpFlags::AE;
        let b = emitted(&r);
        assert_eq!((b[12], b[13]), (0x51, 0xc2));
        assert_eq!(TcpRepr::parse(&b).expect("parses").0.flags, r.flags);
        let mut b = b;
        b[12] = 0x5e;
        let f = TcpRepr::parse(&b).expect("parses").0.flags;
        assert_eq!(
            f,
            TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR | TcpFlags::RES1
        );
        assert!(!f.contains(TcpFlags::AE));
        assert_eq!(TcpFlags::ACE, TcpFlags::AE | TcpFlags::CWR | TcpFlags::ECE);
    }

    #[test]
    fn fastopen_option_goes_last_nop_padded() {
        let mut r = base();
        r.flags = TcpFlags::SYN;
        r.options = TcpOptions {
            mss: Some(1460),
            fastopen: Some(FastOpenOption::request(false)),
            ..TcpOptions::default()
        };
        assert_eq!(&emitted(&r)[20..], &[2, 4, 5, 0xb4, 34, 2, 1, 1]);
        r.options.fastopen = Some(FastOpenOption::cookie(true, &[9; 8]));
        let b = emitted(&r);
        assert_eq!(&b[24..28], &[254, 12, 0xF9, 0x89]);
        assert_eq!(&b[28..], &[9; 8]);
        let back = TcpRepr::parse(&b).expect("parses").0;
        assert_eq!(back.options, r.options);
    }

    #[test]
    fn syn_layout_matches_linux() {
        let mut r = base();
        r.options = TcpOptions {
            mss: Some(1460),
            wscale: Some(7),
            sack_permitted: true,
            timestamp: Some((1, 2)),
            ..TcpOptions::default()
        };
        let b = emitted(&r);
        assert_eq!(b.len(), 40);
        assert_eq!(b[12], 0xa0);
        assert_eq!(
            &b[20..],
            &[2, 4, 5, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 3, 3, 7]
        );
    }

    #[test]
    fn single_option_layouts() {
        let mut r = base();
        r.options.timestamp = Some((0xaabb_ccdd, 5));
        assert_eq!(&emitted(&r)[20..24], &[1, 1, 8, 10]);
        r.options = TcpOptions {
            sack_permitted: true,
            ..TcpOptions::default()
        };
        assert_eq!(&emitted(&r)[20..], &[1, 1, 4, 2]);
        r.options = TcpOptions {
            sack: sack(1),
            sack_len: 1,
            ..TcpOptions::default()
        };
        assert_eq!(&emitted(&r)[20..24], &[1, 1, 5, 10]);
        assert_eq!(emitted(&r).len(), 32);
    }

    #[test]
    fn sack_blocks_dropped_to_fit() {
        let mut r = base();
        r.options = TcpOptions {
            timestamp: Some((1, 2)),
            sack: sack(4),
            sack_len: 4,
            ..TcpOptions::default()
        };
        assert_eq!(r.emitted_sack_blocks(), 3);
        assert_eq!(r.header_len(), 20 + 12 + 4 + 24);
        let (p, len) = TcpRepr::parse(&emitted(&r)).unwrap();
        assert_eq!(len, 60);
        assert_eq!(p.options.sack_blocks(), &sack(3)[..3]);
        r.options.timestamp = None;
        assert_eq!(r.emitted_sack_blocks(), 4);
        assert_eq!(r.header_len(), 56);
        r.options = TcpOptions {
            mss: Some(1),
            wscale: Some(1),
            timestamp: Some((1, 1)),
            sack_permitted: true,
            sack: sack(4),
            sack_len: 4,
            fastopen: None,
            ..TcpOptions::default()
        };
        assert_eq!(r.emitted_sack_blocks(), 2);
        assert_eq!(r.header_len(), 60);
        // A sack_len above 4 is treated as 4.
        r.options = TcpOptions {
            sack: sack(4),
            sack_len: 200,
            ..TcpOptions::default()
        };
        assert_eq!(r.emitted_sack_blocks(), 4);
    }

    #[test]
    fn header_errors() {
        let good = emitted(&base());
        assert_eq!(TcpRepr::parse(&good[..19]), Err(WireError::Truncated));
        let mut b = good.clone();
        b[12] = 0x40;
        assert_eq!(TcpRepr::parse(&b), Err(WireError::Malformed));
        b[12] = 0x60;
        assert_eq!(TcpRepr::parse(&b), Err(WireError::Malformed));
        let mut b = good.clone();
        b.extend_from_slice(b"payload");
        assert_eq!(TcpRepr::parse(&b).unwrap(), (base(), 20));
    }

    #[test]
    fn bad_option_lengths_are_malformed() {
        // Length below 2.
        assert_eq!(parse_opts(&[2, 0, 0, 0]), Err(WireError::Malformed));
        assert_eq!(parse_opts(&[99, 1, 0, 0]), Err(WireError::Malformed));
        // Runs past the header.
        assert_eq!(
            parse_opts(&[1, 1, 8, 10, 0, 0, 0, 0]),
            Err(WireError::Malformed)
        );
        assert_eq!(parse_opts(&[1, 1, 1, 99]), Err(WireError::Malformed));
        // Kind with no room for its length byte.
        assert_eq!(parse_opts(&[1, 1, 1, 2]), Err(WireError::Malformed));
    }

    #[test]
    fn eol_stops_and_unknown_kinds_are_skipped() {
        // Garbage after EOL is never looked at.
        let o = parse_opts(&[2, 4, 1, 0, 0, 2, 0, 0xff]).unwrap();
        assert_eq!(o.mss, Some(256));
        let o = parse_opts(&[30, 6, 9, 9, 9, 9, 3, 3, 14, 1, 1, 1]).unwrap();
        assert_eq!(o.wscale, Some(14));
        let o = parse_opts(&[254, 2, 4, 2]).unwrap();
        assert!(o.sack_permitted);
    }

    #[test]
    fn wrong_length_known_options_are_ignored() {
        let o = parse_opts(&[2, 3, 5, 3, 4, 0, 2, 4, 3, 0, 1, 1]).unwrap();
        assert_eq!(
            o,
            TcpOptions {
                wscale: None,
                ..TcpOptions::default()
            }
        );
        let o = parse_opts(&[2, 5, 5, 0xb4, 0, 8, 6, 1, 2, 3, 4, 4, 3, 0, 3, 3, 9]).unwrap();
        assert_eq!(
            o,
            TcpOptions {
                wscale: Some(9),
                ..TcpOptions::default()
            }
        );
        // SACK with no blocks, and with a length that is not 2 + 8n.
        let o = parse_opts(&[5, 2, 5, 6, 0, 0, 0, 0]).unwrap();
        assert_eq!(o.sack_len, 0);
        let mut opts = vec![5, 11];
        opts.extend_from_slice(&[7; 9]);
        assert_eq!(parse_opts(&opts).unwrap().sack_len, 0);
    }

    #[test]
    fn sack_block_counts() {
        for n in 1..=4usize {
            let mut opts = vec![1, 1, 5, 2 + 8 * n as u8];
            for i in 0..n as u32 {
                opts.extend_from_slice(&(i * 100).to_be_bytes());
                opts.extend_from_slice(&(i * 100 + 50).to_be_bytes());
            }
            let o = parse_opts(&opts).unwrap();
            assert_eq!(o.sack_blocks(), &sack(n)[..n]);
        }
        // Five blocks need 42 bytes: they cannot fit in 40 bytes of option space.
        let mut five = vec![5, 42];
        five.extend_from_slice(&[0; 40]);
        let mut b = emitted(&base());
        b.extend_from_slice(&five[..40]);
        b[12] = 0xf0;
        assert_eq!(TcpRepr::parse(&b), Err(WireError::Malformed));
        // The internal walker takes the first four if ever handed more.
        let mut o = TcpOptions::default();
        parse_sack(&mut o, &[1; 40]);
        assert_eq!(o.sack_len, 4);
    }

    #[test]
    fn four_tuple_reads_ports() {
        let ip = IpRepr {
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            protocol: 6,
            hop_limit: 64,
            ecn: 0,
            tos: 0,
            header_len: 20,
            payload_len: 20,
        };
        let mut p = vec![0u8; 40];
        ip.emit(&mut p, 0);
        base().emit(&mut p[20..]);
        let (s, d) = four_tuple(&p).unwrap();
        assert_eq!(
            (s.to_string(), d.to_string()),
            ("10.0.0.1:1234".into(), "10.0.0.2:80".into())
        );
        assert_eq!(four_tuple(&p[..30]), Err(WireError::Truncated));
    }

    fn arb_options() -> impl Strategy<Value = TcpOptions> {
        (
            proptest::option::of(any::<u16>()),
            proptest::option::of(any::<u8>()),
            any::<bool>(),
            proptest::option::of((any::<u32>(), any::<u32>())),
            proptest::collection::vec((any::<u32>(), any::<u32>()), 0..=4),
        )
            .prop_map(|(mss, wscale, sack_permitted, timestamp, blocks)| {
                let mut o = TcpOptions {
                    mss,
                    wscale,
                    sack_permitted,
                    timestamp,
                    ..TcpOptions::default()
                };
                for (slot, (start, end)) in o.sack.iter_mut().zip(&blocks) {
                    *slot = SackBlock {
                        start: *start,
                        end: *end,
                    };
                }
                o.sack_len = blocks.len() as u8;
                // Keep only what emit will write, so the round trip is exact.
                let fit = TcpRepr {
                    options: o,
                    ..TcpRepr::default()
                }
                .emitted_sack_blocks();
                o.sack[fit..].fill(SackBlock::default());
                o.sack_len = fit as u8;
                o
            })
    }

    fn arb_repr() -> impl Strategy<Value = TcpRepr> {
        (any::<(u16, u16, u32, u32, u16, u16, u16)>(), arb_options()).prop_map(
            |((src_port, dst_port, seq, ack, flags, window, urgent), options)| TcpRepr {
                src_port,
                dst_port,
                seq,
                ack,
                flags: TcpFlags(flags & 0x0FFF),
                window,
                urgent,
                options,
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(r in arb_repr(), payload in proptest::collection::vec(any::<u8>(), 0..20)) {
            let mut b = emitted(&r);
            prop_assert_eq!(b.len() % 4, 0);
            prop_assert!(b.len() <= MAX_TCP_HEADER_LEN);
            prop_assert_eq!(&b[16..18], &[0, 0]);
            b.extend_from_slice(&payload);
            prop_assert_eq!(TcpRepr::parse(&b), Ok((r, r.header_len())));
        }

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok((_, len)) = TcpRepr::parse(&data) {
                prop_assert!(len <= data.len());
            }
            let _ = four_tuple(&data);
        }

        #[test]
        fn mutations_never_panic(
            r in arb_repr(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut b = emitted(&r);
            for (at, byte) in edits {
                let i = at.index(b.len());
                b[i] = byte;
            }
            b.truncate(cut.index(b.len() + 1));
            if let Ok((o, len)) = TcpRepr::parse(&b) {
                prop_assert!(len <= b.len());
                prop_assert!(o.options.sack_len <= 4);
            }
        }
    }
}
