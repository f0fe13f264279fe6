#!/usr/bin/env bash
# Session 53, run 2: the few-token prefill products' integers made floats
# without conversion instructions (magic_float: the integer under a float's
# exponent, less the exponent's value; Q8_0 as f16 integers times d by HMUL2),
# against run 1's unpacking, each value through I2F (MINFER_GEMM_FUSED_CVT=1,
# the register loads), on the register loads (=1 stages) and pipelined (4, 8):
# the GPU suites (GpuGemmFused.PipelinedLoadsGiveTheRegisterLoadsBits compares
# all four, bit for bit), the product alone (gpu_matvec_bench gemm:T) and
# pp1 .. pp64 end to end.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session53-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "GpuGemmFused: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"; grep -E 'Failure|FAILED|stages, token' "$out/gemm-tests.log" | head -20; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-1.5b:q4_k_m" \
  BENCH_PREFILL_ARGS="-p 1 2 4 8 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="cvt:MINFER_GEMM_FUSED_CVT=1,MINFER_GEMM_FUSED_STAGES=1 s1:MINFER_GEMM_FUSED_STAGES=1 s4:MINFER_GEMM_FUSED_STAGES=4 s8:MINFER_GEMM_FUSED_STAGES=8" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 3-prefill
BUILD_DIR=$N KERNEL_VARIANTS="gemm:2+s1+cvt gemm:2+s1 gemm:2+s4 gemm:2+s8 gemm:16+s1+cvt gemm:16+s1 gemm:16+s8 gemm:64+s1+cvt gemm:64+s1 gemm:64+s8" \
  bash tests/gpu/run_on_device.sh bench-kernels; keep 4-kernels
BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 5-test
cat "$out/all.md"
