#!/usr/bin/env bash
# Session 45, run 4: the fused prefill product's warp loop in three shapes
# (kernels/gemm_fused.cu LoopShape, MINFER_GEMM_FUSED_SHAPE; the same bits,
# which GpuGemmFused.* checks): 0 (committed: four chunks of k loaded, then
# multiplied; ptxas's registers, two blocks an SM), 1 (two chunks, at most
# 128 registers: four blocks an SM), 2 (four chunks, at most 168: three).
# Builds minfer and the kernel tests only; GpuGemmFused.*; then pp2 .. pp64
# of 7B Q4_K_M and 0.5B Q8_0 in each shape.
#   bash bench/results/2026-12-05-session45/run4.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run4-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_kernels_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_kernels_test" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
timeout 120 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/run4-gpu_kernels_test.log" 2>&1
log "gpu_kernels_test GpuGemmFused.* rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run4-gpu_kernels_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/run4-gpu_kernels_test.log" | head -20 >> "$sum"
gzip -f "$out/run4-gpu_kernels_test.log"
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | shape | tok/s (median of 3) |"
log "|---|---|---|"
for m in qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0; do
  f="$models/${m%%:*}-${m##*:}.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
  for round in 1; do
    for shape in 0 1 2; do
      MINFER_GEMM_FUSED_SHAPE=$shape timeout 100 "$B/daemon/minfer" bench -m "$f" --backend cuda -r 3 -o json \
        -p 2 8 16 32 64 -n 0 2>/dev/null |
        python3 -c "
import json,sys; j=json.load(sys.stdin)
print('| $m | $shape (round $round) | ' + ', '.join(f\"{r['test']} {r['median_tokens_per_s']:.0f}\" for r in j['results']) + ' |')" |
        tee -a "$sum"
    done
  done
done
log "($(el))"
cat "$sum"
