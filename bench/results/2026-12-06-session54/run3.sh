#!/usr/bin/env bash
# Session 54, run 3: the committed form — the wide form taken out again, the
# legacy types (Q4_0, Q4_1, Q5_0, Q5_1) unpacked from 16-byte loads — through
# the GPU suites, then synth 0.5B Q4_K_M (its k = 896 weights are Q5_0)
# pp2 .. pp64 against a build of the kernel as it was (.carry/base/
# gemm_fused.cu: a0ef5bc's file, the legacy types through dequant8), the
# same machine, the base build second.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session54-keeps3; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new B=/tmp/base-src
ARGS="-p 2 4 8 16 32 64 -n 0"
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 150 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "gemm-tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/gemm-tests.log" | head -12; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N GPU_TEST_TIMEOUT=200 bash tests/gpu/run_on_device.sh test; keep 3-test
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q4_k_m" BENCH_PREFILL_ARGS="$ARGS" BENCH_PREFILL_ARMS="new:" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill-new
rm -rf "$B"; mkdir -p "$B"
tar --exclude=./build-new --exclude=./gpu-out -cf - . | tar -xf - -C "$B"
cp "$root/.carry/base/gemm_fused.cu" "$B/kernels/gemm_fused.cu"
BUILD_DIR=$B/build BUILD_TARGETS="minfer" bash "$B/tests/gpu/run_on_device.sh" build; keep 5-build-base
BUILD_DIR=$B/build BENCH_PREFILL_MODELS="qwen2.5-0.5b:q4_k_m" BENCH_PREFILL_ARGS="$ARGS" BENCH_PREFILL_ARMS="base:" \
  bash "$B/tests/gpu/run_on_device.sh" bench-prefill; keep 6-prefill-base
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q4_k_m" BENCH_PREFILL_ARGS="$ARGS" BENCH_PREFILL_ARMS="new-again:" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 7-prefill-new-again
cat "$out/all.md"
