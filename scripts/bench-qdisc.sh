#!/usr/bin/env bash
# Simulator speed with many flows per host qdisc (issue 26): wire packets per wall
# second, and whether every flow connected and how fairly they shared, for each
# net.core.default_qdisc, interleaved so that a busy machine slows all alike.
#
#   scripts/bench-qdisc.sh [FLOWS...]          # default: 200 2000, 3 repetitions
#   REPS=1 QDISCS="pfifo_fast fq" scripts/bench-qdisc.sh 10000
#
# Prints one line per run, then the median packets/s per (flows, qdisc).
set -euo pipefail
cd "$(dirname "$0")/.."
flows=("$@")
if [ ${#flows[@]} -eq 0 ]; then flows=(200 2000); fi
reps=${REPS:-3}
qdiscs=(${QDISCS:-pfifo_fast fq fq_codel})
cargo build --release -q -p lowtide-cli
bin=target/release/lowtide
out=$(mktemp)
for n in "${flows[@]}"; do
  for rep in $(seq "$reps"); do
    for q in "${qdiscs[@]}"; do
      # A failed verdict (exit 1) is a result to print, not an error.
      { "$bin" sim stream -P "$n" --rate 10gbit --rtt 1ms --duration 1s \
          --sysctl "net.core.default_qdisc=$q" --json || true; } |
        python3 -c '
import json, sys
r = json.load(sys.stdin)
n, q = sys.argv[1], sys.argv[2]
idle = sum(1 for f in r["per_flow"] if f["bytes_delivered"] == 0)
pkts, wall = r["sim_packets"], r["sim_wall_s"]
print("%s %s packets=%d wall_s=%.2f pps=%.0f jain=%.3f never_delivered=%d queue_drops=%d verified=%s"
      % (n, q, pkts, wall, pkts / wall, r["jain_index"], idle, r["drops"]["queue"], r["bytes_verified"]))
' "$n" "$q" | tee -a "$out"
    done
  done
done
echo "median packets/s:"
python3 - "$out" <<'PY'
import statistics, sys, collections
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    runs[(int(f[0]), f[1])].append(float(f[4].split("=")[1]))
for (n, q), v in sorted(runs.items()):
    print(f"  {n:>6} flows {q:<11} {statistics.median(v) / 1e3:8.0f} k  ({len(v)} runs)")
PY
rm -f "$out"
