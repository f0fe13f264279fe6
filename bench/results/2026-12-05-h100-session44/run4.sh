#!/usr/bin/env bash
# Session 44, run 4: run 3 again, with short scored prompts (1, 2 and 65
# tokens: nothing to score, a one-row step whose head is a matvec, a last
# slice of one row) added to CudaLogprobs.ScoredPromptMatchesTheCpuAndGraphsStillReplay.
# Run 3: run 2's test
# compared the device's scoring (one 150-row step) with the host's in three
# 64-row steps, whose logits differ by ~1e-4 for the steps' own sake; now
# the host's engine takes one step too. That test and its suite, only.
#   bash bench/results/2026-12-05-h100-session44/run4.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run4-summary.md"
log() { echo "$*" | tee -a "$sum"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="gpu_engine_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1)"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { tail -40 /tmp/b1/build.log >> "$sum"; cat "$sum"; exit 1; }
timeout 200 "$B/tests/gpu/gpu_engine_test" --gtest_filter='CudaLogprobs.*' > "$out/gpu_engine_test.log" 2>&1
log "gpu_engine_test CudaLogprobs.* rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gpu_engine_test.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure|^\[       OK' "$out/gpu_engine_test.log" | head -30 >> "$sum"
gzip -f "$out/gpu_engine_test.log"
cat "$sum"
