//! A Linux TUN device (`drivers/net/tun.c`) carrying IP packets, each preceded by a
//! `virtio_net_hdr` ([`VnetHdr`]), so that checksums and segmentation can be offloaded
//! in both directions.
//!
//! # Pointing the kernel at it
//!
//! [`TunDevice::open`] creates the interface (in the network namespace of the calling
//! thread); give the *kernel's* end an address and bring it up, then use another
//! address of the same prefix for lowtide:
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use lowtide_tun::device::{Offload, TunDevice};
//! let dev = TunDevice::open("lowtide0", Offload::Full)?;
//! dev.set_ipv4("10.9.0.1".parse().unwrap(), 24)?; // the kernel is 10.9.0.1
//! dev.set_up()?;
//! // lowtide uses e.g. 10.9.0.2: the kernel routes 10.9.0.0/24 to the device, and
//! // every packet it sends there is read by `dev.recv`.
//! # Ok(()) }
//! ```
//!
//! The same from a shell: `ip addr add 10.9.0.1/24 dev lowtide0 && ip link set lowtide0
//! up`. To reach other networks through lowtide's side, add routes via the device
//! (`ip route add 192.0.2.0/24 dev lowtide0`).
//!
//! # Offload
//!
//! See [`Offload`]. Both modes use `IFF_VNET_HDR`, so reads and writes always start
//! with the 10-byte header. `TUNSETOFFLOAD` only tells the kernel what *it* may hand
//! us (it becomes the tun netdev's `NETIF_F_HW_CSUM`/`TSO`/`TSO6` features); what we
//! write is accepted with partial checksums and GSO in either mode.
//!
//! Observed on Linux 6.18 (experiments while writing `tests/device.rs`): a packet written with `NEEDS_CSUM`
//! is delivered to local sockets *without any checksum check* (a `CHECKSUM_PARTIAL`
//! skb is trusted, `skb_csum_unnecessary`), even with a wrong partial sum; one written
//! without it is verified and dropped if wrong, and `DATA_VALID` on a write is
//! ignored (still verified). A GSO write is accepted with [`Offload::None`] too.
//! Headers the kernel rejects with `EINVAL`: a checksum field outside the packet,
//! `hdr_len` larger than the packet, a GSO type that does not match the IP version, a
//! GSO type with `gso_size` 0, a packet that is not IP.
//!
//! # The kernel's transmit queue (kernel to us)
//!
//! `tun_net_xmit` puts each packet on a per-queue `ptr_ring` of `txqueuelen` entries
//! (500 by default) and *drops* it (counted in `tx_dropped`) when the ring is full; it
//! does not stop the queue and apply back-pressure (the `pfifo_fast` qdisc in front
//! never holds anything). Observed: 2000 UDP datagrams sent while nobody read gave
//! exactly 500 queued packets and the rest in `TX dropped`. A reader that falls behind
//! therefore loses packets, which TCP sees as loss. With [`Offload::Full`] a 64 KB TSO
//! super-packet takes one slot; with [`Offload::None`] the kernel segments before
//! queueing, so every MSS-sized segment takes one. Drain the device promptly (read
//! until `WouldBlock` in non-blocking mode) or raise `txqueuelen`
//! (`ip link set NAME txqueuelen 5000`).

use crate::link::Frame;
use crate::vnet::VnetHdr;
use lowtide_wire::pool::{BufPool, POOL_BUF_LEN, POOL_MID_LEN};
use std::ffi::CStr;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A packet [`TunDevice::read_frame`] gave.
#[derive(Debug)]
pub enum Read {
    /// Nothing is waiting.
    Empty,
    /// A packet whose virtio-net header was cut short (counted as an error).
    Malformed,
    /// A packet.
    Frame(Frame),
}

/// Length of a buffer that holds any packet [`TunDevice::recv`] can return: the vnet
/// header plus the largest IP packet a 64 KB GSO limit allows (an IPv6 header plus a
/// 65535-byte payload).
pub const RECV_BUF_LEN: usize = VnetHdr::LEN + 40 + 65535;

