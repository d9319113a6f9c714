//! CPU utilization as iperf3's `cpu_util` reports it: the process's CPU time
//! (`getrusage(RUSAGE_SELF)`, user and system) over the wall time from the test's
//! start (`TEST_START`) to its end, in percent. Wall time comes from [`Sockets::now`],
//! CPU time from [`Sockets::cpu_time`].

use crate::sockets::Sockets;
use std::time::Duration;

/// A start sample and, once stopped, the utilization.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuMeter {
    start: Option<(Duration, CpuTime)>,
    result: Option<[f64; 3]>,
}

/// CPU time used by the process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// `ru_utime`.
    pub user: Duration,
    /// `ru_stime`.
    pub system: Duration,
}

impl CpuMeter {
    /// `cpu_util(NULL)`: remembers now.
    pub(crate) fn start<N: Sockets>(&mut self, net: &N) {
        self.start = Some((net.now(), net.cpu_time()));
        self.result = None;
    }

    /// `cpu_util(pcpu)`: the utilization since `start` (nothing if never started).
    pub(crate) fn stop<N: Sockets>(&mut self, net: &N) {
        let Some((t0, c0)) = self.start else { return };
        let wall = net.now().saturating_sub(t0).as_secs_f64();
        if wall <= 0.0 {
            return;
        }
        let c1 = net.cpu_time();
        let pct = |a: Duration, b: Duration| a.saturating_sub(b).as_secs_f64() / wall * 100.0;
        let (user, system) = (pct(c1.user, c0.user), pct(c1.system, c0.system));
        self.result = Some([user + system, user, system]);
    }

    /// `[total, user, system]` in percent; zeros before [`CpuMeter::stop`].
    pub(crate) fn percent(&self) -> [f64; 3] {
        self.result.unwrap_or_default()
    }
}

/// The process's CPU time from `getrusage(RUSAGE_SELF)`; zero where it is not
/// available.
pub fn process_cpu_time() -> CpuTime {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage fills the struct it is given; an all-zero rusage is valid.
        let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            let tv = |t: libc::timeval| {
                Duration::from_secs(t.tv_sec.max(0) as u64)
                    + Duration::from_micros(t.tv_usec.max(0) as u64)
            };
            return CpuTime {
                user: tv(ru.ru_utime),
                system: tv(ru.ru_stime),
            };
        }
    }
    CpuTime::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_cpu_time_grows_with_work() {
        let a = process_cpu_time();
        let mut x = 0u64;
        let end = std::time::Instant::now() + Duration::from_millis(30);
        while std::time::Instant::now() < end {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let b = process_cpu_time();
        assert!(b.user + b.system > a.user + a.system, "{a:?} -> {b:?}");
    }
}
