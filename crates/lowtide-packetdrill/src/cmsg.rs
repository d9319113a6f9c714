//! Writing control messages into a caller's `msghdr` as Linux's `put_cmsg` does,
//! and cutting a caller's buffers into the page fragments `MSG_ZEROCOPY` pins.

use lowtide::posix::consts::MSG_CTRUNC;
use lowtide::posix::Cmsg;
use std::mem::size_of;

/// `CMSG_ALIGN`: rounds up to the size of `long`.
fn align(n: usize) -> usize {
    let a = size_of::<libc::c_long>();
    n.div_ceil(a) * a
}

/// Encodes `cmsgs` into `buf` as consecutive `struct cmsghdr` + data records
/// (`put_cmsg`): a record that does not fit whole is cut to the room left and
/// `MSG_CTRUNC` is raised; with no room for a header nothing more is written.
/// Returns the bytes used (the new `msg_controllen`) and the extra flags.
pub fn encode(buf: &mut [u8], cmsgs: &[Cmsg]) -> (usize, i32) {
    let hdr = size_of::<libc::cmsghdr>();
    let mut at = 0;
    let mut flags = 0;
    for c in cmsgs {
        let room = buf.len() - at;
        if room < hdr {
            flags |= MSG_CTRUNC;
            break;
        }
        let mut cmlen = align(hdr) + c.data.len();
        if cmlen > room {
            flags |= MSG_CTRUNC;
            cmlen = room;
        }
        let h = libc::cmsghdr {
            cmsg_len: cmlen as _,
            cmsg_level: c.level,
            cmsg_type: c.kind,
        };
        // SAFETY: `cmsghdr` is plain old data of `hdr` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(&h as *const _ as *const u8, hdr) };
        buf[at..at + hdr].copy_from_slice(bytes);
        let data = cmlen - align(hdr).min(cmlen);
        let start = at + align(hdr).min(cmlen);
        buf[start..start + data].copy_from_slice(&c.data[..data]);
        at += align(cmlen).min(room);
    }
    (at, flags)
}

/// Writes `cmsgs` into `m.msg_control` (at most `m.msg_controllen` bytes), sets
/// `msg_controllen` to what was used and adds `MSG_CTRUNC` to `msg_flags` if cut.
///
/// # Safety
/// `m.msg_control` must point to `m.msg_controllen` writable bytes (or be null).
pub unsafe fn put_all(m: &mut libc::msghdr, cmsgs: &[Cmsg]) {
    if m.msg_control.is_null() || m.msg_controllen == 0 {
        if !cmsgs.is_empty() {
            m.msg_flags |= MSG_CTRUNC;
        }
        m.msg_controllen = 0;
        return;
    }
    let buf = std::slice::from_raw_parts_mut(m.msg_control as *mut u8, m.msg_controllen);
    let (used, flags) = encode(buf, cmsgs);
    m.msg_controllen = used as _;
    m.msg_flags |= flags;
}

/// `PAGE_SIZE`.
const PAGE: usize = 4096;

/// The page fragments of `iov` as `__zerocopy_sg_from_iter` takes them: each buffer
/// cut at page boundaries, a piece that continues the previous one in the same
/// page joining it (`skb_can_coalesce`), empty buffers skipped.
///
/// # Safety
/// Every `iov` entry must describe readable memory (or be empty).
pub unsafe fn page_pieces(iov: &[libc::iovec]) -> Vec<&'static [u8]> {
    let mut out: Vec<&'static [u8]> = Vec::new();
    for v in iov
        .iter()
        .filter(|v| v.iov_len > 0 && !v.iov_base.is_null())
    {
        let mut p = v.iov_base as usize;
        let end = p + v.iov_len;
        while p < end {
            let stop = ((p / PAGE + 1) * PAGE).min(end);
            match out.last_mut() {
                Some(l) if l.as_ptr() as usize + l.len() == p && !p.is_multiple_of(PAGE) => {
                    *l = std::slice::from_raw_parts(l.as_ptr(), l.len() + stop - p);
                }
                _ => out.push(std::slice::from_raw_parts(p as *const u8, stop - p)),
            }
            p = stop;
        }
    }
    out
}

/// [`page_pieces`] of one buffer.
pub fn page_pieces_of(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let p = rest.as_ptr() as usize;
        let n = ((p / PAGE + 1) * PAGE - p).min(rest.len());
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inq(v: i32) -> Cmsg {
        Cmsg {
            level: 6,
            kind: 36,
            data: v.to_ne_bytes().to_vec(),
        }
    }

    #[test]
    fn records_are_aligned_and_cut_with_ctrunc() {
        let mut buf = [0u8; 64];
        let (n, f) = encode(&mut buf, &[inq(7), inq(8)]);
        // CMSG_SPACE(4) = 16 + 8 on 64-bit.
        assert_eq!((n, f), (2 * align(size_of::<libc::cmsghdr>() + 4), 0));
        let hdr = size_of::<libc::cmsghdr>();
        assert_eq!(buf[hdr..hdr + 4], 7i32.to_ne_bytes());
        let mut small = [0u8; 18];
        let (n, f) = encode(&mut small, &[inq(7)]);
        assert_eq!((n, f), (18, MSG_CTRUNC));
        let mut none = [0u8; 8];
        assert_eq!(encode(&mut none, &[inq(7)]), (0, MSG_CTRUNC));
    }

    #[test]
    fn pieces_split_at_pages_and_join_contiguous_buffers() {
        let buf = vec![0u8; 3 * PAGE];
        let base = buf.as_ptr() as usize;
        let off = (PAGE - base % PAGE) % PAGE; // first page boundary in buf
        let at = |o: usize| unsafe { buf.as_ptr().add(o) } as *mut libc::c_void;
        let iov = [
            libc::iovec {
                iov_base: at(off + 10),
                iov_len: 5,
            },
            libc::iovec {
                iov_base: at(off + 15),
                iov_len: 5,
            }, // contiguous: joins
            libc::iovec {
                iov_base: at(off + 100),
                iov_len: 0,
            }, // empty: skipped
            libc::iovec {
                iov_base: at(off + 200),
                iov_len: PAGE,
            }, // crosses a page
        ];
        let p = unsafe { page_pieces(&iov) };
        let lens: Vec<usize> = p.iter().map(|s| s.len()).collect();
        assert_eq!(lens, [10, PAGE - 200, 200]);
        let one = page_pieces_of(&buf[off + 1..off + 1 + PAGE]);
        assert_eq!(
            one.iter().map(|s| s.len()).collect::<Vec<_>>(),
            [PAGE - 1, 1]
        );
    }
}
