#!/usr/bin/env bash
# The "no behaviour change" guard (issue 14): runs a fixed set of simulator runs
# (scripts/determinism.py lists them: loss, reorder, jitter, duplication, corruption,
# several flows, GRO off, the three congestion controls, the CPU model, a pcap of
# every wire byte, 60 soak runs, experiments e5 and e3 --quick) and compares their
# JSON, minus wall-clock fields, with a reference. Exit 1 on any difference.
#
#   scripts/check-determinism.sh                   # against tests/determinism/ (CI)
#   scripts/check-determinism.sh --against COMMIT  # against COMMIT built beside HEAD
#   scripts/check-determinism.sh --update          # rewrite tests/determinism/
#   scripts/check-determinism.sh --payload pattern # the same runs in the simulator's
#                                                  # pattern payload mode (issue 26)
#
# A commit that is meant to change behaviour rewrites the references with --update
# and says so; a commit that only makes lowtide faster leaves them alone.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=()
case "${1:-}" in
  "") ;;
  --update) mode=(--update) ;;
  --payload)
    [ $# -eq 2 ] || { echo "check-determinism.sh: --payload needs stored or pattern" >&2; exit 2; }
    mode=(--payload "$2") ;;
  --against)
    [ $# -eq 2 ] || { echo "check-determinism.sh: --against needs a commit" >&2; exit 2; }
    mode=(--against-bin "$(scripts/build-commit.sh "$2")") ;;
  *) echo "check-determinism.sh: $1: unknown argument (--update, --against COMMIT, --payload MODE)" >&2; exit 2 ;;
esac
cargo build --release -q -p lowtide-cli
exec python3 scripts/determinism.py --bin target/release/lowtide "${mode[@]}"
