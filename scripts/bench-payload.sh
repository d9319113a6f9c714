#!/usr/bin/env bash
# The simulator's payload modes with many flows (issue 26): stored (the default,
# each write copied into the send queue) against pattern (`--payload pattern`: the
# sockets store no payload, each packet's bytes made by the device that sends it),
# in one run, interleaved (the order alternates each repetition), REPS times:
#   lowtide sim stream --rate 10gbit --rtt 1ms --duration 2s --json --flows N
# for N = 1, 200 and 2000, and reports medians of
#   - wire packets per wall second (`sim_packets / sim_wall_s`: the run loop's),
#   - the N-flow rate over the 1-flow rate of the same mode (median of the
#     per-repetition ratios; the goal: 200 flows >= 0.8x one flow with pattern),
#   - pattern over stored, per workload,
#   - peak RSS (getrusage of the child) and RSS per flow: (RSS(N) - RSS(1)) / (N - 1),
#     what each busy established flow costs the process,
#   - the send queue each flow holds as the engine accounts it (`memory` of the
#     JSON: peak sk_wmem_queued per flow, what ss -m shows as `w`; the same in both
#     modes, since it is a figure of the run): what a stored flow keeps in memory.
# Every figure of the runs but wall time and RSS is the same in both modes
# (scripts/check-determinism.sh --payload pattern); the script checks sim_packets.
#
# Usage: scripts/bench-payload.sh [REPS] [FLOWS...]   (default 3; 1 200 2000)
#        BENCH_JSON=FILE also writes every measurement as JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
case "$reps" in '' | *[!0-9]*) echo "bench-payload.sh: REPS must be a number" >&2; exit 2 ;; esac
shift || true
flows="${*:-1 200 2000}"
cargo build --release -q -p lowtide-cli
mkdir -p target/bench
cp target/release/lowtide target/bench/lowtide-payload
export REPS=$reps FLOWS="$flows" HEAD_DESC="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' + uncommitted changes')"
exec python3 - <<'PY'
import json, os, statistics, subprocess, sys

REPS = int(os.environ["REPS"])
FLOWS = [int(x) for x in os.environ["FLOWS"].split()]
BIN = "target/bench/lowtide-payload"
MODES = ["stored", "pattern"]
COMMON = ["sim", "stream", "--rate", "10gbit", "--rtt", "1ms", "--duration", "2s", "--json"]


def run(mode, flows):
    args = [BIN] + COMMON + ["--flows", str(flows), "--payload", mode]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        sys.exit(f"bench-payload.sh: {' '.join(args)}: exit {status}")
    r = json.loads(out)
    established = sum(1 for f in r["per_flow"] if f.get("bytes_delivered", 0) > 0)
    return {
        "packets": r["sim_packets"],
        "pps": r["sim_packets"] / r["sim_wall_s"],
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "rss_mb": ru.ru_maxrss / 1024,
        "established": established,
        "wmem_queued_per_flow": r["memory"]["peak_wmem_queued_per_flow"],
    }


res = {m: {n: [] for n in FLOWS} for m in MODES}
load = [os.getloadavg()[0]]
for rep in range(REPS):
    order = MODES if rep % 2 == 0 else MODES[::-1]
    for n in FLOWS:
        for m in order:
            res[m][n].append(run(m, n))
        a, b = res["stored"][n][-1], res["pattern"][n][-1]
        if a["packets"] != b["packets"]:
            sys.exit(f"bench-payload.sh: {n} flows: the modes differ ({a['packets']} "
                     f"against {b['packets']} packets)")
    load.append(os.getloadavg()[0])
    print(f"repetition {rep + 1}/{REPS}: " + ", ".join(
        f"{n} {m} {res[m][n][-1]['pps'] / 1e6:.3f} M" for n in FLOWS for m in MODES),
        file=sys.stderr)

med = statistics.median
base = FLOWS[0]
summary = {"head": os.environ["HEAD_DESC"], "reps": REPS,
           "load_avg_1min": [round(x, 2) for x in load], "modes": {}}
print(f"lowtide sim stream --rate 10gbit --rtt 1ms --duration 2s --flows N --payload MODE; "
      f"{REPS} repetitions interleaved; load average {min(load):.1f}-{max(load):.1f}; "
      f"HEAD {os.environ['HEAD_DESC']}")
print(f"{'flows':>6} {'mode':<8} {'packets':>9} {'Mpkt/s':>7} {'range':>13} "
      f"{'/ 1 flow':>8} {'CPU s':>6} {'RSS MB':>7} {'KB/flow':>8} {'estab':>6} {'wmem KB':>8}")
for n in FLOWS:
    for m in MODES:
        rs = res[m][n]
        pps = [r["pps"] for r in rs]
        ratio = med([x["pps"] / o["pps"] for x, o in zip(rs, res[m][base])])
        rss = med([r["rss_mb"] for r in rs])
        per_flow = (rss - med([r["rss_mb"] for r in res[m][base]])) * 1024 / max(n - base, 1)
        s = summary["modes"].setdefault(m, {})[n] = {
            "packets": rs[0]["packets"], "pps_median": med(pps), "pps_all": pps,
            "over_1_flow": ratio, "cpu_s": med([r["cpu_s"] for r in rs]),
            "rss_mb": rss, "rss_kb_per_flow": per_flow if n != base else None,
            "established": rs[0]["established"],
            "wmem_queued_kb_per_flow": rs[0]["wmem_queued_per_flow"] / 1024,
        }
        print(f"{n:>6} {m:<8} {rs[0]['packets']:>9} {med(pps) / 1e6:>7.3f} "
              f"{min(pps) / 1e6:>6.3f}-{max(pps) / 1e6:<6.3f} {ratio:>8.2f} "
              f"{s['cpu_s']:>6.2f} {rss:>7.1f} "
              f"{'' if n == base else f'{per_flow:.1f}':>8} {rs[0]['established']:>6} "
              f"{s['wmem_queued_kb_per_flow']:>8.0f}")
    po = med([p["pps"] / s["pps"] for p, s in zip(res["pattern"][n], res["stored"][n])])
    summary.setdefault("pattern_over_stored", {})[n] = po
    print(f"{n:>6} pattern/stored packets/s {po:.2f}x")
if os.environ.get("BENCH_JSON"):
    with open(os.environ["BENCH_JSON"], "w") as f:
        json.dump(summary, f, indent=1)
PY
