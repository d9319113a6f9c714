#!/usr/bin/env bash
# Many flows through fq in the pattern payload mode (issue 26 §2): HEAD against
# another commit built beside it (scripts/build-commit.sh), the two binaries
# interleaved (the order alternates each repetition, since this shared machine's
# load moves rates 3x), REPS times, for each N of FLOWS:
#   lowtide sim stream -P N --rate 10gbit --rtt 1ms --duration 1s \
#     --sysctl net.core.default_qdisc=fq --qdisc fq,limit=100000 --payload pattern --json
# and prints per run: wire packets (equal for both binaries unless behaviour
# changed), packets per wall second (`sim_packets / sim_wall_s`), packets per CPU
# second (user + system time of the process) and peak RSS (both from /usr/bin/time),
# then the medians
# of HEAD over BASE per N, and the load average before and after.
#
# Usage: scripts/bench-fq-flows.sh BASE_COMMIT [REPS] [FLOWS...]  (default 3; 10000 1)
#        BASE_BIN=PATH uses that binary as the base instead of building BASE_COMMIT.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "bench-fq-flows.sh: usage: BASE_COMMIT [REPS] [FLOWS...]" >&2; exit 2; }
base=${BASE_BIN:-$(scripts/build-commit.sh "$1")}
shift
reps=${1:-3}
shift || true
cargo build --release -q -p lowtide-cli
mkdir -p target/bench
cp target/release/lowtide target/bench/lowtide-fq-flows
export BASE="$base" REPS="$reps" FLOWS="${*:-10000 1}"
exec python3 - <<'PY'
import json, os, statistics, subprocess, sys

BINS = {"base": os.environ["BASE"], "head": "target/bench/lowtide-fq-flows"}
REPS = int(os.environ["REPS"])
FLOWS = [int(x) for x in os.environ["FLOWS"].split()]
COMMON = ["sim", "stream", "--rate", "10gbit", "--rtt", "1ms", "--duration", "1s",
          "--sysctl", "net.core.default_qdisc=fq", "--qdisc", "fq,limit=100000",
          "--payload", "pattern", "--json"]


def run(binary, flows):
    # Through /usr/bin/time: a child forked from this (large) Python process would
    # count the parent's pages in its own peak RSS (exec keeps the old mm's mark).
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", binary] + COMMON
                       + ["-P", str(flows)], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit(f"bench-fq-flows.sh: {binary} -P {flows}: exit {p.returncode}")
    rss_kb, user, system = p.stderr.strip().splitlines()[-1].split()
    r = json.loads(p.stdout)
    cpu = float(user) + float(system)
    return {"packets": r["sim_packets"], "wall_pps": r["sim_packets"] / r["sim_wall_s"],
            "cpu_pps": r["sim_packets"] / cpu, "rss_mb": int(rss_kb) / 1024}


print("load average before:", open("/proc/loadavg").read().split()[:3])
res = {(n, b): [] for n in FLOWS for b in BINS}
for rep in range(REPS):
    for n in FLOWS:
        order = list(BINS) if rep % 2 == 0 else list(BINS)[::-1]
        for b in order:
            m = run(BINS[b], n)
            res[(n, b)].append(m)
            print(f"rep {rep} flows {n} {b}: {m['packets']} packets, "
                  f"{m['wall_pps'] / 1e6:.3f} M/wall s, {m['cpu_pps'] / 1e6:.3f} M/CPU s, "
                  f"{m['rss_mb']:.0f} MB", flush=True)
print("load average after:", open("/proc/loadavg").read().split()[:3])
for n in FLOWS:
    h, b = res[(n, "head")], res[(n, "base")]
    for k in ("wall_pps", "cpu_pps", "rss_mb"):
        ratios = [x[k] / y[k] for x, y in zip(h, b)]
        print(f"flows {n}: {k} head/base median {statistics.median(ratios):.2f} "
              f"(runs {', '.join(f'{r:.2f}' for r in ratios)})")
    if {x["packets"] for x in h} != {y["packets"] for y in b}:
        print(f"flows {n}: WIRE PACKETS DIFFER: behaviour changed")
PY
