#!/usr/bin/env bash
# lowtide's simulator against ns-3 on the same link and flows (issue 26): wire
# packets per wall second and per CPU second of each, interleaved (order alternated
# per repetition, since this machine's load moves the absolute figures), and the
# ratio lowtide / ns-3 per repetition.
#
#   scripts/bench-ns3.sh [REPS] [FLOWS...]      (default 2 repetitions; 1 and 200 flows)
#   RATE=10gbit RTT_MS=1 DURATION=0.2 scripts/bench-ns3.sh 3 1 200
#
# The ns-3 program is benches/ns3/bulk.cc (ns-3 3.37 from Debian's libns3-dev,
# installed with apt-get if missing, built with g++ -O2 into target/ns3/bulk): one
# full-duplex point-to-point link, N CUBIC bulk flows, MSS 1448, SACK and
# timestamps, 1000-packet pfifo on each device, as `lowtide sim stream --flows N
# --rate RATE --rtt RTT --duration D` sets up (lowtide also verifies every byte;
# ns-3 carries no payload). A wire packet is one packet a device finished sending,
# either way (lowtide: `sim_packets`). CPU time is user + system of each process
# (GNU time).
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-2}
shift || true
flows=("$@")
[ ${#flows[@]} -gt 0 ] || flows=(1 200)
rate=${RATE:-10gbit}
rtt_ms=${RTT_MS:-1}
dur=${DURATION:-0.2}
ns3_rate=${rate/gbit/Gbps}
ns3_rate=${ns3_rate/mbit/Mbps}
mods="ns3-core ns3-network ns3-internet ns3-point-to-point ns3-applications ns3-traffic-control"
if ! pkg-config --exists $mods 2>/dev/null || [ ! -e /usr/lib/x86_64-linux-gnu/libgsl.so ]; then
  echo "bench-ns3: installing libns3-dev (ns-3 3.37) and libgsl-dev with apt-get" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libns3-dev libgsl-dev >/dev/null
fi
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
mkdir -p target/ns3
bin=target/ns3/bulk
if [ ! -x "$bin" ] || [ benches/ns3/bulk.cc -nt "$bin" ]; then
  # shellcheck disable=SC2046
  g++ -O2 -o "$bin" benches/ns3/bulk.cc $(pkg-config --cflags --libs $mods)
fi
cargo build --release -q -p lowtide-cli
lt=target/release/lowtide

# run NAME OUTFILE CMD...: the command's JSON line to OUTFILE, its CPU seconds printed.
run() {
  local out=$1
  shift
  /usr/bin/time -f '%U %S' -o "$out.time" "$@" >"$out" 2>/dev/null
  awk '{print $1 + $2}' "$out.time"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-6s %-4s %14s %14s %14s %14s %10s %10s %8s %8s\n' flows rep \
  "lowtide pkt/s" "ns-3 pkt/s" "lowtide /cpu" "ns-3 /cpu" "wall x" "cpu x" \
  "lt Gbps" "ns3 Gbps"
for n in "${flows[@]}"; do
  for r in $(seq 1 "$reps"); do
    order=(lt ns3)
    [ $((r % 2)) -eq 0 ] && order=(ns3 lt)
    for who in "${order[@]}"; do
      case $who in
        lt) lt_cpu=$(run "$tmp/lt" "$lt" sim stream --flows "$n" --rate "$rate" \
              --rtt "${rtt_ms}ms" --duration "${dur}s" --json) ;;
        ns3) ns_cpu=$(run "$tmp/ns3" "$bin" --flows="$n" --rate="$ns3_rate" \
              --rttMs="$rtt_ms" --duration="$dur") ;;
      esac
    done
    python3 - "$tmp/lt" "$tmp/ns3" "$lt_cpu" "$ns_cpu" "$n" "$r" <<'PY'
import json, sys
lt = json.load(open(sys.argv[1]))
ns = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
lt_cpu, ns_cpu, n, r = float(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
lw = lt["sim_packets"] / lt["sim_wall_s"]
nw = ns["wire_packets"] / ns["wall_s"]
lc = lt["sim_packets"] / max(lt_cpu, 0.01)
nc = ns["wire_packets"] / max(ns_cpu, 0.01)
print(f"{n:<6} {r:<4} {lw:14,.0f} {nw:14,.0f} {lc:14,.0f} {nc:14,.0f} {lw / nw:10.1f} "
      f"{lc / nc:10.1f} {lt['goodput_bps'] / 1e9:8.2f} {ns['goodput_bps'] / 1e9:8.2f}")
PY
  done
done
