#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time from its checked-in seeds and
# fails on any crash, leak, timeout, out-of-memory or sanitizer report.
#   tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
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
failed=0
printf '%-15s %12s %10s %8s %9s %s\n' target executions execs/s cov features result
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  mkdir -p "$scratch/$t"
  log=$scratch/$t.log
  # The GGUF seeds are up to ~40 KB; the other targets' inputs stay small.
  max_len=4096
  [ "$t" = gguf ] && max_len=65536
  set +e
  "$bin" "$scratch/$t" "$here/corpus/$t" -max_total_time="$seconds" -max_len=$max_len -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$t-" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$( (grep -oE 'cov: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  ft=$( (grep -oE 'ft: [0-9]+' "$log" || true) | tail -1 | cut -d' ' -f2)
  result=ok
  if [ $rc -ne 0 ]; then
    result="FAILED (exit $rc)"
    failed=1
  fi
  printf '%-15s %12s %10s %8s %9s %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
  if [ $rc -ne 0 ]; then
    grep -E "ERROR|SUMMARY|runtime error|==[0-9]+==|Test unit written|fuzz_tokenizer:|#[0-9]+ " "$log" | head -60 || true
  fi
done
exit $failed
