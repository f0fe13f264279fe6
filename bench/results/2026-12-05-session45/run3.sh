#!/usr/bin/env bash
# Session 45, run 3: run 2's fused prefill product (mma.sync, the weight as
# the A operand from registers: 2-3x dequantize + cuBLAS up to 32 tokens on
# both models, ahead up to 64, behind from 128), now with its warps loading
# the next two chunks of k while they multiply the last two (the default;
# MINFER_GEMM_FUSED_PIPE=0 is run 2's load-four-then-multiply, the same
# bits). Build; the whole kernel and engine suites; then the crossover with
# both schedules, 0.5B Q8_0, 1.5B Q4_K_M and 7B Q4_K_M.
#   bash bench/results/2026-12-05-session45/run3.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run3-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test gpu_kernels_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
for t in gpu_kernels_test gpu_engine_test; do
  timeout 240 "$B/tests/gpu/$t" > "$out/run3-$t.log" 2>&1
  log "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run3-$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|GpuGemmFused|FusedGemm|parity   \]' "$out/run3-$t.log" | head -40 >> "$sum"
  gzip -f "$out/run3-$t.log"
done
log ""
OUT=/tmp/b2 BUILD_DIR=$root/build-gpu BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-1.5b:q4_k_m qwen2.5-7b:q4_k_m" \
  bash tests/gpu/run_on_device.sh bench-prefill >/dev/null 2>&1
cat /tmp/b2/summary.md >> "$sum"
cp /tmp/b2/logs.tgz "$out/run3-bench-logs.tgz" 2>/dev/null
log "($(el))"
cat "$sum"
