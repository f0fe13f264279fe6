#!/usr/bin/env bash
# Session 57's prepared run (not run: the device would not start in session
# 57; for the next session). The fused prefill products' x in
# X16Order::kLanes, the lanes' order (MINFER_X16_LANES=1; off by default until
# this runs), and a second tree with q8_0-runs.patch (Q8_0's lanes take Q4_K's
# runs, so that they too read x in whole sectors in that order). Tests first:
# GpuGemmFused.* (lanes against natural bit for bit, session 56's 8-tile
# bits), the writers' order, the engine's switch (CudaSwitches.X16Lanes
# IsBitIdentical). Then the product alone and prefill end to end with the
# lanes' order and without, both trees; the engine suites; and session 56's
# 8-tile rule against 4 and 8 tiles everywhere.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session57-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-gpu
Q=/tmp/q8runs; rm -rf "$Q"; mkdir -p "$Q"; tar -cf - --exclude=./gpu-out --exclude=./build-gpu . | tar -xf - -C "$Q"
(cd "$Q" && git apply bench/results/2026-12-07-session57/q8_0-runs.patch) || echo "q8_0-runs.patch does not apply" >> "$out/summary.md"
(BUILD_DIR=$Q/build BUILD_TARGETS="minfer gpu_kernels_test gpu_matvec_bench" bash "$Q/tests/gpu/run_on_device.sh" build > /tmp/q-build.log 2>&1) &
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; wait; keep 1-build
timeout 90 "$Q/build/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/q-tests.log" 2>&1
{ tail -3 /tmp/q-build.log; echo "q8_0 runs, GpuGemmFused: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/q-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/q-tests.log" | head -8; } > "$out/summary.md"
keep 1b-q8-runs
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*:GpuX16Order.*:X16Order.*:GpuRmsNorm.*:GpuElementwise.*' > "$out/k-tests.log" 2>&1
{ for f in k-tests; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$f.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|X16|LanesOrder' "$out/$f.log" | head -12; done; } > "$out/summary.md"
keep 2-k-tests
: > "$out/summary.md"
for c in "7b gate_up q4_k" "7b down q6_k" "7b o q4_k" "0.5b gate_up q8_0" "0.5b down q8_0"; do for b in "$N" "$Q/build"; do
  echo "$c ($b):"; MATVEC_BENCH_CASE="$c" timeout 30 "$b/tests/gpu/gpu_matvec_bench" gemm:16 gemm:32 gemm:48 gemm:64 gemm-lanes:16 gemm-lanes:32 gemm-lanes:48 gemm-lanes:64 2>&1 | grep -E "^\| [0-9a-z]|rror"
done; done >> "$out/summary.md"
keep 3-product
timeout 200 "$N/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.*:CudaParity.*' > "$out/e-tests.log" 2>&1
{ for f in e-tests; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$f.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|X16|LanesOrder' "$out/$f.log" | head -12; done; } > "$out/summary.md"
keep 3b-e-tests
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="lanes:MINFER_X16_LANES=1 natural:MINFER_X16_LANES=0 lanes2:MINFER_X16_LANES=1 natural2:MINFER_X16_LANES=0" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill-lanes
BUILD_DIR=$Q/build BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="q8runs-lanes:MINFER_X16_LANES=1 q8runs-natural:MINFER_X16_LANES=0" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4b-prefill-q8-runs
timeout 300 "$N/tests/gpu/gpu_engine_test" > "$out/e-all.log" 2>&1
timeout 200 "$N/tests/gpu/gpu_kernels_test" > "$out/k-all.log" 2>&1
{ for f in k-all e-all; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$f.log" | head -1)"
  grep -E '^\[  FAILED  \]' "$out/$f.log" | head -12; done; } > "$out/summary.md"
keep 5-suites
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 48 64 -n 0" \
  BENCH_PREFILL_ARMS="four:MINFER_GEMM_FUSED_TILES=4 eight:MINFER_GEMM_FUSED_TILES=8" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 6-prefill-tiles
cat "$out/all.md"
