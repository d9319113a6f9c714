#!/usr/bin/env bash
# Simulator speed, HEAD against an older commit in the same run (issue 14).
#
# Builds BASELINE beside HEAD (scripts/build-commit.sh: release, cached under
# target/bench-base/), then runs both on the same workloads, interleaved (the order
# alternates each repetition), REPS times:
#   1 flow:    lowtide sim stream --rate 10gbit --rtt 1ms --duration 2s --json
#   200 flows: the same with --flows 200
#   1 flow big: one flow at --rtt 40ms with 512 MB tcp_wmem/tcp_rmem, whose buffers
#              span about the 200 flows' memory (their ratio separates per-flow costs
#              from the cost of a working set that misses the caches)
# and reports medians of
#   - wire packets per wall second (`sim_packets / sim_wall_s` of the JSON: every
#     segment put on the simulated link, both directions; the run loop's wall time),
#   - HEAD/BASELINE of that (median of the per-repetition ratios), and the 200-flow
#     rate over the 1-flow rate of each binary,
#   - CPU seconds (user + system, getrusage of the child) per GB delivered, and minor
#     page faults per GB,
#   - allocations per wire packet in steady state, from binaries built with the
#     `alloc-count` feature (src/alloc_count.rs of lowtide-cli): the difference
#     between a 2 s and a 1 s run over the difference in packets ("n/a" for a
#     baseline that predates the feature).
# Both binaries run the same command, so an old commit must accept its flags.
#
# Usage: scripts/bench-sim.sh [BASELINE] [REPS]     (default ef59ff3, 5)
#        BENCH_JSON=FILE also writes every measurement as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
baseline=${1:-ef59ff3}
reps=${2:-5}
case "$reps" in '' | *[!0-9]*) echo "bench-sim.sh: REPS must be a number" >&2; exit 2 ;; esac
base_bin=$(scripts/build-commit.sh "$baseline")
base_alloc=$(scripts/build-commit.sh "$baseline" alloc-count 2>/dev/null) || base_alloc=""
cargo build --release -q -p lowtide-cli --features alloc-count
mkdir -p target/bench
cp target/release/lowtide target/bench/lowtide-head-alloc-count
cargo build --release -q -p lowtide-cli
cp target/release/lowtide target/bench/lowtide-head
head_desc="HEAD $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes')"
export BASE_BIN=$base_bin BASE_ALLOC=$base_alloc BASE_DESC="$baseline" HEAD_DESC="$head_desc" REPS=$reps
exec python3 - <<'PY'
import json, os, resource, statistics, subprocess, sys, tempfile, time

REPS = int(os.environ["REPS"])
BINS = {"HEAD": "target/bench/lowtide-head", "BASE": os.environ["BASE_BIN"]}
ALLOC = {"HEAD": "target/bench/lowtide-head-alloc-count", "BASE": os.environ["BASE_ALLOC"]}
DESC = {"HEAD": os.environ["HEAD_DESC"], "BASE": os.environ["BASE_DESC"]}
COMMON = ["sim", "stream", "--rate", "10gbit", "--json"]
BIG = ["--sysctl", "net.ipv4.tcp_wmem=4096 16384 536870912",
       "--sysctl", "net.ipv4.tcp_rmem=4096 131072 536870912"]
WORK = {"1 flow": ["--rtt", "1ms", "--flows", "1"],
        "200 flows": ["--rtt", "1ms", "--flows", "200"],
        # One flow whose buffers span as much memory as the 200 flows' (~250 MB):
        # separates per-flow costs from the cost of a working set beyond the caches.
        "1 flow big": ["--rtt", "40ms", "--flows", "1"] + BIG}


def run(binary, extra, duration, env=None):
    """One run: its JSON and the child's CPU seconds and minor faults (wait4)."""
    args = [binary] + COMMON + extra + ["--duration", duration]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench-sim.sh: {' '.join(args)}: exit {p.returncode}")
    r = json.loads(out)
    gb = sum(f["bytes_delivered"] for f in r["per_flow"]) / 1e9
    return {
        "packets": r["sim_packets"],
        "wall_s": r["sim_wall_s"],
        "pps": r["sim_packets"] / r["sim_wall_s"],
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "minflt": ru.ru_minflt,
        "maxrss_mb": ru.ru_maxrss / 1024,
        "gb": gb,
    }


