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
# With FEATURES (cargo features of lowtide-cli, e.g. alloc-count) the binary is
# target/bench-base/<commit>/lowtide-<features>; the build fails (exit 1) if that
# commit has no such feature.
#
# Usage: scripts/build-commit.sh COMMIT [FEATURES]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] ||
  { echo "build-commit.sh: usage: scripts/build-commit.sh COMMIT [FEATURES]" >&2; exit 2; }
features=${2:-}
commit=$(git rev-parse --verify --quiet "$1^{commit}") ||
  { echo "build-commit.sh: $1: not a commit" >&2; exit 2; }
short=${commit:0:12}
base=$PWD/target/bench-base
out=$base/$short/lowtide${features:+-${features//,/-}}
if [ ! -x "$out" ]; then
  src=$base/$short/src
  if [ ! -f "$src/.complete" ]; then
    rm -rf "$src"
    mkdir -p "$src"
    git archive "$commit" | tar -x -C "$src"
    # git archive stamps every file with the commit's time. The shared target
    # directory's fingerprints do not depend on the source path, so a tree older than
    # the last baseline built there would be taken as up to date and that baseline's
    # binary copied out again: make the sources newer than any earlier build.
    find "$src" -exec touch {} +
    touch "$src/.complete"
  fi
  echo "build-commit.sh: building $short${features:+ with $features} (release) in $src" >&2
  (cd "$src" && CARGO_TARGET_DIR="$base/target" \
    cargo build --release -q -p lowtide-cli ${features:+--features "$features"} >&2)
  cp "$base/target/release/lowtide" "$out.tmp"
  mv "$out.tmp" "$out"
fi
echo "$out"
