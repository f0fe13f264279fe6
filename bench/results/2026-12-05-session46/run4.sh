#!/usr/bin/env bash
# Session 46, run 4: CudaLogprobs.* with the half-scored prompt test widened
# to the last two tokens and the last one (one row through the head after a
# multi-row step: the matvec path), greedy tokens after them.
#   bash bench/results/2026-12-05-session46/run4.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run4-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="gpu_engine_test" bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
timeout 200 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaLogprobs.*:CudaConstrained.*' > "$out/run4-gpu_engine_test.log" 2>&1
log "gpu_engine_test CudaLogprobs.*:CudaConstrained.* rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run4-gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure|Expected|Which is|evaluates to' "$out/run4-gpu_engine_test.log" | head -30 >> "$sum"
gzip -f "$out/run4-gpu_engine_test.log"
cat "$sum"
