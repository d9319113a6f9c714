#!/usr/bin/env bash
# Send-buffer fidelity side by side (root, namespaces, iperf3): what the sender still
# holds when a timed iperf3 run ends (sender's count - receiver's count, per stream),
# lowtide's sender vs this machine's kernel on the same emulated path, and the
# kernel's sk_sndbuf (ss -m tb) at the end. Two paths, as BENCHMARKS.md reports:
#   fwd: iperf3 -c sends, -P 2, 10 ms RTT, 1 % loss (lowtide iperf3 -c -> kernel -s)
#   rev: -R (the server sends), 20 ms RTT, 1 % loss (lowtide iperf3 -s <- kernel -c -R)
# The kernel runs both ends in two namespaces joined by `lowtide link` (same path,
# same --seed, so the same loss draws on the data direction). Both namespaces use
# tcp_wmem "4096 16384 4194304" and CUBIC.
#
#   scripts/bench-sndbuf.sh [SEEDS] [BIN...]   # default seeds "1 2 3 4 5 6",
#                                              # BIN default target/release/lowtide
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "bench-sndbuf.sh: needs root (namespaces, TUN)" >&2; exit 2; }
seeds=${1:-1 2 3 4 5 6}
shift || true
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/lowtide)
out=$(mktemp -d /tmp/sndbuf-bench.XXXXXX)

setns() {
  ip netns del "$1" 2>/dev/null || true
  ip netns add "$1"
  ip -n "$1" link set lo up
  ip netns exec "$1" sysctl -qw net.ipv4.tcp_wmem="4096 16384 4194304" \
    net.ipv4.tcp_congestion_control=cubic
}

# lowtide sends; $1 binary, $2 fwd|rev, $3 seed, $4 output file
run_lowtide() {
  local lt=$1 dir=$2 seed=$3 f=$4
  setns sndbuf-l
  if [ "$dir" = fwd ]; then
    ip netns exec sndbuf-l iperf3 -s -1 -D
    sleep 0.3
    ip netns exec sndbuf-l "$lt" iperf3 -c 10.7.0.1 -t 3 -P 2 --tun slt0 \
      --tun-addr 10.7.0.1/24 --rtt 10ms --loss 1% --cc cubic --seed "$seed" >"$f" 2>&1
  else
    ip netns exec sndbuf-l "$lt" iperf3 -s -1 --tun slt1 --tun-addr 10.9.0.1/24 \
      --rtt 20ms --loss 1% --cc cubic --seed "$seed" >/dev/null 2>&1 &
    local sp=$!
    sleep 1
    ip netns exec sndbuf-l iperf3 -c 10.9.0.2 -t 3 -R >"$f" 2>&1
    wait $sp
  fi
  ip netns del sndbuf-l
}

# the kernel sends through `lowtide link`; $1 binary, $2 fwd|rev, $3 seed, $4 file
run_kernel() {
  local lt=$1 dir=$2 seed=$3 f=$4 rtt=10ms
  [ "$dir" = fwd ] || rtt=20ms
  setns sndbuf-a
  setns sndbuf-b
  "$lt" link --netns sndbuf-a --tun sla --tun-addr 10.8.0.1/24 --peer-netns sndbuf-b \
    --peer-tun slb --peer-addr 10.8.0.2/24 --rtt $rtt --loss 1% --seed "$seed" \
    --duration 8s >/dev/null 2>&1 &
  local lp=$!
  sleep 1.5
  if [ "$dir" = fwd ]; then
    ip netns exec sndbuf-b iperf3 -s -1 -D
    sleep 0.3
    ip netns exec sndbuf-a iperf3 -c 10.8.0.2 -t 3 -P 2 >"$f" 2>&1 &
  else
    ip netns exec sndbuf-a iperf3 -s -1 -D
    sleep 0.3
    ip netns exec sndbuf-b iperf3 -c 10.8.0.1 -t 3 -R >"$f" 2>&1 &
  fi
  local ip=$!
  : >"$f.ss"
  while kill -0 $ip 2>/dev/null; do
    ip netns exec sndbuf-a ss -tmi state established '( dport = :5201 or sport = :5201 )' \
      >>"$f.ss"
    sleep 0.1
  done
  wait $ip
  wait $lp
  ip netns del sndbuf-a
  ip netns del sndbuf-b
}

for s in $seeds; do
  for d in fwd rev; do
    for i in "${!bins[@]}"; do run_lowtide "${bins[$i]}" $d "$s" "$out/lowtide$i-$d-$s"; done
    run_kernel "${bins[0]}" $d "$s" "$out/kernel-$d-$s"
  done
done

python3 - "$out" "${#bins[@]}" <<'PY'
import glob, re, sys
out, nbins = sys.argv[1], int(sys.argv[2])
def gaps(f):
    s, r = {}, {}
    for line in open(f):
        m = re.match(r'\[\s*(\d+)\]\s+\S+\s+sec\s+([\d.]+) (\w)Bytes.*\s(sender|receiver)$', line.strip())
        if m:
            v = float(m.group(2)) / (1024 if m.group(3) == 'K' else 1)
            (s if m.group(4) == 'sender' else r)[m.group(1)] = v
    return [s[k] - r[k] for k in s if k in r]
def tb(f):
    last = {}
    for line in open(f + '.ss'):
        m = re.search(r'skmem:\(([^)]*)\)', line)
        if m and 'cubic' in line:
            v = int(dict(re.findall(r'([a-z]+)(\d+)', m.group(1)))['tb'])
            if v > 46080:
                last[len(last) % 2] = v
    return sorted(last.values())
for d in ('fwd', 'rev'):
    for name in [f'lowtide{i}' for i in range(nbins)] + ['kernel']:
        fs = sorted(glob.glob(f'{out}/{name}-{d}-*'))
        fs = [f for f in fs if not f.endswith('.ss')]
        g = [x for f in fs for x in gaps(f)]
        extra = ''
        if name == 'kernel':
            extra = '  kernel tb (KB): ' + ' '.join('/'.join(str(v // 1024) for v in tb(f)) for f in fs)
        mean = sum(g) / len(g) if g else float('nan')
        print(f'{d} {name}: gap MiB per stream ' + ' '.join(f'{x:.2f}' for x in g) + f'  mean {mean:.2f}{extra}')
PY
echo "raw output: $out"
