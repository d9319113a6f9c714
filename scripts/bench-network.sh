#!/usr/bin/env bash
# The network engine's speed against the two-host simulator (issue 22 item 6): one
# bulk flow through a router against `sim stream` on one direct link with the same
# bottleneck (RATE, 20 ms RTT), in the same run, interleaved, REPS times each.
#
#   direct:  lowtide sim stream --rate RATE --rtt 20ms --duration 5s --json
#   router:  lowtide sim run (a -> r at RATE, 0 ms; r -> b at RATE, 10 ms) --json
#
# Reports medians of data segments delivered per wall second (bytes delivered / 1448
# / the run's wall time: the same work counted the same way in both, though the
# router serializes each data segment twice and handles it once more) and their
# ratio (router / direct), and wire packets per wall second as each engine counts
# them (every segment put on any link direction).
#
# Usage: scripts/bench-network.sh [RATE] [REPS]     (default 1gbit, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-1gbit}
reps=${2:-5}
cargo build --release -q -p lowtide-cli
bin=target/release/lowtide
file=$(mktemp --suffix=.toml)
trap 'rm -f "$file"' EXIT
cat > "$file" <<TOML
[run]
duration = "5s"
[hosts.a]
[hosts.b]
[routers.r]
[links.up]
between = ["a", "r"]
rate = "$rate"
[links.down]
between = ["r", "b"]
rate = "$rate"
delay = "10ms"
[flows.f]
from = "a"
to = "b"
TOML
for i in $(seq "$reps"); do
  "$bin" sim stream --rate "$rate" --rtt 20ms --duration 5s --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); b=sum(f["bytes_delivered"] for f in r["per_flow"]); print("direct", b, r["sim_packets"], r["sim_wall_s"])'
  "$bin" sim run "$file" --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); b=sum(f["bytes"] for f in r["flows"]); print("router", b, r["sim_packets"], r["sim_wall_s"])'
done | python3 -c '
import sys, statistics as st
rows = [l.split() for l in sys.stdin]
seg = {"direct": [], "router": []}
wire = {"direct": [], "router": []}
for kind, b, pk, wall in rows:
    seg[kind].append(int(b) / 1448 / float(wall))
    wire[kind].append(int(pk) / float(wall))
for k in ("direct", "router"):
    print(f"{k:7} data segments/s {st.median(seg[k])/1e6:.3f} M   wire packets/s {st.median(wire[k])/1e6:.3f} M   ({len(seg[k])} runs)")
ratios = [r / d for r, d in zip(seg["router"], seg["direct"])]
print(f"router/direct (data segments per wall second, median of pairs): {st.median(ratios):.2f}")
'
