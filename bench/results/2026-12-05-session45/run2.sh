#!/usr/bin/env bash
# Session 45, run 2: the fused prefill product rewritten. Run 1's form (the
# weight dequantized tile by tile into shared memory, WMMA) was correct and
# slower than dequantize + cuBLAS at every size (latency-bound: 26.7 ms for a
# 2-token 7B step against 17.5). Now mma.sync with the weight as the A
# operand straight from registers: each lane unpacks 32 elements of its two
# rows from 16-byte loads (Q8_0, Q4_K, Q6_K; the other types through
# dequant8), four chunks of k in flight a warp, no shared memory in the loop.
# Build; the whole kernel and engine suites; then the crossover (pp1 ..
# pp512, the fused products up to 512 tokens against every weight
# dequantized for cuBLAS; 0.5B Q8_0 and 7B Q4_K_M; run_on_device.sh
# bench-prefill).
#   bash bench/results/2026-12-05-session45/run2.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run2-summary.md"
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
  timeout 240 "$B/tests/gpu/$t" > "$out/run2-$t.log" 2>&1
  log "$t rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run2-$t.log" | tr '\n' ' ') ($(el))"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|GpuGemmFused|FusedGemm|parity   \]' "$out/run2-$t.log" | head -40 >> "$sum"
  gzip -f "$out/run2-$t.log"
done
log ""
OUT=/tmp/b2 BUILD_DIR=$root/build-gpu bash tests/gpu/run_on_device.sh bench-prefill >/dev/null 2>&1
cat /tmp/b2/summary.md >> "$sum"
cp /tmp/b2/logs.tgz "$out/run2-bench-logs.tgz" 2>/dev/null
log "($(el))"
cat "$sum"
