//! SIGINT and SIGTERM as a flag: a program that made namespaces, devices or qdiscs
//! (`lowtide link`, `lowtide net run`, `lowtide experiment --real`) checks
//! [`requested`] and ends on its own, so that its guards' `Drop` removes what it made
//! (a signal's default action would end the process with them left behind).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// From now on SIGINT and SIGTERM set the flag instead of ending the process.
pub fn install_handlers() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Whether SIGINT or SIGTERM came since [`install_handlers`].
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_sets_the_flag_and_the_process_goes_on() {
        install_handlers();
        // SAFETY: raising a signal whose handler was just installed.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(requested());
    }
}
