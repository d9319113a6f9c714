//! Packet devices the driver runs the stack on: the [`PacketDevice`] trait, a Linux
//! TUN device with GSO ([`TunPacketDevice`]) and an in-process channel pair with a
//! delay ([`channel_pair`]).

use lowtide::{RxChecksum, Transmit};
use lowtide_tun::device::{Offload, TunDevice, RECV_BUF_LEN};
use lowtide_tun::vnet::VnetHdr;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use tokio::time::{Instant as TokioInstant, Sleep};

/// A device that carries IP packets between the stack and the rest of the world: a
/// TUN device, a channel, a UDP tunnel, ... Implement it to run lowtide on your own
/// transport; the driver calls it from one task.
pub trait PacketDevice: Send + 'static {
    /// Polls for one received IP packet: on `Ready(Ok(csum))` the packet is in `buf`
    /// (replacing its contents), and `csum` says whether the stack must verify its
    /// checksums ([`RxChecksum::Verify`]) or may trust them
    /// ([`RxChecksum::Unnecessary`]: verified by the device, or a partial checksum
    /// from an offloading sender, as on a TUN device with `NEEDS_CSUM`). On
    /// `Pending`, the device arranges for `cx`'s waker to be woken when a packet
    /// arrives. An error stops the driver.
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<RxChecksum>>;

    /// Sends one packet of the stack's. `tx.packet` is CHECKSUM_PARTIAL and may be a
    /// GSO super-packet (`tx.gso_size`): a device without offload puts
    /// [`Transmit::segments`] on its wire. A packet the device cannot take now is
    /// dropped (return `Ok`, as a full NIC queue drops; TCP repairs the loss); an
    /// error stops the driver. The driver reports the TX completion to the stack when
    /// this returns.
    fn send(&mut self, tx: &Transmit) -> io::Result<()>;

    /// Whether [`PacketDevice::send`] takes a GSO packet's payload apart from its
    /// headers ([`Transmit::payload`], a shared slice of the send queue, e.g. for a
    /// gathering write) instead of copied behind them in `tx.packet`
    /// ([`lowtide::Stack::set_tx_payload_apart`]). False unless a device says so.
    fn payload_apart(&self) -> bool {
        false
    }
}

/// A Linux TUN device (from `lowtide-tun`) as a [`PacketDevice`], read through
/// tokio's reactor. With [`Offload::Full`] the kernel and lowtide exchange 64 KB GSO
/// super-packets with partial checksums (virtio-net header); with [`Offload::None`]
/// lowtide writes MSS-sized segments with full checksums.
///
/// UDP too, where the kernel offers UDP segmentation offload (Linux 6.2+,
/// [`TunDevice::enable_uso`], asked for here with [`Offload::Full`]): a kernel
/// application's `UDP_SEGMENT` send arrives as one super-packet, cut here into its
/// datagrams (`udp_rcv_segment`), and a lowtide socket's
/// ([`UdpSocket::set_segment_size`](crate::UdpSocket::set_segment_size)) leaves as
/// one; without USO the datagrams are written one by one.
pub struct TunPacketDevice {
    fd: AsyncFd<TunDevice>,
    raw: Vec<u8>,
    /// Datagrams of a received UDP GSO super-packet not handed over yet.
    pending: VecDeque<Vec<u8>>,
}

impl TunPacketDevice {
    /// Wraps `dev` (configured and up), turning on UDP segmentation offload where
    /// the kernel has it; must be called within a tokio runtime.
    pub fn new(mut dev: TunDevice) -> io::Result<TunPacketDevice> {
        dev.set_nonblocking(true)?;
        dev.enable_uso()?;
        Ok(TunPacketDevice {
            // SAFETY: the TunDevice owns its descriptor and neither closes nor
            // replaces it while the AsyncFd holds it.
            fd: unsafe { AsyncFd::register(dev)? },
            raw: vec![0; RECV_BUF_LEN],
            pending: VecDeque::new(),
        })
    }

    /// The device.
    pub fn device(&self) -> &TunDevice {
        self.fd.get_ref()
    }
}

impl PacketDevice for TunPacketDevice {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<RxChecksum>> {
        if let Some(d) = self.pending.pop_front() {
            *buf = d;
            return Poll::Ready(Ok(RxChecksum::Unnecessary));
        }
        loop {
            let mut guard = match self.fd.poll_read_ready(cx) {
                Poll::Ready(g) => g?,
                Poll::Pending => return Poll::Pending,
            };
            let Some(n) = guard.get_inner().try_recv(&mut self.raw)? else {
                guard.clear_ready();
                continue;
            };
            // A cut virtio-net header cannot be parsed: drop the read.
            let Ok((hdr, packet)) = VnetHdr::parse(&self.raw[..n]) else {
                continue;
            };
            if hdr.is_udp_gso() {
                // Its datagrams, each with a complete checksum; a malformed one is
                // dropped.
                let pending = &mut self.pending;
                let _ =
                    lowtide_wire::udp::gso_segment(packet, hdr.gso_size, |d| pending.push_back(d));
                match self.pending.pop_front() {
                    Some(d) => {
                        *buf = d;
                        return Poll::Ready(Ok(RxChecksum::Unnecessary));
                    }
                    None => continue,
                }
            }
            buf.clear();
            buf.extend_from_slice(packet);
            return Poll::Ready(Ok(hdr.rx_checksum()));
        }
    }