/// Packets a loop reads from a device per wakeup before it runs the rest of its work
/// (NAPI's budget plays the same role).
pub const READ_BUDGET: usize = 64;

/// Most queues of one multi-queue TUN interface (`MAX_TAP_QUEUES` in
/// `include/linux/if_tun.h`: 256).
pub const MAX_QUEUES: usize = 256;

/// Longest interface name (`IFNAMSIZ` - 1).
pub const MAX_NAME_LEN: usize = libc::IFNAMSIZ - 1;

/// What the kernel may hand lowtide (and what lowtide should send).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// `TUNSETOFFLOAD(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6)`: the kernel sends its TSO
    /// super-packets (up to 64 KB, `gso_type` TCPV4/TCPV6) and packets with partial
    /// checksums (`NEEDS_CSUM`), and lowtide may write its own super-packets with
    /// partial checksums ([`VnetHdr::for_transmit`]).
    Full,
    /// `TUNSETOFFLOAD(0)`: the kernel segments and checksums everything before
    /// handing it over (every packet is at most the MTU, `flags` 0). lowtide should
    /// write single segments with full checksums and [`VnetHdr::plain`] (e.g. cut with
    /// [`lowtide_wire::gso::segment`]).
    None,
}

impl Offload {
    /// The `TUNSETOFFLOAD` argument.
    fn tun_flags(self) -> libc::c_uint {
        match self {
            Offload::Full => libc::TUN_F_CSUM | libc::TUN_F_TSO4 | libc::TUN_F_TSO6,
            Offload::None => 0,
        }
    }
}

/// An open TUN device with `IFF_VNET_HDR` (see the module docs).
///
/// The interface exists as long as some file descriptor is attached to it (it is not
/// made persistent), so dropping the last `TunDevice` deletes it.
#[derive(Debug)]
pub struct TunDevice {
    /// The `/dev/net/tun` file, attached to the interface.
    fd: OwnedFd,
    /// An `AF_INET` datagram socket created in the device's namespace, for the
    /// `SIOCSIF*` ioctls.
    ctl4: OwnedFd,
    /// Same for `AF_INET6` (`None` if IPv6 is disabled in the kernel).
    ctl6: Option<OwnedFd>,
    name: String,
    offload: Offload,
    /// Whether `TUN_F_USO4 | TUN_F_USO6` are on ([`TunDevice::enable_uso`]).
    uso: bool,
}

impl TunDevice {
    /// Creates the TUN interface `name` in the calling thread's network namespace, or
    /// attaches to an existing (persistent, unattached) one of that name, with
    /// `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR`, a 10-byte little-endian vnet header
    /// (`TUNSETVNETHDRSZ`, `TUNSETVNETLE`) and `offload` (`TUNSETOFFLOAD`).
    ///
    /// The device stays in that namespace, and so do the configuration methods, even
    /// if they are called later from another one (see [`crate::netns::enter`]). An
    /// empty `name` lets the kernel choose (`tun%d`); see [`TunDevice::name`].
    /// Needs `CAP_NET_ADMIN`.
    pub fn open(name: &str, offload: Offload) -> io::Result<TunDevice> {
        TunDevice::open_flags(name, offload, 0)
    }

    /// [`TunDevice::open`] of `queues` queues of one interface (`IFF_MULTI_QUEUE`,
    /// `Documentation/networking/tuntap.rst` section 3.3): each [`TunDevice`] is one
    /// queue, its own file descriptor, read and written independently (one engine
    /// shard per queue, see [`crate::shard`]). Dropping all of them deletes the
    /// interface. A multi-queue interface cannot be attached as a single-queue one
    /// and vice versa (`EINVAL`). `queues` is 1..=256 (`MAX_TAP_QUEUES`).
    pub fn open_queues(name: &str, offload: Offload, queues: usize) -> io::Result<Vec<TunDevice>> {
        if !(1..=MAX_QUEUES).contains(&queues) {
            return Err(invalid(format!("{queues} queues: 1..={MAX_QUEUES}")));
        }
        let first = TunDevice::open_flags(name, offload, libc::IFF_MULTI_QUEUE)?;
        // The kernel named the interface: the other queues attach to that name.
        let name = first.name.clone();
        let mut devs = vec![first];
        for _ in 1..queues {
            devs.push(TunDevice::open_flags(
                &name,
                offload,
                libc::IFF_MULTI_QUEUE,
            )?);
        }
        Ok(devs)
    }

