#!/usr/bin/env bash
# Session 57, run 1 (from the working tree at HEAD, 4dce51c). First what
# session 56's run 2 would have run: GpuGemmFused.* on the committed tree (its
# new EightTileBlocksGiveTheFourTileBits among them), then 0.5B Q8_0 and 7B
# Q4_K_M pp32-64 by the committed rule (8 token tiles a block where the
# weight's row blocks fill the SMs) against 4 and 8 tiles everywhere
# (MINFER_GEMM_FUSED_TILES). Then a ceiling: .carry/vx/gemm_fused.cu reads the
# tokens' values where a layout of x in the lanes' order would put them (each
# warp load 64 contiguous bytes a token instead of four 16-byte pieces 32
# bytes apart): wrong values, right timing. The product alone and prefill
# end to end, HEAD against it.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session57-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
V=/tmp/vx; rm -rf "$V"; mkdir -p "$V"; tar -cf - --exclude=./gpu-out . | tar -xf - -C "$V"
cp "$root/.carry/vx/gemm_fused.cu" "$V/kernels/gemm_fused.cu"
N=$root/build-gpu
(BUILD_DIR=$V/build BUILD_TARGETS="minfer gpu_matvec_bench" bash "$V/tests/gpu/run_on_device.sh" build > /tmp/vx-build.log 2>&1) &
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; wait; keep 1-build
tail -3 /tmp/vx-build.log > "$out/summary.md"; keep 1b-vx-build
timeout 90 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "gemm-tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|^\[       OK' "$out/gemm-tests.log" | head -12; } > "$out/summary.md"
keep 2-gemm-tests
: > "$out/summary.md"
for c in "7b gate_up q4_k" "7b down q6_k" "7b o q4_k" "0.5b gate_up q8_0" "0.5b down q8_0"; do for b in "$N" "$V/build"; do
  echo "$c $b:"; MATVEC_BENCH_CASE="$c" timeout 30 "$b/tests/gpu/gpu_matvec_bench" gemm:16 gemm:32 gemm:48 gemm:64 2>&1 | grep -E "^\| [0-9]|rror"
done; done >> "$out/summary.md"
keep 3-product
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" BENCH_PREFILL_ARGS="-p 16 32 48 64 -n 0" \
  BENCH_PREFILL_ARMS="rule:MINFER_FUSED_GEMM_ROWS=64 four:MINFER_GEMM_FUSED_TILES=4 eight:MINFER_GEMM_FUSED_TILES=8" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill-rule
BUILD_DIR=$V/build BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" BENCH_PREFILL_ARGS="-p 16 32 48 64 -n 0" \
  BENCH_PREFILL_ARMS="vx:MINFER_FUSED_GEMM_ROWS=64" bash tests/gpu/run_on_device.sh bench-prefill; keep 5-prefill-vx
cat "$out/all.md"
