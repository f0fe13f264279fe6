#!/usr/bin/env bash
# Session 45, run 1: the fused prefill product (kernels/gemm_fused.cu: the
# quantized weight dequantized tile by tile in shared memory and multiplied
# on tensor cores, for prefill steps of at most 64 tokens). Build; the whole
# kernel and engine suites (GpuGemmFused.* new; CudaSynthParity runs both
# prefill products against the CPU; CudaSwitches.FusedGemmMatchesTheCublasProducts;
# session 44's prepared run4, CudaLogprobs.* with short scored prompts, is in
# the engine suite); then the crossover: pp1 .. pp512 with the fused products
# up to 512 tokens against every weight dequantized for cuBLAS, 0.5B Q8_0 and
# 7B Q4_K_M (run_on_device.sh bench-prefill).
#   bash bench/results/2026-12-05-session45/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
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
  timeout 240 "$B/tests/gpu/$t" > "$out/run1-$t.log" 2>&1
  log "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run1-$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|GpuGemmFused|FusedGemm|parity   \]' "$out/run1-$t.log" | head -40 >> "$sum"
  gzip -f "$out/run1-$t.log"
done
log ""
OUT=/tmp/b2 BUILD_DIR=$root/build-gpu bash tests/gpu/run_on_device.sh bench-prefill >/dev/null 2>&1
cat /tmp/b2/summary.md >> "$sum"
cp /tmp/b2/logs.tgz "$out/run1-bench-logs.tgz" 2>/dev/null
log "($(el))"
cat "$sum"
