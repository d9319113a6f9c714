#!/usr/bin/env bash
# The real-path benchmark (issues 5 and 14), all in one run, as root:
#   (a) kernel -> kernel iperf3 over a veth pair
#   (b) lowtide iperf3 client -> kernel iperf3 server over TUN with offload
#   (c) the same without offload
#   (e) kernel iperf3 server -> lowtide iperf3 client (-R) over TUN with offload
#   (d) kernel -> kernel iperf3 through `lowtide link` (no impairment)
# Prints Gbit/s of each (the receiver's count: iperf3's end.sum_received), the ratios
# b/a, e/a, b/c, d/a, and for every transfer the CPU seconds per GB of each process
# (user + system, from /usr/bin/time: the TUN write path runs the kernel's receive
# processing in lowtide's system time, so "lowtide" includes kernel work) and
# lowtide's minor page faults per GB. Every namespace it makes is deleted on exit.
# lowtide's processes busy-poll their devices for LOWTIDE_BUSY_POLL µs (default 50:
# `--sysctl net.core.busy_poll=50` for (b), (c), (e), `--busy-poll 50` for the link);
# LOWTIDE_BUSY_POLL=0 makes them sleep at once, LOWTIDE_BUSY_POLL= (empty) passes no
# flag (for binaries older than the option). The kernel's veth run has no equivalent.
# With REPS > 1 the five runs repeat REPS times in the same order (each ratio against
# its own repetition's veth run, since this machine's speed swings by 2x between
# minutes) and the medians of the rates, ratios and CPU figures follow the per-run lines.
# With --queues (issue 26 §3) it runs instead, -P 4 each, interleaved:
#   (f) kernel -> kernel iperf3 -P 4 over the veth pair
#   (g) lowtide iperf3 -P 4 client -> kernel server over TUN, --queues 1
#   (h) the same with --queues 2 (a shard per queue, each on its own thread)
#   (i) kernel server -> lowtide client (-R) -P 4, --queues 1
#   (j) the same with --queues 2
# and prints the ratios h/g, j/i, g/f, h/f, j/f, the CPU seconds per GB of each
# process and of both together, and the load average before each repetition (the
# machine is shared: its other users' load is part of every figure).
# Usage: scripts/bench-real.sh [--queues] [SECONDS] [REPS]   (default 10, 1)
#        LOWTIDE_BIN=PATH uses that binary instead of building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=single
if [ "${1:-}" = --queues ]; then mode=queues; shift; fi
secs=${1:-10}
reps=${2:-1}
case "$secs$reps" in '' | *[!0-9]*) echo "bench-real.sh: SECONDS and REPS must be numbers" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "bench-real.sh: needs root (network namespaces, TUN)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "bench-real.sh: needs iperf3" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench-real.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
if [ -n "${LOWTIDE_BIN:-}" ]; then
  lt=$(realpath "$LOWTIDE_BIN")
else
  cargo build --release -q -p lowtide-cli
  lt=$PWD/target/release/lowtide
fi
tag="ltb$$"
busy=${LOWTIDE_BUSY_POLL-50}
lt_busy=()
link_busy=()
if [ -n "$busy" ]; then
  lt_busy=(--sysctl "net.core.busy_poll=$busy")
  link_busy=(--busy-poll "$busy")
fi
echo "lowtide busy-poll: ${busy:-(no flag)} us" >&2
tmp=$(mktemp -d)
nss=()
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for n in "${nss[@]:-}"; do [ -n "$n" ] && ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
mkns() { ip netns add "$1"; nss+=("$1"); ip netns exec "$1" ip link set lo up; }
# timed NAME CMD...: runs CMD recording wall, user, system seconds and minor faults.
timed() { local n=$1; shift; /usr/bin/time -f "%e %U %S %R" -o "$tmp/$n.time" "$@"; }
# server NS NAME: a one-shot kernel iperf3 server, timed.
server() {
  ip netns exec "$1" /usr/bin/time -f "%e %U %S %R" -o "$tmp/$2.time" \
    iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
  spid=$!
  pids+=("$spid")
  sleep 0.5
}
waitsrv() { wait "$spid" 2>/dev/null || true; }

