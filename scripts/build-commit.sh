#!/usr/bin/env bash
# Builds the `lowtide` binary of another commit beside HEAD, for A/B comparisons
# (scripts/bench-sim.sh, scripts/check-determinism.sh --against), and prints its path.
#
# The commit's tree is exported with `git archive` (no worktree is registered in the
# repository) to target/bench-base/<commit>/src and built in release mode with its own
# target directory, target/bench-base/target, shared by every baseline so that the
# dependencies are compiled once. The binary is kept as target/bench-base/<commit>/lowtide:
# a second call for the same commit returns at once.
#
# Usage: scripts/build-commit.sh COMMIT
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "build-commit.sh: usage: scripts/build-commit.sh COMMIT" >&2; exit 2; }
commit=$(git rev-parse --verify --quiet "$1^{commit}") ||
  { echo "build-commit.sh: $1: not a commit" >&2; exit 2; }
short=${commit:0:12}
base=$PWD/target/bench-base
out=$base/$short/lowtide
if [ ! -x "$out" ]; then
  src=$base/$short/src
  rm -rf "$src"
  mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
  echo "build-commit.sh: building $short (release) in $src" >&2
  (cd "$src" && CARGO_TARGET_DIR="$base/target" cargo build --release -q -p lowtide-cli >&2)
  cp "$base/target/release/lowtide" "$out.tmp"
  mv "$out.tmp" "$out"
fi
echo "$out"
