#!/usr/bin/env bash
# Memory per idle established connection (issue 26 §2): lowtide in the simulator
# against Linux's own TCP on this machine's loopback.
#   - lowtide: `sim run` of N idle flows (a probe writing 1 byte every 100 ms, so each
#     connects and stays established; pattern payload) against 1 flow: peak RSS of
#     the process per extra flow, both ends of each connection and the simulator's
#     per-flow state included.
#   - Linux: N loopback connections (connect + accept, nothing sent), the growth
#     of the slab caches a socket takes (TCP, sock_inode_cache, filp, dentry) per
#     connection, both ends included, from /proc/slabinfo (needs root; other work on
#     the machine shows as noise in the kmalloc caches, so only these are summed).
# Usage: scripts/bench-flow-memory.sh [N]   (default 2000; Linux's side needs 2N files)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
case "$n" in '' | *[!0-9]*) echo "bench-flow-memory.sh: N must be a number" >&2; exit 2 ;; esac
cargo build --release -q -p lowtide-cli
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rss() {
  cat > "$tmp/idle.toml" <<TOML
[run]
duration = "1s"
[hosts.a]
[hosts.b]
[links.l]
between = ["a", "b"]
rate = "10gbit"
delay = "500us"
queue = "fq"
[flows.idle]
from = "a"
to = "b"
count = $1
probe = { size = 1, interval = "100ms" }
TOML
  /usr/bin/time -f "%M" -o "$tmp/rss" target/release/lowtide sim run "$tmp/idle.toml" \
    --payload pattern >/dev/null
  tail -1 "$tmp/rss"
}
one=$(rss 1)
many=$(rss "$n")
echo "lowtide: $n idle connections: peak RSS $((many / 1024)) MB, 1: $((one / 1024)) MB;" \
  "per connection $(( (many - one) * 1024 / (n - 1) )) bytes"
exec python3 - "$n" <<'PY'
import resource, socket, sys, time
n = int(sys.argv[1])
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
if hard != resource.RLIM_INFINITY and 2 * n + 20 > hard:
    sys.exit(f"bench-flow-memory.sh: {n} connections need {2 * n + 20} files (limit {hard})")
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
CACHES = ("TCP", "sock_inode_cache", "filp", "dentry")
def slab():
    d = {}
    for line in open("/proc/slabinfo"):
        f = line.split()
        if f[0] in CACHES:
            d[f[0]] = (int(f[1]), int(f[3]))
    return d
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(4096)
time.sleep(0.2)
before = slab()
conns = []
for _ in range(n):
    c = socket.create_connection(ls.getsockname())
    s, _ = ls.accept()
    conns += [c, s]
time.sleep(0.5)
after = slab()
total = 0
for k in CACHES:
    grown = (after[k][0] - before[k][0]) * after[k][1]
    total += grown
    print(f"linux: {k}: {after[k][1]} bytes an object, +{after[k][0] - before[k][0]} objects")
print(f"linux: {n} idle connections: per connection {total // n} bytes (slab)")
PY