    fn send(&mut self, tx: &Transmit) -> io::Result<()> {
        let dev = self.fd.get_ref();
        // A write the kernel refuses is a loss, as on a real device (logged by
        // send_or_drop at trace level).
        let sent = |hdr: &VnetHdr, p: &[u8]| dev.send_or_drop(hdr, p).map(drop);
        if !tx.is_tcp() {
            // UDP and ICMP: checksums complete, unless a UDP GSO super-packet, which
            // goes whole where the kernel takes it (USO), else as its datagrams.
            if tx.gso_segs <= 1 {
                return sent(&VnetHdr::plain(), &tx.packet);
            }
            if dev.uso() {
                return match VnetHdr::for_udp_gso(&tx.packet, tx.gso_size) {
                    Ok(hdr) => sent(&hdr, &tx.packet),
                    Err(_) => Ok(()),
                };
            }
            for d in tx.segments() {
                sent(&VnetHdr::plain(), &d)?;
            }
            return Ok(());
        }
        match dev.offload() {
            Offload::Full => {
                let gso = if tx.gso_segs > 1 { tx.gso_size } else { 0 };
                // One writev gathers the headers and the send queue's bytes.
                match VnetHdr::for_transmit_apart(&tx.packet, tx.payload.len(), gso) {
                    Ok(hdr) => dev
                        .send_apart_or_drop(&hdr, &tx.packet, &tx.payload.to_bytes())
                        .map(drop),
                    Err(_) => Ok(()),
                }
            }
            Offload::None => {
                for seg in tx.segments() {
                    sent(&VnetHdr::plain(), &seg)?;
                }
                Ok(())
            }
        }
    }

    /// The payload of a GSO packet is written from the send queue where it lies
    /// (`TunDevice::send_apart`), or cut from there into segments without offload.
    fn payload_apart(&self) -> bool {
        true
    }
}

/// One end of an in-process link made by [`channel_pair`].
pub struct ChannelDevice {
    tx: mpsc::UnboundedSender<(TokioInstant, Vec<u8>)>,
    rx: mpsc::UnboundedReceiver<(TokioInstant, Vec<u8>)>,
    delay: Duration,
    /// Sending rate in bits/s, if limited ([`ChannelDevice::with_rate`]).
    rate: Option<u64>,
    /// When the last packet sent finishes serializing at `rate`.
    busy_until: TokioInstant,
    head: VecDeque<(TokioInstant, Vec<u8>)>,
    sleep: Pin<Box<Sleep>>,
}

impl ChannelDevice {
    /// Limits what this end sends to `bits_per_sec`: packets leave back to back as a
    /// link of that rate serializes them (each for its length, a GSO super-packet for
    /// all of it), behind an unlimited FIFO, then take the pair's delay. Without it a
    /// flight crosses in one instant, and an ACK clock never forms.
    ///
    /// # Panics
    /// If `bits_per_sec` is 0.
    pub fn with_rate(mut self, bits_per_sec: u64) -> Self {
        assert!(bits_per_sec > 0, "a link rate of 0 bit/s");
        self.rate = Some(bits_per_sec);
        self
    }
}

/// Two [`ChannelDevice`]s joined back to back, each direction delaying packets by
/// `delay` (tokio time: under `tokio::time::pause` the pair runs in virtual time).
///
/// Like Linux's veth, packets cross as the stack made them: GSO super-packets stay
/// whole and partial checksums are trusted (`skb_csum_unnecessary` on a
/// CHECKSUM_PARTIAL skb), the same as [`lowtide::Stack::handle_transmit`].
pub fn channel_pair(delay: Duration) -> (ChannelDevice, ChannelDevice) {
    let (a_tx, b_rx) = mpsc::unbounded_channel();
    let (b_tx, a_rx) = mpsc::unbounded_channel();
    let end = |tx, rx| ChannelDevice {
        tx,
        rx,
        delay,
        rate: None,
        busy_until: TokioInstant::now(),
        head: VecDeque::new(),
        sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
    };
    (end(a_tx, a_rx), end(b_tx, b_rx))
}

impl PacketDevice for ChannelDevice {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Vec<u8>,
    ) -> Poll<io::Result<RxChecksum>> {
        while let Poll::Ready(Some(p)) = self.rx.poll_recv(cx) {
            self.head.push_back(p);
        }
        let Some(&(at, _)) = self.head.front() else {
            return Poll::Pending;
        };
        if at > TokioInstant::now() {
            self.sleep.as_mut().reset(at);
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let (_, p) = self.head.pop_front().expect("checked");
        *buf = p;
        Poll::Ready(Ok(RxChecksum::Unnecessary))
    }

    fn send(&mut self, tx: &Transmit) -> io::Result<()> {
        let mut leaves = TokioInstant::now();
        if let Some(rate) = self.rate {
            let bits = tx.packet.len() as u128 * 8;
            let nanos = (bits * 1_000_000_000).div_ceil(rate as u128);
            let serialize = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
            leaves = leaves.max(self.busy_until) + serialize;
            self.busy_until = leaves;
        }
        // The other end gone is a cable pulled: the packet is lost. A UDP GSO
        // super-packet reaches a socket as its datagrams (udp_rcv_segment).
        match tx.gso_segs > 1 && !tx.is_tcp() {
            true => {
                for d in tx.segments() {
                    let _ = self.tx.send((leaves + self.delay, d));
                }
            }
            false => {
                let _ = self.tx.send((leaves + self.delay, tx.packet.clone()));
            }
        }
        Ok(())
    }
}
