#!/usr/bin/env bash
# Session 54, run 1: session 53's committed form (04bad7d) through the GPU suites,
# which session 53 had no device time left for: the
# fused product's tests first, then the engine suite (its parity and switch
# tests take the fused products), then the kernel suite.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session54-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new
BUILD_DIR=$N BUILD_TARGETS="gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build; keep 1-build
suite() {  # binary filter label
  timeout 150 "$N/tests/gpu/$1" --gtest_filter="$2" > "$out/$3.log" 2>&1
  { nvidia-smi --query-gpu=name --format=csv,noheader; echo "$3: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$3.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/$3.log") failed lines"
    grep -E '^\[  FAILED  \]|Failure' "$out/$3.log" | head -20; } > "$out/summary.md"
}
suite gpu_kernels_test 'GpuGemmFused.*' gemm-tests; keep 2-gemm-tests
suite gpu_engine_test '*' engine-tests; keep 3-engine-tests
suite gpu_kernels_test '-GpuGemmFused.*' kernel-tests; keep 4-kernel-tests
cat "$out/all.md"