    /// [`TunDevice::open_queues`] inside the network namespace `netns`.
    pub fn open_queues_in(
        netns: &str,
        name: &str,
        offload: Offload,
        queues: usize,
    ) -> io::Result<Vec<TunDevice>> {
        let _guard = crate::netns::enter(netns)?;
        TunDevice::open_queues(name, offload, queues)
    }

    fn open_flags(name: &str, offload: Offload, extra: libc::c_int) -> io::Result<TunDevice> {
        let req = ifreq_named(name)?;
        let fd = open_dev_tun().map_err(|e| context(e, "opening /dev/net/tun"))?;
        let name =
            tun_set_iff(&fd, req, extra).map_err(|e| context(e, &format!("TUNSETIFF {name}")))?;
        configure_vnet(&fd, offload).map_err(|e| context(e, &format!("configuring {name}")))?;
        let ctl4 = socket(libc::AF_INET).map_err(|e| context(e, "AF_INET control socket"))?;
        let ctl6 = socket(libc::AF_INET6).ok();
        Ok(TunDevice {
            fd,
            ctl4,
            ctl6,
            name,
            offload,
            uso: false,
        })
    }

    /// [`TunDevice::open`] inside the network namespace `netns` (`/run/netns/NAME`):
    /// enters it on the calling thread, opens the device, and leaves again. The device
    /// and its configuration methods stay in `netns`.
    pub fn open_in(netns: &str, name: &str, offload: Offload) -> io::Result<TunDevice> {
        let _guard = crate::netns::enter(netns)?;
        TunDevice::open(name, offload)
    }

