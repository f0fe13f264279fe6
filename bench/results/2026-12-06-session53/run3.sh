#!/usr/bin/env bash
# Session 53, run 3: the committed form of the few-token prefill products —
# unpacking without conversion instructions everywhere, the pipelined loads
# (8 stages) up to 8 tokens and the register loads above (the default), and
# the register loads at every size (MINFER_GEMM_FUSED_STAGES=1) — through the
# GPU suites, then pp1 .. pp64 against a build of the kernel as it was
# (.carry/base/gemm_fused.cu: HEAD's file, the new entry points as no-ops),
# the same machine.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session53-keeps3; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new B=/tmp/base-src
MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0 qwen2.5-1.5b:q4_k_m"
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "GpuGemmFused: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"; grep -E 'Failure|FAILED|stages' "$out/gemm-tests.log" | head -20; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 3-test
BUILD_DIR=$N BENCH_PREFILL_MODELS="$MODELS" BENCH_PREFILL_ARGS="-p 2 4 8 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="new: s1:MINFER_GEMM_FUSED_STAGES=1" bash tests/gpu/run_on_device.sh bench-prefill; keep 4-prefill-new
rm -rf "$B"; mkdir -p "$B"
tar --exclude=./build-new --exclude=./gpu-out -cf - . | tar -xf - -C "$B"
cp "$root/.carry/base/gemm_fused.cu" "$B/kernels/gemm_fused.cu"
BUILD_DIR=$B/build BUILD_TARGETS="minfer" bash "$B/tests/gpu/run_on_device.sh" build; keep 5-build-base
BUILD_DIR=$B/build BENCH_PREFILL_MODELS="$MODELS" BENCH_PREFILL_ARGS="-p 2 4 8 16 32 64 -n 0" \
  BENCH_PREFILL_ARMS="base:" bash "$B/tests/gpu/run_on_device.sh" bench-prefill; keep 6-prefill-base
cat "$out/all.md"
