#!/usr/bin/env bash
# Builds the AFL++ targets and fuzzes each for SECONDS, one after the other; prints
# executions and crashes per target and exits 1 if any target crashed.
#   fuzz/run.sh SECONDS [TARGET...]      (targets: wire engine scoreboard)
# Needs cargo-afl (installed with `cargo install cargo-afl` if missing). Output (queue,
# crashes) goes to $FUZZ_OUT (default target/afl/out); the build to target/afl, so the
# instrumented build does not evict the normal one.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: fuzz/run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(wire engine scoreboard)
command -v cargo-afl >/dev/null 2>&1 || cargo install cargo-afl --locked
export CARGO_TARGET_DIR=target/afl
cargo afl build -p lowtide-fuzz --features afl --profile fuzz --quiet
out=${FUZZ_OUT:-target/afl/out}
mkdir -p "$out"
export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_AFFINITY=1
failed=0
for t in "${targets[@]}"; do
  rm -rf "${out:?}/$t"
  cargo afl fuzz -i "fuzz/corpus/$t" -o "$out/$t" -V "$secs" "target/afl/fuzz/fuzz_$t" >"$out/$t.log" 2>&1 || {
    echo "fuzz $t: afl-fuzz failed, see $out/$t.log" >&2
    tail -20 "$out/$t.log" >&2
    exit 1
  }
  stat() { awk -v k="$1" '$1 == k { print $3 }' "$out/$t/default/fuzzer_stats"; }
  echo "fuzz $t: $(stat execs_done) executions in ${secs} s ($(stat execs_per_sec)/s), corpus $(stat corpus_count), coverage $(stat bitmap_cvg), crashes $(stat saved_crashes)"
  if [ "$(stat saved_crashes)" != 0 ]; then
    ls "$out/$t/default/crashes/" >&2
    failed=1
  fi
done
exit $failed
