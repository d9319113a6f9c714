//! The `/proc/net` directory the runner mounts over the script's `/proc/net`
//! (`proc_net_dir=` in `--so_flags`): the library keeps its `tcp` and `tcp6` files
//! as Linux would print them for lowtide's sockets
//! ([`lowtide::posix::Host::proc_net_tcp`]), rewritten (atomically, by rename)
//! after every call that may change a socket, so that a script's `grep ...
//! /proc/net/tcp` reads lowtide's sockets, not the kernel's.

use lowtide::posix::Host;
use lowtide::Instant;
use std::path::PathBuf;

/// The directory and what was last written to it.
#[derive(Debug, Default)]
pub struct ProcNetDir {
    dir: Option<PathBuf>,
    written: [String; 2],
}

impl ProcNetDir {
    /// Keeps `dir`'s files, if any.
    pub fn new(dir: Option<PathBuf>) -> ProcNetDir {
        ProcNetDir {
            dir,
            ..ProcNetDir::default()
        }
    }

    /// Rewrites `tcp` and `tcp6` if their text changed.
    pub fn publish(&mut self, host: &Host, now: Instant) {
        let Some(dir) = &self.dir else {
            return;
        };
        for (i, (name, v6)) in [("tcp", false), ("tcp6", true)].into_iter().enumerate() {
            let text = host.proc_net_tcp(now, v6);
            if text == self.written[i] {
                continue;
            }
            let tmp = dir.join(format!(".{name}.tmp"));
            if std::fs::write(&tmp, &text).is_ok() && std::fs::rename(&tmp, dir.join(name)).is_ok()
            {
                self.written[i] = text;
            }
        }
    }
}