# Namespaces: (a) a veth pair; (b), (c), (e) lowtide's TUN; (d) the link's two sides.
mkns "${tag}a"; mkns "${tag}b"
ip link add "${tag}x" netns "${tag}a" type veth peer name "${tag}y" netns "${tag}b"
ip -n "${tag}a" addr add 10.9.0.1/24 dev "${tag}x"; ip -n "${tag}a" link set "${tag}x" up
ip -n "${tag}b" addr add 10.9.0.2/24 dev "${tag}y"; ip -n "${tag}b" link set "${tag}y" up
mkns "${tag}l"
mkns "${tag}p"; mkns "${tag}q"

# one_rep R: the five runs, their files suffixed with R.
one_rep() {
  local r=$1
  # (a) veth
  server "${tag}b" "a-srv$r"
  ip netns exec "${tag}a" /usr/bin/time -f "%e %U %S %R" -o "$tmp/a-cli$r.time" \
    iperf3 -c 10.9.0.2 -t "$secs" -J >"$tmp/a$r.json"
  waitsrv
  # (b), (c) lowtide client over TUN; (e) the same, reversed
  server "${tag}l" "b-srv$r"
  ip netns exec "${tag}l" /usr/bin/time -f "%e %U %S %R" -o "$tmp/b-cli$r.time" \
    "$lt" iperf3 -c 10.7.0.1 -t "$secs" -J --tun lt0 --tun-addr 10.7.0.1/24 "${lt_busy[@]}" >"$tmp/b$r.json"
  waitsrv
  server "${tag}l" "c-srv$r"
  ip netns exec "${tag}l" /usr/bin/time -f "%e %U %S %R" -o "$tmp/c-cli$r.time" \
    "$lt" iperf3 -c 10.7.0.1 -t "$secs" -J --tun lt0 --tun-addr 10.7.0.1/24 --offload off "${lt_busy[@]}" >"$tmp/c$r.json"
  waitsrv
  server "${tag}l" "e-srv$r"
  ip netns exec "${tag}l" /usr/bin/time -f "%e %U %S %R" -o "$tmp/e-cli$r.time" \
    "$lt" iperf3 -c 10.7.0.1 -R -t "$secs" -J --tun lt0 --tun-addr 10.7.0.1/24 "${lt_busy[@]}" >"$tmp/e$r.json"
  waitsrv
  # (d) kernel -> kernel through lowtide link
  ip netns exec "${tag}p" /usr/bin/time -f "%e %U %S %R" -o "$tmp/d-link$r.time" \
    "$lt" link --tun la --tun-addr 10.8.0.1/24 --peer-tun lb \
    --peer-addr 10.8.0.2/24 --peer-netns "${tag}q" "${link_busy[@]}" >/dev/null 2>&1 &
  linkpid=$!
  pids+=("$linkpid")
  sleep 0.5
  server "${tag}q" "d-srv$r"
  ip netns exec "${tag}p" /usr/bin/time -f "%e %U %S %R" -o "$tmp/d-cli$r.time" \
    iperf3 -c 10.8.0.2 -t "$secs" -J >"$tmp/d$r.json"
  waitsrv
  for p in $(pgrep -P "$linkpid"); do kill -INT "$p" 2>/dev/null || true; done
  wait "$linkpid" 2>/dev/null || true
}
# queues_rep R: the -P 4 runs (f) to (j), their files suffixed with R.
queues_rep() {
  local r=$1
  cut -d' ' -f1-3 /proc/loadavg >"$tmp/load$r"
  server "${tag}b" "f-srv$r"
  ip netns exec "${tag}a" /usr/bin/time -f "%e %U %S %R" -o "$tmp/f-cli$r.time" \
    iperf3 -c 10.9.0.2 -t "$secs" -P 4 -J >"$tmp/f$r.json"
  waitsrv
  local run q rev
  for run in g:1: h:2: i:1:-R j:2:-R; do
    IFS=: read -r key q rev <<<"$run"
    server "${tag}l" "$key-srv$r"
    ip netns exec "${tag}l" /usr/bin/time -f "%e %U %S %R" -o "$tmp/$key-cli$r.time" \
      "$lt" iperf3 -c 10.7.0.1 -t "$secs" -P 4 $rev -J --tun lt0 --tun-addr 10.7.0.1/24 \
      --queues "$q" "${lt_busy[@]}" >"$tmp/$key$r.json"
    waitsrv
  done
}
for r in $(seq 1 "$reps"); do
  [ "$reps" -gt 1 ] && echo "repetition $r of $reps" >&2
  case $mode in
    single) one_rep "$r" ;;
    queues) queues_rep "$r" ;;
  esac
done

