#!/usr/bin/env bash
# Memory of busy bulk flows (issue 26 §2): lowtide's send queues (`sk_wmem_queued`,
# `ss -m`'s `w`) and its process RSS against Linux's own sockets on the same path.
#   - Linux: N iperf3 flows between two network namespaces through `lowtide link
#     --rate RATE --rtt DELAY` (TUN devices; this kernel has no netem), its default
#     1,000-packet queue as the simulator's; `ss -tm` sampled every 0.5 s from 1 s on: mean `w` (sk_wmem_queued), `tb`
#     (sk_sndbuf) and `t` (sk_wmem_alloc) per flow.
#   - lowtide: `sim stream -P N --rate RATE --rtt DELAY` (stored payload and pattern),
#     the mean and peak `sk_wmem_queued` per flow from its memory sample (every
#     100 us) and the process's peak RSS per flow over one flow's.
# Needs root (namespaces, TUN). Usage: scripts/bench-busy-memory.sh [N] [RATE] [DELAY] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100} rate=${2:-1gbit} delay=${3:-1ms} secs=${4:-4}
bin=${LOWTIDE_BIN:-target/release/lowtide}
[ -n "${LOWTIDE_BIN:-}" ] || cargo build --release -q -p lowtide-cli
tmp=$(mktemp -d)
cleanup() { ip netns del ltbusyA 2>/dev/null || true; ip netns del ltbusyB 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
sim() { # MODE FLOWS -> "mean_w peak_w rss_kb"
  /usr/bin/time -f "%M" -o "$tmp/rss" "$bin" sim stream -P "$2" --rate "$rate" --rtt "$delay" \
    --duration "${secs}s" --payload "$1" --json > "$tmp/out.json"
  python3 - "$tmp/out.json" "$(tail -1 "$tmp/rss")" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["memory"]
print(int(m["mean_wmem_queued_per_flow"]), int(m["peak_wmem_queued_per_flow"]), sys.argv[2])
PY
}
for mode in ${MODES:-stored pattern}; do
  read -r _ _ one < <(sim "$mode" 1)
  read -r mean peak many < <(sim "$mode" "$n")
  echo "lowtide $mode: $n flows: sk_wmem_queued per flow mean $mean, peak $peak;" \
    "peak RSS $((many / 1024)) MB (1 flow: $((one / 1024)) MB), per extra flow $(( (many - one) * 1024 / (n - 1) )) bytes"
done
ip netns add ltbusyA; ip netns add ltbusyB
ip netns exec ltbusyA "$bin" link --tun la --tun-addr 10.77.0.1/24 --peer-tun lb \
  --peer-addr 10.77.0.2/24 --peer-netns ltbusyB --rate "$rate" --rtt "$delay" \
  --duration "$((secs + 3))s" >/dev/null 2>&1 &
link=$!
sleep 1
ip netns exec ltbusyB iperf3 -s -1 -D -p 5201
sleep 0.5
ip netns exec ltbusyA iperf3 -c 10.77.0.2 -p 5201 -P "$n" -t "$secs" -J > "$tmp/iperf.json" &
client=$!
sleep 1
for _ in $(seq 1 $(( (secs - 1) * 2 - 1 ))); do
  ip netns exec ltbusyA ss -tmn state established dst 10.77.0.2 >> "$tmp/ss.txt"
  echo "--" >> "$tmp/ss.txt"
  sleep 0.5
done
wait "$client"
wait "$link" || true
python3 - "$tmp/ss.txt" "$tmp/iperf.json" "$n" <<'PY'
import json, re, sys
w, tb, t, samples = [], [], [], 0
for block in open(sys.argv[1]).read().split("--"):
    rows = [dict(re.findall(r"([a-z]+)(\d+)", m)) for m in re.findall(r"skmem:\(([^)]*)\)", block)]
    rows = [r for r in rows if int(r["tb"]) > 0]
    rows.sort(key=lambda r: -int(r["w"]))
    rows = rows[: int(sys.argv[3])]  # the data flows (the control connection holds nothing)
    if rows:
        samples += 1
        w += [int(r["w"]) for r in rows]; tb += [int(r["tb"]) for r in rows]; t += [int(r["t"]) for r in rows]
bps = json.load(open(sys.argv[2]))["end"]["sum_sent"]["bits_per_second"]
mean = lambda v: sum(v) // max(len(v), 1)
print(f"linux: {sys.argv[3]} flows ({bps / 1e9:.2f} Gbit/s): per flow sk_wmem_queued (w) mean {mean(w)}, "
      f"peak {max(w or [0])}; sk_sndbuf (tb) mean {mean(tb)}; sk_wmem_alloc (t) mean {mean(t)}; {samples} samples")
PY
