#!/usr/bin/env bash
# The network engine with many flows through a router's fq_codel (issue 22 item 6):
# N bulk CUBIC flows a -> r -> b, a 10 Gbit/s access link and a 1 Gbit/s bottleneck
# (20 ms RTT) with fq_codel on the router's egress to b, 5 s of virtual time,
# against one flow on the same network, in the same run, interleaved, REPS times
# each. (With a 1 Gbit/s access link the sending host's own 1,000-packet pfifo is
# the bottleneck: 59 of 1,000 flows then deliver nothing in 5 s, their SYNs and
# first windows dropped there, and the router's fq_codel never builds a queue.)
#
#   lowtide sim run (count = N, or 1) --json
#
# Reports medians of data segments delivered per wall second (bytes delivered / 1448
# / the run's wall time), wire packets per wall second (every segment on any link
# direction), their ratio N flows / 1 flow, and Jain's fairness index over the N
# flows' bytes. A flow that never connects or stalls makes `sim run` exit 1 and say
# why on stderr; the bench still counts that run.
#
# Usage: scripts/bench-network-flows.sh [N] [REPS]     (default 1000, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
reps=${2:-3}
cargo build --release -q -p lowtide-cli
bin=target/release/lowtide
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for count in 1 "$n"; do
  cat > "$dir/flows$count.toml" <<TOML
[run]
duration = "5s"
[hosts.a]
[hosts.b]
[routers.r]
[links.up]
between = ["a", "r"]
rate = "10gbit"
[links.down]
between = ["r", "b"]
rate = "1gbit"
delay = "10ms"
queue = "fq_codel"
[flows.f]
from = "a"
to = "b"
count = $count
TOML
done
for i in $(seq "$reps"); do
  for count in 1 "$n"; do
    # A run with a failed flow exits 1 but still reports (its reason on stderr).
    { "$bin" sim run "$dir/flows$count.toml" --json || true; } |
      python3 -c 'import json,sys
r=json.load(sys.stdin); b=[f["bytes"] for f in r["flows"]]
jain=sum(b)**2/(len(b)*sum(x*x for x in b)) if sum(b) else 0
print(len(b), sum(b), r["sim_packets"], r["sim_wall_s"], jain)'
  done
done | python3 -c '
import sys, statistics as st
seg, wire, jain = {}, {}, {}
for l in sys.stdin:
    n, b, pk, wall, j = l.split()
    seg.setdefault(n, []).append(int(b) / 1448 / float(wall))
    wire.setdefault(n, []).append(int(pk) / float(wall))
    jain.setdefault(n, []).append(float(j))
for k in sorted(seg, key=int):
    print(f"{k:>5} flows: data segments/s {st.median(seg[k])/1e6:.3f} M   wire packets/s {st.median(wire[k])/1e6:.3f} M   Jain {st.median(jain[k]):.3f}   ({len(seg[k])} runs)")
one, many = sorted(seg, key=int)
ratios = [m / o for m, o in zip(seg[many], seg[one])]
print(f"{many} flows / 1 flow (data segments per wall second, median of pairs): {st.median(ratios):.2f}")
'