def allocs_per_packet(binary, extra):
    if not binary:
        return None
    counts = []
    for duration in ("1s", "2s"):
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            env = dict(os.environ, LOWTIDE_ALLOC_STATS=f.name)
            r = run(binary, extra, duration, env)
            a = json.load(open(f.name))
        counts.append((a["allocs"] + a["reallocs"], r["packets"]))
    (a1, p1), (a2, p2) = counts
    return (a2 - a1) / max(p2 - p1, 1)


res = {w: {b: [] for b in BINS} for w in WORK}
load = [os.getloadavg()[0]]
for rep in range(REPS):
    order = ["BASE", "HEAD"] if rep % 2 == 0 else ["HEAD", "BASE"]
    for w, extra in WORK.items():
        for b in order:
            res[w][b].append(run(BINS[b], extra, "2s"))
    load.append(os.getloadavg()[0])
    print(f"repetition {rep + 1}/{REPS}: " + ", ".join(
        f"{w} {b} {res[w][b][-1]['pps'] / 1e6:.3f} M" for w in WORK for b in BINS),
        file=sys.stderr)
alloc = {w: {b: allocs_per_packet(ALLOC[b], extra) for b in BINS} for w, extra in WORK.items()}

med = statistics.median
summary = {"baseline": DESC["BASE"], "head": DESC["HEAD"], "reps": REPS,
           "load_avg_1min": [round(x, 2) for x in load], "workloads": {}}
print(f"lowtide sim stream --rate 10gbit --duration 2s, --rtt 1ms --flows 1 | 200; "
      f"1 flow big: --rtt 40ms, tcp_wmem/tcp_rmem max 512 MB; "
      f"{REPS} repetitions interleaved; load average {min(load):.1f}-{max(load):.1f}")
print(f"HEAD = {DESC['HEAD']}, BASE = {DESC['BASE']}")
print(f"{'workload':<10} {'binary':<5} {'packets':>10} {'Mpkt/s':>8} {'range':>15} "
      f"{'CPU s/GB':>9} {'minflt/GB':>10} {'allocs/pkt':>10} {'RSS MB':>7}")
for w in WORK:
    s = summary["workloads"][w] = {}
    for b in BINS:
        rs = res[w][b]
        pps = [r["pps"] for r in rs]
        s[b] = {
            "packets": rs[0]["packets"],
            "pps_median": med(pps),
            "pps_all": pps,
            "cpu_s_per_gb": med([r["cpu_s"] / r["gb"] for r in rs]),
            "minflt_per_gb": med([r["minflt"] / r["gb"] for r in rs]),
            "maxrss_mb": med([r["maxrss_mb"] for r in rs]),
            "allocs_per_packet": alloc[w][b],
        }
        a = alloc[w][b]
        print(f"{w:<10} {b:<5} {rs[0]['packets']:>10} {med(pps) / 1e6:>8.3f} "
              f"{min(pps) / 1e6:>7.3f}-{max(pps) / 1e6:<7.3f} {s[b]['cpu_s_per_gb']:>9.3f} "
              f"{s[b]['minflt_per_gb']:>10.0f} {'n/a' if a is None else f'{a:.3f}':>10} "
              f"{s[b]['maxrss_mb']:>7.0f}")
    s["head_over_base"] = med([h["pps"] / o["pps"] for h, o in zip(res[w]["HEAD"], res[w]["BASE"])])
    s["cpu_head_over_base"] = med([h["cpu_s"] / h["packets"] / (o["cpu_s"] / o["packets"])
                                   for h, o in zip(res[w]["HEAD"], res[w]["BASE"])])
    print(f"{w:<10} HEAD/BASE packets/s {s['head_over_base']:.2f}x, "
          f"CPU per packet {s['cpu_head_over_base']:.2f}x")
for b in BINS:
    ratio = med([m["pps"] / o["pps"] for m, o in zip(res["200 flows"][b], res["1 flow"][b])])
    big = med([m["pps"] / o["pps"] for m, o in zip(res["200 flows"][b], res["1 flow big"][b])])
    summary[f"{b.lower()}_200_over_1"] = ratio
    summary[f"{b.lower()}_200_over_1_big"] = big
    print(f"{b}: 200-flow rate / 1-flow rate {ratio:.2f}; "
          f"/ 1 flow with a like working set {big:.2f}")
if os.environ.get("BENCH_JSON"):
    with open(os.environ["BENCH_JSON"], "w") as f:
        json.dump(summary, f, indent=1)
PY
