#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its checked-in seeds and
# fails on any crash, leak, timeout, out-of-memory or sanitizer report.
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]   (env: JOBS)
# BUILD_DIR: a build configured with CC=clang-14 CXX=clang++-14
# -DMINFER_FUZZ=ON -DMINFER_SANITIZE=address,undefined (.ci/sanitizers does).
# New inputs go to a scratch corpus (the checked-in one is only read); a
# crash's reproducer is left in $FUZZ_ARTIFACTS (default /tmp/minfer-fuzz-artifacts)
# and the run fails: copy it to tests/fuzz/regressions/<target>/, fix, add a test.
# Prints per target: executions, execs/s, coverage (edges) and features.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: run_fuzz.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: run_fuzz.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(gguf tokenizer_spm tokenizer_bpe chat_template http_request json_schema)
artifacts=${FUZZ_ARTIFACTS:-/tmp/minfer-fuzz-artifacts}
mkdir -p "$artifacts"
scratch=$(mktemp -d /tmp/minfer-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# Leaks count (LSan is on in libFuzzer by default); UBSan aborts (the build
# uses -fno-sanitize-recover); -rss_limit_mb bounds one input's memory.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Targets run side by side, JOBS at a time (default: the cores), each for the
# whole SECONDS: libFuzzer runs one process per target, so two cores fuzz two
# targets in the time of one. The table is printed in the targets' order.
jobs=${JOBS:-$(nproc)}
fuzz() {  # fuzz TARGET: runs it and leaves its exit status in $scratch/TARGET.rc
  local t=$1 max_len=4096 rc=0
  mkdir -p "$scratch/$t"
  # The GGUF seeds are up to ~40 KB; the other targets' inputs stay small.
  [ "$t" = gguf ] && max_len=65536
  "$build/tests/fuzz/fuzz_$t" "$scratch/$t" "$here/corpus/$t" -max_total_time="$seconds" -max_len=$max_len \
    -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" \
    >"$scratch/$t.log" 2>&1 || rc=$?
  echo "$rc" >"$scratch/$t.rc"
}
running=0
for t in "${targets[@]}"; do
  [ -x "$build/tests/fuzz/fuzz_$t" ] || { echo "run_fuzz.sh: no $build/tests/fuzz/fuzz_$t" >&2; exit 2; }
done
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz "$t" &
  running=$((running + 1))
done
wait
failed=0
printf '%-15s %12s %10s %8s %9s %s\n' target executions execs/s cov features result
for t in "${targets[@]}"; do
  log=$scratch/$t.log
  rc=$(cat "$scratch/$t.rc" 2>/dev/null || echo "?")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$( (grep -oE 'cov: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  ft=$( (grep -oE 'ft: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  result=ok
  if [ "$rc" != 0 ]; then
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-15s %12s %10s %8s %9s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
  if [ "$rc" != 0 ]; then
    grep -E "ERROR|SUMMARY|runtime error|==[0-9]+==|Test unit written|fuzz_tokenizer:|#[0-9]+ " "$log" | head -60 || true
  fi
done
exit $failed
