//! Secret bytes for the engine from the OS random source (`getrandom(2)`): the real
//! path keys its ISNs, timestamp offsets and ephemeral ports with them (RFC 6528,
//! RFC 6056), so they do not follow from `--seed` as the simulator's do.

use std::io;

/// 32 bytes from `getrandom(2)` (blocking until the pool is initialized).
pub fn os_secret() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    let mut got = 0;
    while got < key.len() {
        // SAFETY: the pointer and length describe the unfilled tail of `key`.
        let n = unsafe {
            libc::getrandom(
                key[got..].as_mut_ptr().cast::<libc::c_void>(),
                key.len() - got,
                0,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_secrets_differ() {
        let a = super::os_secret().unwrap();
        let b = super::os_secret().unwrap();
        assert_ne!(a, b);
        assert_ne!(a, [0; 32]);
    }
}
