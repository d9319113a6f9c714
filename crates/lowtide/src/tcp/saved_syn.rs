//! `TCP_SAVE_SYN` and `TCP_SAVED_SYN` (tcp_input.c `tcp_reqsk_record_syn`,
//! tcp_ipv4.c `tcp_move_syn`, tcp.c `do_tcp_getsockopt`): a listener that asks for
//! it keeps each request's SYN headers, IP and TCP with their options, and its
//! child hands them out once.

use crate::socket::SocketError;

/// `do_tcp_setsockopt(TCP_SAVE_SYN)`: "0: disable, 1: enable, 2: start from
/// ether_header"; anything else is `EINVAL`. lowtide's packets have no link header
/// (as a tun device's: `skb_mac_header_len` 0), so 2 saves what 1 does.
pub fn save_syn_from_user(val: i32) -> Result<u8, SocketError> {
    u8::try_from(val)
        .ok()
        .filter(|&v| v <= 2)
        .ok_or(SocketError::InvalidInput)
}

/// The headers of the SYN the stack is receiving, copied only while some listener
/// saves SYNs (a listener's `TCP_SAVE_SYN` turns it on for good, as Linux's static
/// keys stay on), so that other traffic pays nothing.
#[derive(Debug, Default)]
pub(crate) struct SynHeaders {
    /// Some listener asked for SYNs.
    pub on: bool,
    buf: Vec<u8>,
}

impl SynHeaders {
    /// Keeps the IP header (`ihl` bytes, options and IPv6 extension headers
    /// included: `skb_network_header_len`) and the TCP header (`tcp_hdrlen`) of
    /// `pkt` if it is a SYN without ACK; forgets the last one otherwise.
    pub fn capture(&mut self, pkt: &[u8], ihl: usize) {
        if !self.on {
            return;
        }
        self.buf.clear();
        let Some(tcp) = pkt.get(ihl..).filter(|t| t.len() >= 20) else {
            return;
        };
        if tcp[13] & 0x12 != 0x02 {
            return; // not a SYN, or a SYN-ACK
        }
        let doff = ((tcp[12] >> 4) as usize * 4).clamp(20, tcp.len());
        self.buf.extend_from_slice(&pkt[..ihl + doff]);
    }

    /// The SYN's headers for a request of a listener that saves them
    /// (`tcp_reqsk_record_syn`), if the packet being received is one.
    pub fn take(&mut self) -> Option<Box<[u8]>> {
        (!self.buf.is_empty()).then(|| std::mem::take(&mut self.buf).into_boxed_slice())
    }
}

/// `do_tcp_getsockopt(TCP_SAVED_SYN)` for a caller's buffer of `room` bytes: no saved
/// SYN is `Ok(None)` (length 0); a buffer shorter than the headers is `EINVAL`, and
/// the headers stay (Linux writes their length to `optlen`); else they are handed
/// out and freed (`tcp_saved_syn_free`): a second call finds none.
pub fn take_saved_syn(
    saved: &mut Option<Box<[u8]>>,
    room: usize,
) -> Result<Option<Box<[u8]>>, SocketError> {
    match saved {
        Some(s) if room < s.len() => Err(SocketError::InvalidInput),
        _ => Ok(saved.take()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 20-byte IPv4 header and a TCP header of `doff` words with `flags`.
    fn packet(flags: u8, doff: u8, payload: usize) -> Vec<u8> {
        let mut p = vec![0x45u8; 20];
        let mut tcp = vec![0u8; doff as usize * 4];
        tcp[12] = doff << 4;
        tcp[13] = flags;
        p.extend(tcp);
        p.extend(vec![0xAA; payload]);
        p
    }

    #[test]
    fn save_syn_takes_zero_to_two() {
        assert_eq!(save_syn_from_user(0), Ok(0));
        assert_eq!(save_syn_from_user(2), Ok(2));
        assert_eq!(save_syn_from_user(3), Err(SocketError::InvalidInput));
        assert_eq!(save_syn_from_user(-1), Err(SocketError::InvalidInput));
    }

    /// tcp_reqsk_record_syn: network header plus tcp_hdrlen, no payload (a Fast
    /// Open SYN's data stays out); nothing while no listener asked; a SYN-ACK or a
    /// plain segment is no SYN to save.
    #[test]
    fn capture_keeps_a_syns_headers_only() {
        let mut h = SynHeaders::default();
        h.capture(&packet(0x02, 10, 0), 20);
        assert_eq!(h.take(), None, "off until a listener asks");
        h.on = true;
        h.capture(&packet(0x02, 10, 100), 20);
        assert_eq!(h.take().map(|b| b.len()), Some(60));
        assert_eq!(h.take(), None, "taken once");
        h.capture(&packet(0x12, 10, 0), 20);
        assert_eq!(h.take(), None, "a SYN-ACK");
        h.capture(&packet(0x02, 8, 0), 20);
        h.capture(&packet(0x10, 5, 0), 20);
        assert_eq!(h.take(), None, "a later ACK forgets the SYN");
    }

    /// do_tcp_getsockopt(TCP_SAVED_SYN): short buffers are EINVAL and keep the
    /// headers; a long enough one takes them; then there are none.
    #[test]
    fn saved_syn_is_handed_out_once() {
        let mut saved = Some(vec![1u8; 60].into_boxed_slice());
        assert_eq!(
            take_saved_syn(&mut saved, 59),
            Err(SocketError::InvalidInput)
        );
        assert!(saved.is_some());
        assert_eq!(take_saved_syn(&mut saved, 100).unwrap().unwrap().len(), 60);
        assert_eq!(take_saved_syn(&mut saved, 100), Ok(None));
        assert_eq!(take_saved_syn(&mut saved, 0), Ok(None));
    }
}
