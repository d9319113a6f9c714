#!/usr/bin/env bash
# The real-path benchmark (issue 5), all four in one run, as root:
#   (a) kernel -> kernel iperf3 over a veth pair
#   (b) lowtide iperf3 client -> kernel iperf3 server over TUN with offload
#   (c) the same without offload
#   (d) kernel -> kernel iperf3 through `lowtide link` (no impairment)
# Prints Gbit/s of each (iperf3's end.sum_received.bits_per_second) and the ratios
# b/a, b/c, d/a. Every namespace it makes is deleted on exit.
# Usage: scripts/bench-real.sh [SECONDS]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
[ "$(id -u)" = 0 ] || { echo "bench-real.sh: needs root (network namespaces, TUN)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "bench-real.sh: needs iperf3" >&2; exit 2; }
cargo build --release -q -p lowtide-cli
lt=$PWD/target/release/lowtide
tag="ltb$$"
nss=()
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for n in "${nss[@]:-}"; do [ -n "$n" ] && ip netns del "$n" 2>/dev/null || true; done
}
trap cleanup EXIT
mkns() { ip netns add "$1"; nss+=("$1"); ip netns exec "$1" ip link set lo up; }
gbps() { python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9))'; }
server() { ip netns exec "$1" iperf3 -s -1 -p 5201 >/dev/null 2>&1 & pids+=($!); sleep 0.5; }

# (a) veth
mkns "${tag}a"; mkns "${tag}b"
ip link add "${tag}x" netns "${tag}a" type veth peer name "${tag}y" netns "${tag}b"
ip -n "${tag}a" addr add 10.9.0.1/24 dev "${tag}x"; ip -n "${tag}a" link set "${tag}x" up
ip -n "${tag}b" addr add 10.9.0.2/24 dev "${tag}y"; ip -n "${tag}b" link set "${tag}y" up
server "${tag}b"
a=$(ip netns exec "${tag}a" iperf3 -c 10.9.0.2 -t "$secs" -J | gbps)

# (b), (c) lowtide client over TUN
mkns "${tag}l"
server "${tag}l"
b=$(ip netns exec "${tag}l" "$lt" iperf3 -c 10.7.0.1 -t "$secs" -J --tun lt0 --tun-addr 10.7.0.1/24 | gbps)
server "${tag}l"
c=$(ip netns exec "${tag}l" "$lt" iperf3 -c 10.7.0.1 -t "$secs" -J --tun lt0 --tun-addr 10.7.0.1/24 --offload off | gbps)

# (d) kernel -> kernel through lowtide link
mkns "${tag}p"; mkns "${tag}q"
ip netns exec "${tag}p" "$lt" link --tun la --tun-addr 10.8.0.1/24 --peer-tun lb \
  --peer-addr 10.8.0.2/24 --peer-netns "${tag}q" >/dev/null 2>&1 & pids+=($!)
sleep 0.5
server "${tag}q"
d=$(ip netns exec "${tag}p" iperf3 -c 10.8.0.2 -t "$secs" -J | gbps)

python3 - "$a" "$b" "$c" "$d" <<'PY'
import sys
a, b, c, d = map(float, sys.argv[1:])
print(f"(a) kernel->kernel veth          {a:6.2f} Gbit/s")
print(f"(b) lowtide->kernel TUN offload  {b:6.2f} Gbit/s")
print(f"(c) lowtide->kernel TUN no offl. {c:6.2f} Gbit/s")
print(f"(d) kernel->kernel lowtide link  {d:6.2f} Gbit/s")
print(f"b/a {b/a:.2f}   b/c {b/c:.2f}   d/a {d/a:.2f}")
PY
