//! Hand-built IP + TCP packets for tests: the one builder that the engine's, the
//! simulator's and the TUN runtime's tests share, so that a test says only what its
//! packet has of its own (addresses, flags, options, payload).
//!
//! Compiled for this crate's own tests and, for other crates, with the `testing`
//! feature, which only their `[dev-dependencies]` turn on:
//!
//! ```toml
//! [dev-dependencies]
//! lowtide-wire = { workspace = true, features = ["testing"] }
//! ```
//!
//! ```
//! use lowtide_wire::testing::{tcp_packet, Csum};
//! use lowtide_wire::tcp::{TcpFlags, TcpRepr};
//! let th = TcpRepr { seq: 1, ack: 1, flags: TcpFlags::ACK, window: 100, ..TcpRepr::default() };
//! let src = "10.0.0.1:40000".parse().unwrap();
//! let dst = "10.0.0.2:5001".parse().unwrap();
//! let p = tcp_packet(src, dst, &th, b"hello", 7, Csum::Full);
//! assert_eq!(p.len(), 20 + 20 + 5);
//! assert!(lowtide_wire::checksum::verify_tcp(src.ip(), dst.ip(), &p[20..]));
//! ```

pub use crate::build::{tcp_packet, Csum};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;
    use crate::ip::IpRepr;
    use crate::tcp::{TcpFlags, TcpOptions, TcpRepr};
    use std::net::SocketAddr;

    fn th() -> TcpRepr {
        TcpRepr {
            seq: 5,
            ack: 9,
            flags: TcpFlags::ACK | TcpFlags::PSH,
            window: 1000,
            options: TcpOptions {
                timestamp: Some((1, 2)),
                ..TcpOptions::default()
            },
            ..TcpRepr::default()
        }
    }

    #[test]
    fn parses_back_in_both_families_and_checksum_modes() {
        for (src, dst, ihl) in [
            ("10.0.0.1:1", "10.0.0.2:2", 20),
            ("[fd00::1]:1", "[fd00::2]:2", 40),
        ] {
            let (src, dst): (SocketAddr, SocketAddr) = (src.parse().unwrap(), dst.parse().unwrap());
            let full = tcp_packet(src, dst, &th(), b"abc", 3, Csum::Full);
            let ip = IpRepr::parse(&full, true).unwrap();
            assert_eq!((ip.src, ip.dst, ip.header_len), (src.ip(), dst.ip(), ihl));
            assert_eq!(ip.header_len + ip.payload_len, full.len());
            assert!(checksum::verify_tcp(src.ip(), dst.ip(), &full[ihl..]));
            let (tcp, hl) = TcpRepr::parse(&full[ihl..]).unwrap();
            assert_eq!((tcp.src_port, tcp.dst_port, tcp.seq), (1, 2, 5));
            assert_eq!(tcp.options.timestamp, Some((1, 2)));
            assert_eq!(&full[ihl + hl..], b"abc");
            let partial = tcp_packet(src, dst, &th(), b"abc", 3, Csum::Partial);
            assert_eq!(partial.len(), full.len());
            assert!(!checksum::verify_tcp(src.ip(), dst.ip(), &partial[ihl..]));
        }
    }
}
