#!/usr/bin/env bash
# Session 54, run 2: the few-token prefill products' wide form — a block's
# warps splitting its rows (16 each, all of k) instead of k, so that its
# tokens' values come from L2 once a block instead of once every 16 rows —
# through the GPU suites (GpuGemmFused.* checks every form against the
# f16 operands' product, bit-exact one-hot columns, the wide launch counts;
# CudaSwitches.FusedGemmMatchesTheCublasProducts each form forced), then the
# product alone at 16 and 64 tokens (gpu_matvec_bench gemm:T+wN: w1 the
# split form, w4/w6/w12 warps a block) and pp16 .. pp256 end to end, the
# split form (MINFER_GEMM_FUSED_WIDE=1) against the default (4 warps, pp4
# the piped split form in both),
# with the fused products up to 256 tokens, and cuBLAS's for the crossover.
# And Q4_0/Q4_1/Q5_0/Q5_1 now unpacked from 16-byte loads as Q8_0 is (before:
# dequant8 a value; 0.5B Q4_K_M's Q5_0 q/k/v, 71 µs in session 53's run 2).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session54-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 150 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
timeout 100 "$N/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.FusedGemm*' > "$out/switch-test.log" 2>&1
{ for l in gemm-tests switch-test; do echo "$l: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$l.log" | head -1)"
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is|wide ' "$out/$l.log" | head -12; done; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-0.5b:q4_k_m qwen2.5-1.5b:q4_k_m" \
  BENCH_PREFILL_ARGS="-p 4 16 32 64 128 256 -n 0" \
  BENCH_PREFILL_ARMS="split:MINFER_GEMM_FUSED_WIDE=1,MINFER_FUSED_GEMM_ROWS=256 wide:MINFER_FUSED_GEMM_ROWS=256 cublas:MINFER_NO_FUSED_GEMM=1" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 3-prefill
BUILD_DIR=$N KERNEL_VARIANTS="gemm:2+w1 gemm:16+w1 gemm:16+w4 gemm:16+w12 gemm:64+w1 gemm:64+w4 gemm:64+w6 gemm:64+w12" \
  bash tests/gpu/run_on_device.sh bench-kernels; keep 4-kernels
BUILD_DIR=$N GPU_TEST_TIMEOUT=200 bash tests/gpu/run_on_device.sh test; keep 5-test
cat "$out/all.md"