    /// Adds UDP segmentation offload to [`Offload::Full`] where the kernel offers it
    /// (`TUNSETOFFLOAD` with `TUN_F_USO4 | TUN_F_USO6`, Linux 6.2+): the kernel then
    /// hands over a local sender's `UDP_SEGMENT` sends as one super-packet
    /// (`gso_type` [`crate::vnet::VIRTIO_NET_HDR_GSO_UDP_L4`], to be cut with
    /// [`lowtide_wire::udp::gso_segment`]) and takes lowtide's
    /// ([`VnetHdr::for_udp_gso`]). Returns whether it is on: false with
    /// [`Offload::None`], or if the kernel refuses the flags (`EINVAL` before 6.2;
    /// the device keeps its TSO offloads). Only for a reader that cuts UDP
    /// super-packets: the others leave it off.
    pub fn enable_uso(&mut self) -> io::Result<bool> {
        if self.offload != Offload::Full {
            return Ok(false);
        }
        let flags = self.offload.tun_flags() | libc::TUN_F_USO4 | libc::TUN_F_USO6;
        // SAFETY: TUNSETOFFLOAD takes its flags by value.
        let r = cvt(unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::TUNSETOFFLOAD as _,
                flags as libc::c_ulong,
            )
        });
        match r {
            Ok(_) => self.uso = true,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.uso = false,
            Err(e) => return Err(context(e, "TUNSETOFFLOAD with USO")),
        }
        Ok(self.uso)
    }

    /// Whether UDP segmentation offload is on ([`TunDevice::enable_uso`]).
    pub fn uso(&self) -> bool {
        self.uso
    }

    /// The interface name (as the kernel reports it after `TUNSETIFF`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The offload mode given to [`TunDevice::open`].
    pub fn offload(&self) -> Offload {
        self.offload
    }

    /// Adds the IPv4 address `addr/prefix_len` to the interface (the kernel's
    /// address; `SIOCSIFADDR` then `SIOCSIFNETMASK`). Once the link is up the kernel
    /// routes the prefix to the device. Replaces the interface's primary IPv4
    /// address if it had one.
    pub fn set_ipv4(&self, addr: Ipv4Addr, prefix_len: u8) -> io::Result<()> {
        if prefix_len > 32 {
            return Err(invalid(format!("IPv4 prefix length {prefix_len} > 32")));
        }
        let mask = u32::MAX.checked_shl(32 - prefix_len as u32).unwrap_or(0);
        let what = format!("setting {addr}/{prefix_len} on {}", self.name);
        let mut req = ifreq_named(&self.name)?;
        req.ifr_ifru.ifru_addr = sockaddr_v4(addr);
        self.ioctl4(libc::SIOCSIFADDR, &mut req)
            .map_err(|e| context(e, &what))?;
        req.ifr_ifru.ifru_netmask = sockaddr_v4(Ipv4Addr::from(mask));
        self.ioctl4(libc::SIOCSIFNETMASK, &mut req)
            .map_err(|e| context(e, &what))
    }

    /// Adds the IPv6 address `addr/prefix_len` to the interface (`SIOCSIFADDR` on an
    /// `AF_INET6` socket with `struct in6_ifreq`, `net/ipv6/addrconf.c`
    /// `addrconf_add_ifaddr`). A TUN device is `IFF_NOARP`, so the address skips
    /// duplicate address detection and is usable at once.
    pub fn set_ipv6(&self, addr: Ipv6Addr, prefix_len: u8) -> io::Result<()> {
        let what = format!("setting {addr}/{prefix_len} on {}", self.name);
        if prefix_len > 128 {
            return Err(invalid(format!("{what}: prefix length > 128")));
        }
        let ctl6 = self.ctl6.as_ref().ok_or_else(|| {
            io::Error::new(io::ErrorKind::Unsupported, format!("{what}: no IPv6"))
        })?;
        let mut req = libc::in6_ifreq {
            ifr6_addr: libc::in6_addr {
                s6_addr: addr.octets(),
            },
            ifr6_prefixlen: prefix_len as u32,
            ifr6_ifindex: self.ifindex()?,
        };
        // SAFETY: SIOCSIFADDR on an AF_INET6 socket reads a `struct in6_ifreq`.
        cvt(unsafe { libc::ioctl(ctl6.as_raw_fd(), libc::SIOCSIFADDR as _, &mut req) })
            .map(drop)
            .map_err(|e| context(e, &what))
    }

    /// Sets the interface MTU (`SIOCSIFMTU`): the largest IP packet the kernel sends
    /// us without GSO, and the size it segments to with [`Offload::None`].
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let mut req = ifreq_named(&self.name)?;
        req.ifr_ifru.ifru_mtu = i32::try_from(mtu).map_err(|_| invalid("MTU too large"))?;
        self.ioctl4(libc::SIOCSIFMTU, &mut req)
            .map_err(|e| context(e, &format!("setting MTU {mtu} on {}", self.name)))
    }

    /// Brings the interface up (`SIOCGIFFLAGS`, then `SIOCSIFFLAGS` with `IFF_UP`).
    pub fn set_up(&self) -> io::Result<()> {
        let what = format!("bringing {} up", self.name);
        let mut req = ifreq_named(&self.name)?;
        self.ioctl4(libc::SIOCGIFFLAGS, &mut req)
            .map_err(|e| context(e, &what))?;
        // SAFETY: SIOCGIFFLAGS filled in `ifru_flags`.
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        self.ioctl4(libc::SIOCSIFFLAGS, &mut req)
            .map_err(|e| context(e, &what))
    }

    /// The interface index (`SIOCGIFINDEX`).
    pub fn ifindex(&self) -> io::Result<i32> {
        let mut req = ifreq_named(&self.name)?;
        self.ioctl4(libc::SIOCGIFINDEX, &mut req)
            .map_err(|e| context(e, &format!("SIOCGIFINDEX {}", self.name)))?;
        // SAFETY: SIOCGIFINDEX filled in `ifru_ifindex`.
        Ok(unsafe { req.ifr_ifru.ifru_ifindex })
    }

    /// Switches `O_NONBLOCK` on or off: [`TunDevice::recv`] then fails with
    /// `WouldBlock` when no packet is queued (for use with mio/poll).
    pub fn set_nonblocking(&self, nonblocking: bool) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on a file descriptor we own.
        let flags = cvt(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
        let flags = if nonblocking {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        cvt(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) }).map(drop)
    }

    /// Reads one packet: the 10-byte vnet header followed by the IP packet (split
    /// them with [`VnetHdr::parse`]). Returns the total length.
    ///
    /// `buf` should be at least [`RECV_BUF_LEN`] long (with [`Offload::None`],
    /// MTU + 10 is enough): the kernel (`tun_put_user`) silently truncates a longer
    /// packet and returns `buf.len()`, so a result equal to `buf.len()` may be a cut
    /// packet; a `buf` shorter than 10 bytes gives `EINVAL` and the packet is lost
    /// (both observed on Linux 6.18).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        cvt_size(n)
    }

    /// [`TunDevice::recv`] on a non-blocking device: `Ok(None)` when no packet is
    /// waiting; an interrupted read is retried.
    pub fn try_recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match self.recv(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// [`TunDevice::try_recv`] scattered with `readv`: the virtio-net header into
    /// `hdr`, the IP packet straight into `packet` (cleared, then grown to what
    /// arrived), so that it lands in the buffer it will travel in without a copy in
    /// user space. Returns the bytes read, header included (under
    /// [`VnetHdr::LEN`]: a cut header, and `packet` is empty).
    pub fn try_recv_split(
        &self,
        hdr: &mut [u8; VnetHdr::LEN],
        packet: &mut Vec<u8>,
    ) -> io::Result<Option<usize>> {
        packet.clear();
        packet.reserve(RECV_BUF_LEN - VnetHdr::LEN);
        let spare = packet.spare_capacity_mut();
        let iov = [
            libc::iovec {
                iov_base: hdr.as_mut_ptr().cast(),
                iov_len: hdr.len(),
            },
            libc::iovec {
                iov_base: spare.as_mut_ptr().cast(),
                iov_len: spare.len(),
            },
        ];
        loop {
            // SAFETY: both iovecs point at writable memory of the given lengths
            // (`packet`'s spare capacity may be uninitialized: readv only writes it).
            let n = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            match cvt_size(n) {
                Ok(n) => {
                    // SAFETY: the kernel wrote the first n - LEN bytes of the spare
                    // capacity, within `packet`'s capacity.
                    unsafe { packet.set_len(n.saturating_sub(VnetHdr::LEN)) };
                    return Ok(Some(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads one packet into `rx` (a buffer of [`POOL_BUF_LEN`] bytes kept by the
    /// caller) as a [`Frame`] for the path, without a copy: a big packet keeps `rx`
    /// and a pool buffer replaces it for the next read; a small one (an ACK) is copied
    /// into a pool buffer of its size, so that queued small packets do not each hold
    /// 64 KB.
    pub fn read_frame(&self, pool: &mut BufPool, rx: &mut Vec<u8>) -> io::Result<Read> {
        let mut hdr = [0u8; VnetHdr::LEN];
        let Some(n) = self.try_recv_split(&mut hdr, rx)? else {
            return Ok(Read::Empty);
        };
        if n < VnetHdr::LEN {
            return Ok(Read::Malformed);
        }
        let data = if rx.len() < POOL_MID_LEN {
            let mut small = pool.take(rx.len());
            small.extend_from_slice(rx);
            small
        } else {
            std::mem::replace(rx, pool.take(POOL_BUF_LEN))
        };
        Ok(Read::Frame(Frame::from_parts(&hdr, data)))
    }

    /// [`TunDevice::send`] where the kernel refusing this one packet (any errno but
    /// `EBADF`, e.g. `EINVAL` for a header it rejects) is a loss, as on a real
    /// device, not an error of the loop: returns whether the packet went out.
    pub fn send_or_drop(&self, hdr: &VnetHdr, packet: &[u8]) -> io::Result<bool> {
        self.send_apart_or_drop(hdr, packet, &[])
    }

    /// [`TunDevice::send_or_drop`] of a packet in two parts: its headers, and its
    /// payload kept apart from them ([`TunDevice::send_apart`]).
    pub fn send_apart_or_drop(
        &self,
        hdr: &VnetHdr,
        headers: &[u8],
        payload: &[u8],
    ) -> io::Result<bool> {
        match self.send_apart(hdr, headers, payload) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error().is_some_and(|c| c != libc::EBADF) => {
                tracing::trace!(device = %self.name, error = %e, "device write failed");
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one packet: `hdr` then `packet` (an IPv4/IPv6 packet), in one `writev`
    /// without copying. The kernel parses the header with `virtio_net_hdr_to_skb`;
    /// a header it rejects (e.g. a checksum offset outside the packet, an unknown
    /// `gso_type`) gives `EINVAL`. The write is all-or-nothing.
    pub fn send(&self, hdr: &VnetHdr, packet: &[u8]) -> io::Result<()> {
        self.send_apart(hdr, packet, &[])
    }

    /// [`TunDevice::send`] of a packet whose payload lies apart from its headers (a
    /// slice of lowtide's send queue): `hdr`, `headers` and `payload` are gathered by
    /// the one `writev`, so the kernel's copy into its skb is the payload's only one
    /// (`tun_get_user`), as `tcp_sendmsg`'s is in Linux.
    pub fn send_apart(&self, hdr: &VnetHdr, headers: &[u8], payload: &[u8]) -> io::Result<()> {
        let h = hdr.to_bytes();
        let iov = [h.as_slice(), headers, payload].map(|b| libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        });
        let count = if payload.is_empty() { 2 } else { 3 };
        // SAFETY: the first `count` iovecs point at live buffers of the given
        // lengths, which writev only reads.
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), count) };
        let n = cvt_size(n)?;
        if n != h.len() + headers.len() + payload.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short write to {}: {n} bytes", self.name),
            ));
        }
        Ok(())
    }

    /// Runs a `SIOCGIF*`/`SIOCSIF*` ioctl on the AF_INET control socket.
    fn ioctl4(&self, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
        // SAFETY: every request used here reads/writes a `struct ifreq`.
        cvt(unsafe { libc::ioctl(self.ctl4.as_raw_fd(), request as _, req as *mut _) }).map(drop)
    }
}

/// Opens (or attaches to) a TUN device and, with an address, configures it and
/// brings it up.
pub fn open_device(
    name: &str,
    offload: Offload,
    addr: Option<(Ipv4Addr, u8)>,
) -> Result<TunDevice, String> {
    let dev = TunDevice::open(name, offload).map_err(|e| format!("TUN device {name}: {e}"))?;
    if let Some(addr) = addr {
        configure(&dev, addr)?;
    }
    Ok(dev)
}

/// Gives the kernel's side of `dev` its address and brings the device up.
pub fn configure(dev: &TunDevice, (a, len): (Ipv4Addr, u8)) -> Result<(), String> {
    let name = dev.name();
    dev.set_ipv4(a, len)
        .map_err(|e| format!("{name}: setting {a}/{len}: {e}"))?;
    dev.set_up().map_err(|e| format!("{name}: link up: {e}"))
}

impl AsRawFd for TunDevice {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for TunDevice {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Registers the device's file descriptor (readable: a packet is queued).
impl mio::event::Source for TunDevice {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        mio::unix::SourceFd(&self.fd.as_raw_fd()).register(registry, token, interests)
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: mio::Token,
        interests: mio::Interest,
    ) -> io::Result<()> {
        mio::unix::SourceFd(&self.fd.as_raw_fd()).reregister(registry, token, interests)
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        mio::unix::SourceFd(&self.fd.as_raw_fd()).deregister(registry)
    }
}

/// Opens `/dev/net/tun` read-write, close-on-exec.
fn open_dev_tun() -> io::Result<OwnedFd> {
    let path: &CStr = c"/dev/net/tun";
    // SAFETY: a NUL-terminated path; the returned descriptor is owned by us.
    let fd = cvt(unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `TUNSETIFF` with `IFF_TUN | IFF_NO_PI | IFF_VNET_HDR | extra`; returns the name the
/// kernel gave the interface.
fn tun_set_iff(fd: &OwnedFd, mut req: libc::ifreq, extra: libc::c_int) -> io::Result<String> {
    let flags = libc::IFF_TUN | libc::IFF_NO_PI | libc::IFF_VNET_HDR | extra;
    req.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes a `struct ifreq`.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF as _, &mut req) })?;
    let name: Vec<u8> = req
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&name).into_owned())
}

