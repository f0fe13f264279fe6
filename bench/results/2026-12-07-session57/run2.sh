#!/usr/bin/env bash
# Session 57, run 2 (the working tree: the fused prefill products' x in
# X16Order::kLanes, the lanes' order, where every product reading it takes
# the fused kernel). Tests first: GpuGemmFused.* (lanes against natural bit
# for bit, and session 56's 8-tile bits), the writers' order, the engine's
# switch (CudaSwitches.X16LanesIsBitIdentical) and the engine suites. Then the
# product alone and prefill end to end with the lanes' order and without
# (MINFER_X16_LANES=0, same build), and session 56's 8-tile rule against 4
# and 8 tiles everywhere.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session57-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-gpu
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*:GpuX16Order.*:X16Order.*:GpuRmsNorm.*:GpuElementwise.*' > "$out/k-tests.log" 2>&1
timeout 200 "$N/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.*:CudaParity.*:CudaSynthParity.*' > "$out/e-tests.log" 2>&1
{ for f in k-tests e-tests; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$f.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|X16|LanesOrder' "$out/$f.log" | head -12; done; } > "$out/summary.md"
keep 2-tests
: > "$out/summary.md"
for c in "7b gate_up q4_k" "7b down q6_k" "7b o q4_k" "0.5b gate_up q8_0"; do
  echo "$c:"; MATVEC_BENCH_CASE="$c" timeout 30 "$N/tests/gpu/gpu_matvec_bench" gemm:16 gemm:32 gemm:48 gemm:64 gemm-lanes:16 gemm-lanes:32 gemm-lanes:48 gemm-lanes:64 2>&1 | grep -E "^\| [0-9a-z]|rror"
done >> "$out/summary.md"
keep 3-product
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 16 32 48 64 -n 0" \
  BENCH_PREFILL_ARMS="lanes:MINFER_FUSED_GEMM_ROWS=64 natural:MINFER_X16_LANES=0 lanes2:MINFER_FUSED_GEMM_ROWS=64 natural2:MINFER_X16_LANES=0" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill-lanes
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 48 64 -n 0" \
  BENCH_PREFILL_ARMS="four:MINFER_GEMM_FUSED_TILES=4 eight:MINFER_GEMM_FUSED_TILES=8" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 5-prefill-tiles
timeout 300 "$N/tests/gpu/gpu_engine_test" > "$out/e-all.log" 2>&1
timeout 200 "$N/tests/gpu/gpu_kernels_test" > "$out/k-all.log" 2>&1
{ for f in k-all e-all; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$f.log" | head -1)"
  grep -E '^\[  FAILED  \]' "$out/$f.log" | head -12; done; } > "$out/summary.md"
keep 6-suites
cat "$out/all.md"
