//! Network namespaces (`ip netns`, `setns(2)`) for `lowtide link`, which opens one TUN
//! device in each of two namespaces from one process, and for the privileged tests,
//! which keep everything out of the root namespace.
//!
//! A namespace is named by a bind mount at `/run/netns/NAME` (what `ip netns add`
//! creates). The network namespace is a property of each *thread*: [`enter`] moves
//! only the calling thread, and sockets and TUN devices belong to the namespace that
//! was current when they were created, wherever they are used afterwards.

use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Where `ip netns add` puts the namespace files.
const NETNS_RUN_DIR: &str = "/run/netns";

/// The environment variable that turns a skipped privileged test into a failure.
pub const REQUIRE_PRIVILEGED_ENV: &str = "LOWTIDE_REQUIRE_PRIVILEGED_TESTS";

/// A named network namespace created by this process; deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// Creates the namespace `name` (`ip netns add NAME`). It starts with only a
    /// loopback interface, down. Needs root (`CAP_SYS_ADMIN`).
    pub fn create(name: &str) -> io::Result<NetNs> {
        check_name(name)?;
        run_ip(&["netns", "add", name])?;
        Ok(NetNs {
            name: name.to_owned(),
        })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command running `program` inside the namespace (`ip netns exec NAME
    /// program`); add arguments with [`Command::arg`].
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Moves the calling thread into the namespace until the guard drops (see
    /// [`enter`]).
    pub fn enter(&self) -> io::Result<NsGuard> {
        enter(&self.name)
    }

    /// Runs `f` on a new thread inside the namespace (see [`spawn_in`]).
    pub fn spawn<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<JoinHandle<T>> {
        spawn_in(&self.name, f)
    }
}

impl Drop for NetNs {
    /// `ip netns del NAME`, errors ignored. The namespace itself lives on while any
    /// socket, device file or thread still uses it.
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// A name for a namespace or interface unique to this process and call:
/// `prefix` + pid + `x` + a counter, at most 15 bytes (`IFNAMSIZ` - 1) so it can
/// name an interface too; `prefix` is shortened if needed.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let suffix = format!("{}x{n}", std::process::id());
    let room = crate::device::MAX_NAME_LEN.saturating_sub(suffix.len());
    let mut end = prefix.len().min(room);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{suffix}", &prefix[..end])
}

/// While alive, the calling thread is in another network namespace; dropping it
/// moves the thread back to the namespace it was in before [`enter`].
///
/// Not `Send`: it must be dropped on the thread that entered.
#[derive(Debug)]
pub struct NsGuard {
    /// The thread's namespace before [`enter`] (`/proc/thread-self/ns/net`).
    original: File,
    _not_send: PhantomData<*const ()>,
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.original) {
            // Cannot happen for a namespace we were in a moment ago, short of
            // losing CAP_SYS_ADMIN in between; leave a trace rather than panic.
            tracing::error!("setns back to the original network namespace: {e}");
        }
    }
}

/// Moves the calling thread (only it: `setns(2)` with `CLONE_NEWNET` on one thread)
/// into the namespace `/run/netns/NAME` and returns a guard that moves it back.
///
/// Sockets and TUN devices created while the guard lives belong to the namespace for
/// good: a TUN file opened inside stays bound to that namespace's interface after the
/// thread leaves. Threads that already exist are not moved, but a thread *spawned*
/// while the guard lives starts inside the namespace too (`clone(2)` copies the
/// creating thread's namespaces) and stays there. Needs `CAP_SYS_ADMIN`.
pub fn enter(name: &str) -> io::Result<NsGuard> {
    check_name(name)?;
    let original = File::open("/proc/thread-self/ns/net")
        .map_err(|e| context(e, "opening /proc/thread-self/ns/net"))?;
    let path = format!("{NETNS_RUN_DIR}/{name}");
    let target = File::open(&path).map_err(|e| context(e, &format!("opening {path}")))?;
    setns(&target).map_err(|e| context(e, &format!("setns into {path}")))?;
    Ok(NsGuard {
        original,
        _not_send: PhantomData,
    })
}