python3 - "$tmp" "$reps" "$mode" <<'PY'
import json, statistics, sys
tmp, reps, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def rx(name):
    s = json.load(open(f"{tmp}/{name}.json"))["end"]["sum_received"]
    return s["bits_per_second"] / 1e9, s["bytes"] / 1e9

def cpu(name):
    """(cpu seconds, minor faults) of a timed process, or None if it left no record."""
    try:
        f = open(f"{tmp}/{name}.time").read().split()
        return float(f[-3]) + float(f[-2]), int(f[-1])
    except (OSError, ValueError, IndexError):
        return None

runs = [("a", "kernel->kernel veth         ", "a-cli", "iperf3 -c", "a-srv", "iperf3 -s"),
        ("b", "lowtide->kernel TUN offload ", "b-cli", "lowtide", "b-srv", "iperf3 -s"),
        ("c", "lowtide->kernel TUN no offl.", "c-cli", "lowtide", "c-srv", "iperf3 -s"),
        ("e", "kernel->lowtide TUN offload ", "e-cli", "lowtide", "e-srv", "iperf3 -s"),
        ("d", "kernel->kernel lowtide link ", "d-cli", "iperf3 -c", "d-srv", "iperf3 -s")]
RATIOS = [("b/a", "b", "a"), ("e/a", "e", "a"), ("b/c", "b", "c"), ("d/a", "d", "a")]
if mode == "queues":
    runs = [("f", "kernel->kernel veth -P 4        ", "f-cli", "iperf3 -c", "f-srv", "iperf3 -s"),
            ("g", "lowtide->kernel -P 4 1 queue   ", "g-cli", "lowtide", "g-srv", "iperf3 -s"),
            ("h", "lowtide->kernel -P 4 2 queues  ", "h-cli", "lowtide", "h-srv", "iperf3 -s"),
            ("i", "kernel->lowtide -P 4 1 queue   ", "i-cli", "lowtide", "i-srv", "iperf3 -s"),
            ("j", "kernel->lowtide -P 4 2 queues  ", "j-cli", "lowtide", "j-srv", "iperf3 -s")]
    RATIOS = [("h/g", "h", "g"), ("j/i", "j", "i"), ("g/f", "g", "f"), ("h/f", "h", "f"),
              ("j/f", "j", "f")]
per = {}  # (run key, figure) -> one value per repetition
for r in range(1, reps + 1):
    load = open(f"{tmp}/load{r}").read().strip() if mode == "queues" else None
    if reps > 1 or load:
        print(f"repetition {r}:" + (f" (load average before it: {load})" if load else ""))
    g = {}
    for key, label, p1, n1, p2, n2 in runs:
        gbps, gb = rx(f"{key}{r}")
        g[key] = gbps
        per.setdefault((key, "Gbit/s"), []).append(gbps)
        parts = []
        procs = ((p1, n1), (p2, n2)) + ((("d-link", "lowtide link"),) if key == "d" else ())
        for p, n in procs:
            c = cpu(f"{p}{r}")
            if c:
                per.setdefault((key, n), []).append(c[0] / gb)
                parts.append(f"{n} {c[0] / gb:.3f}" + (f" ({c[1] / gb:.0f} minflt/GB)"
                                                      if n.startswith("lowtide") else ""))
        if mode == "queues":
            both = [cpu(f"{p}{r}") for p in (p1, p2)]
            if all(both):
                total = sum(c[0] for c in both) / gb
                per.setdefault((key, "both"), []).append(total)
                parts.append(f"both {total:.3f}")
        print(f"({key}) {label} {gbps:6.2f} Gbit/s   CPU s/GB: {', '.join(parts)}")
    for name, x, y in RATIOS:
        per.setdefault(("ratio", name), []).append(g[x] / g[y])
    print("   ".join(f"{name} {g[x] / g[y]:.2f}" for name, x, y in RATIOS))
if reps > 1:
    med = lambda k: statistics.median(per[k])
    print(f"medians of {reps}:")
    for key, label, p1, n1, p2, n2 in runs:
        procs = [n for n in (n1, n2, "lowtide link", "both") if (key, n) in per]
        cpus = ", ".join(f"{n} {med((key, n)):.3f}" for n in procs)
        print(f"({key}) {label} {med((key, 'Gbit/s')):6.2f} Gbit/s   CPU s/GB: {cpus}")
    print("   ".join(f"{name} {med(('ratio', name)):.2f} ({min(per[('ratio', name)]):.2f}-"
                     f"{max(per[('ratio', name)]):.2f})" for name, _, _ in RATIOS))
PY
