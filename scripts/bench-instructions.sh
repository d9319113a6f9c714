#!/usr/bin/env bash
# Simulator cost as instructions per wire packet, HEAD against other commits: a figure
# that neither the machine's load nor its speed changes (wall-clock ratios on a shared
# 2-core VM swing by tens of percent; see scripts/bench-sim.sh for those).
#
# Each commit's `lowtide` is built beside HEAD (scripts/build-commit.sh) and run under
# valgrind's callgrind (which counts instructions executed, Ir) on two workloads:
#   1 flow:    lowtide sim stream --rate 10gbit --rtt 1ms --duration 200ms --json
#   200 flows: lowtide sim stream --rate 10gbit --rtt 1ms --duration 100ms --flows 200 --json
# and prints the instructions over `sim_packets` (every segment put on the simulated
# link, both directions), with the ratio to the first commit given. The run is
# deterministic: the same binary gives the same count (to a few hundred instructions
# of the runtime's own start-up), and a change that moves code without changing what
# it does should change the count by well under 1 %. Caches and branch prediction are
# not in the figure: a change in memory layout shows in bench-sim.sh, not here.
#
# Usage: scripts/bench-instructions.sh [COMMIT...]   (default: HEAD's parent; HEAD is
#        always measured, last, from target/release/lowtide, built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind > /dev/null ||
  { echo "bench-instructions.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
[ $# -gt 0 ] || set -- HEAD^
[ -x target/release/lowtide ] || cargo build --release -q -p lowtide-cli
bins=()
names=()
for c in "$@"; do
  bins+=("$(scripts/build-commit.sh "$c")")
  names+=("$(git rev-parse --short "$c")")
done
bins+=(target/release/lowtide)
names+=("HEAD $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo +dirty)")

workloads=("1 flow|--rate 10gbit --rtt 1ms --duration 200ms"
  "200 flows|--rate 10gbit --rtt 1ms --duration 100ms --flows 200")
err=$(mktemp)
trap 'rm -f "$err"' EXIT
echo "| workload | binary | wire packets | instructions | per packet | / first |"
echo "|---|---|---|---|---|---|"
for w in "${workloads[@]}"; do
  label=${w%%|*}
  read -r -a args <<< "${w#*|}"
  first=
  for i in "${!bins[@]}"; do
    out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
      "${bins[$i]}" sim stream "${args[@]}" --json 2> "$err")
    pk=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["sim_packets"])' <<< "$out")
    ir=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$err")
    [ -n "$ir" ] || { echo "bench-instructions.sh: no count from callgrind:" >&2; cat "$err" >&2; exit 1; }
    per=$(python3 -c "print(f'{$ir / $pk:.0f}')")
    first=${first:-$per}
    ratio=$(python3 -c "print(f'{$per / $first:.4f}')")
    echo "| $label | ${names[$i]} | $pk | $ir | $per | $ratio |"
  done
done
