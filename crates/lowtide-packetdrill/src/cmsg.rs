//! Writing control messages into a caller's `msghdr` as Linux's `put_cmsg` does.

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
}
