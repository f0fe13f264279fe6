#!/usr/bin/env bash
# Session 55, run 1: the fused prefill products' tiled form (64 rows × 32 or
# 64 tokens a block, the tokens' values staged once a block in shared
# memory, each chunk of the weight unpacked once for all of them), from 33
# tokens (MINFER_GEMM_TILED_FROM=33: off by default until measured).
# GpuGemmFused.* checks every form against the f16
# operands' product and the one-hot columns bit for bit;
# CudaSwitches.FusedGemm* the engine's products against cuBLAS. Then the
# product alone (gpu_matvec_bench gemm:T: +t100000 the split form, +w32 /
# +w64 the tiled form's tokens a block) and pp32 .. pp512 end to end, each
# with the fused products up to 512 tokens: split form, tiled form, and
# dequantize + cuBLAS; then the whole GPU suite. Cut to fit what was left
# of the session's device time after seven machines failed to start.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session55-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 200 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
timeout 100 "$N/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.FusedGemm*' > "$out/switch-test.log" 2>&1
{ for l in gemm-tests switch-test; do echo "$l: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$l.log" | head -1)"
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is|tiled|split' "$out/$l.log" | head -12; done; } > "$out/summary.md"
keep 2-gemm-tests
{ for c in "7b gate_up q4_k" "7b down q6_k" "0.5b gate_up q8_0"; do
    MATVEC_BENCH_CASE="$c" timeout 40 "$N/tests/gpu/gpu_matvec_bench" gemm:64+t100000 gemm:64+t33 \
      gemm:128+t100000 gemm:128+t33 gemm:256+t33 2>&1 | grep -E "^\| (case|[0-9])|copy bandwidth" ; done; } > "$out/summary.md"
keep 3-kernels
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" \
  BENCH_PREFILL_ARGS="-p 32 64 128 256 512 -n 0" \
  BENCH_PREFILL_ARMS="split:MINFER_GEMM_TILED_FROM=100000,MINFER_FUSED_GEMM_ROWS=512 tiled:MINFER_GEMM_TILED_FROM=33,MINFER_FUSED_GEMM_ROWS=512 cublas:MINFER_NO_FUSED_GEMM=1" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill
BUILD_DIR=$N GPU_TEST_TIMEOUT=200 bash tests/gpu/run_on_device.sh test; keep 5-test
cat "$out/all.md"