/// Runs `f` on a new thread that first enters the namespace `ns`, so that it can use
/// kernel sockets (`std::net`) there. Returns once the thread is inside, or the error
/// if it could not enter (then `f` is not run).
pub fn spawn_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    let name = ns.to_owned();
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name(format!("netns {ns}"))
        .spawn(move || {
            let guard = match enter(&name) {
                Ok(g) => g,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    // End the thread without `f`; the caller gets the error and
                    // drops the handle. resume_unwind skips the panic hook.
                    std::panic::resume_unwind(Box::new("could not enter the namespace"));
                }
            };
            let _ = tx.send(Ok(()));
            let out = f();
            drop(guard);
            out
        })?;
    rx.recv()
        .map_err(|_| io::Error::other("namespace thread died before entering"))??;
    Ok(handle)
}

/// True if this process can run the privileged tests: effective uid 0,
/// `/dev/net/tun` present and `ip` (iproute2) working.
///
/// Otherwise, if `LOWTIDE_REQUIRE_PRIVILEGED_TESTS` is set (CI sets it), panics with
/// the reason; if not, prints that `test` is skipped and returns false. A privileged
/// test starts with `if !privileged("name") { return; }`.
pub fn privileged(test: &str) -> bool {
    let missing = missing_privileges();
    if missing.is_empty() {
        return true;
    }
    let why = missing.join(", ");
    if std::env::var_os(REQUIRE_PRIVILEGED_ENV).is_some() {
        panic!("{test}: {REQUIRE_PRIVILEGED_ENV} is set but this test cannot run: {why}");
    }
    eprintln!(
        "skipping {test}: needs root for network namespaces and TUN (run as root, or set \
         {REQUIRE_PRIVILEGED_ENV}=1 to make this a failure) [{why}]"
    );
    false
}

/// What the privileged tests lack, in words (empty if nothing).
fn missing_privileges() -> Vec<String> {
    let mut missing = Vec::new();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        missing.push(format!("effective uid is {euid}, not 0"));
    }
    if !Path::new("/dev/net/tun").exists() {
        missing.push("/dev/net/tun does not exist".to_owned());
    }
    if let Err(e) = run_ip(&["netns", "list"]) {
        missing.push(format!("`ip netns list` failed: {e}"));
    }
    missing
}

/// Runs `ip ARGS`; an error carries its stderr.
fn run_ip(args: &[&str]) -> io::Result<()> {
    let cmd = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| context(e, &format!("running {cmd}")))?;
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    Err(io::Error::other(format!(
        "{cmd}: {} ({})",
        stderr.trim(),
        out.status
    )))
}

/// `setns(fd, CLONE_NEWNET)` for the calling thread.
fn setns(ns: &File) -> io::Result<()> {
    // SAFETY: setns on a namespace file descriptor we hold open.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A namespace name is a file name in /run/netns: not empty, `.` or `..`, no `/`.
fn check_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid network namespace name {name:?}"),
        ));
    }
    Ok(())
}

/// Prefixes an error with what was being done, keeping its kind.
fn context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_are_short_and_distinct() {
        let a = unique_name("lt");
        let b = unique_name("lt");
        assert_ne!(a, b);
        assert!(a.starts_with("lt"));
        let long = unique_name("a-very-long-prefix-indeed");
        assert!(long.len() <= 15, "{long}");
        assert!(long.starts_with('a'));
        assert!(unique_name("ééééééééééééé").len() <= 15);
    }

    #[test]
    fn bad_names_are_rejected() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert_eq!(enter(bad).unwrap_err().kind(), io::ErrorKind::InvalidInput);
            assert_eq!(
                NetNs::create(bad).unwrap_err().kind(),
                io::ErrorKind::InvalidInput
            );
        }
    }

    #[test]
    fn entering_a_missing_namespace_fails_cleanly() {
        let err = enter("lowtide-no-such-ns").unwrap_err();
        assert!(err.to_string().contains("/run/netns/lowtide-no-such-ns"));
        let err = spawn_in("lowtide-no-such-ns", || 1).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