/// `TUNSETVNETHDRSZ` (10), `TUNSETVNETLE` (so [`VnetHdr`] is little-endian on every
/// host) and `TUNSETOFFLOAD`.
fn configure_vnet(fd: &OwnedFd, offload: Offload) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    let size: libc::c_int = VnetHdr::LEN as libc::c_int;
    // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer.
    cvt(unsafe { libc::ioctl(raw, libc::TUNSETVNETHDRSZ as _, &size) })
        .map_err(|e| context(e, "TUNSETVNETHDRSZ"))?;
    let le: libc::c_int = 1;
    // SAFETY: TUNSETVNETLE reads an int through the pointer.
    let r = cvt(unsafe { libc::ioctl(raw, libc::TUNSETVNETLE as _, &le) });
    // TUNSETVNETLE exists since Linux 4.2 (`TUN_VNET_LE`); before that, a
    // little-endian host's native order is LE anyway.
    if let Err(e) = r {
        if cfg!(target_endian = "big") {
            return Err(context(e, "TUNSETVNETLE"));
        }
    }
    // SAFETY: TUNSETOFFLOAD takes its flags by value.
    cvt(unsafe {
        libc::ioctl(
            raw,
            libc::TUNSETOFFLOAD as _,
            offload.tun_flags() as libc::c_ulong,
        )
    })
    .map(drop)
    .map_err(|e| context(e, "TUNSETOFFLOAD"))
}

