#!/usr/bin/env bash
# Session 53, run 1: the few-token prefill products (kernels::launch_gemm_fused)
# with each warp's chunks sent ahead as cp.async through shared memory
# (MINFER_GEMM_FUSED_STAGES=4 or 8) against the register loads of session 45
# (=1), the same bits: the GPU suites (GpuGemmFused.PipelinedLoadsGiveTheRegisterLoadsBits
# compares them), the product alone on 7B / 0.5B shapes (gpu_matvec_bench's
# gemm:T variants, weights from DRAM) and pp1 .. pp64 end to end.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session53-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "GpuGemmFused: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"; grep -E 'Failure|FAILED' "$out/gemm-tests.log" | head -20; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 3-test
BUILD_DIR=$N KERNEL_VARIANTS="gemm:2+s1 gemm:2+s4 gemm:2+s8 gemm:16+s1 gemm:16+s8 gemm:64+s1 gemm:64+s8" \
  bash tests/gpu/run_on_device.sh bench-kernels; keep 4-kernels
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-1.5b:q4_k_m" \
  BENCH_PREFILL_ARGS="-p 1 2 4 8 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="s1:MINFER_GEMM_FUSED_STAGES=1 s8:MINFER_GEMM_FUSED_STAGES=8 s4:MINFER_GEMM_FUSED_STAGES=4" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 5-prefill
cat "$out/all.md"
