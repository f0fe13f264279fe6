#!/usr/bin/env bash
# Session 54, run 4: Q5_K unpacked from 16-byte loads in the few-token
# prefill products too, and MINFER_GEMM_FUSED_GENERIC=1 (every type through
# the element-wise dequantizer, the form before): GpuGemmFused.* (the one-hot
# columns bit for bit in every form, Q5_K and generic included) and the
# switch test, pp2 .. pp64 of synth 1.5B Q5_K and 0.5B Q4_K_M with and
# without the switch (same build, same machine), then the GPU suites.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session54-keeps4; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 150 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
timeout 100 "$N/tests/gpu/gpu_engine_test" --gtest_filter='CudaSwitches.FusedGemm*' > "$out/switch-test.log" 2>&1
{ for l in gemm-tests switch-test; do echo "$l: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$l.log" | head -1)"
    grep -E '^\[  FAILED  \]|Failure|Expected|Which is|generic' "$out/$l.log" | head -12; done; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-1.5b:q5_k qwen2.5-0.5b:q4_k_m" BENCH_PREFILL_ARGS="-p 2 8 16 64 -n 0" \
  BENCH_PREFILL_ARMS="new: generic:MINFER_GEMM_FUSED_GENERIC=1 new-again:" bash tests/gpu/run_on_device.sh bench-prefill; keep 3-prefill
BUILD_DIR=$N GPU_TEST_TIMEOUT=150 bash tests/gpu/run_on_device.sh test; keep 4-test
cat "$out/all.md"