/// A close-on-exec datagram socket of `family`, for interface ioctls.
fn socket(family: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned by us.
    let fd = cvt(unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A zeroed `struct ifreq` with `ifr_name` = `name` (checked: shorter than
/// `IFNAMSIZ`, no NUL, no '/' or whitespace as `dev_valid_name` requires).
fn ifreq_named(name: &str) -> io::Result<libc::ifreq> {
    let bad = name.len() > MAX_NAME_LEN
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == 0 || b == b'/' || b == b':' || b.is_ascii_whitespace());
    if bad {
        return Err(invalid(format!(
            "invalid interface name {name:?} (at most {MAX_NAME_LEN} bytes, no '/', ':' or spaces)"
        )));
    }
    // SAFETY: `ifreq` is plain data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

/// A `sockaddr` holding the `sockaddr_in` for `addr` (port 0).
fn sockaddr_v4(addr: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: `sockaddr_in` and `sockaddr` are both 16 bytes of plain data.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// `-1` to the last OS error.
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `-1` to the last OS error, for read/write counts.
fn cvt_size(r: libc::ssize_t) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Prefixes an error with what was being done, keeping its kind.
fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(ifreq_named("lowtide0").is_ok());
        assert!(ifreq_named(&"x".repeat(15)).is_ok());
        for bad in [
            "x".repeat(16),
            "a/b".into(),
            "a b".into(),
            "a\0".into(),
            "..".into(),
        ] {
            assert_eq!(
                ifreq_named(&bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn offload_flags() {
        assert_eq!(Offload::None.tun_flags(), 0);
        assert_eq!(Offload::Full.tun_flags(), 0x07);
    }
}
