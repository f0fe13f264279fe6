#!/usr/bin/env bash
# Session 56, run 2 (the committed tree, ~260 s of device time left): the
# 8-tile blocks kept for steps of more than 32 tokens where the weight's row
# blocks fill the SMs (launch_gemm_fused; run 1 measured them everywhere as
# .carry/var). GpuGemmFused.* (the new EightTileBlocksGiveTheFourTileBits
# among them), then 0.5B Q8_0 pp32-64 by the rule, with 4 and with 8 tiles
# everywhere (MINFER_GEMM_FUSED_TILES).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session56-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-gpu
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test" bash tests/gpu/run_on_device.sh build; keep 1-build
timeout 60 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "gemm-tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is|^\[       OK' "$out/gemm-tests.log" | head -12; } > "$out/summary.md"
keep 2-gemm-tests
BUILD_DIR=$N BENCH_PREFILL_MODELS="qwen2.5-0.5b:q8_0" BENCH_PREFILL_ARGS="-p 32 48 64 -n 0" \
  BENCH_PREFILL_ARMS="rule:MINFER_FUSED_GEMM_ROWS=64 four:MINFER_GEMM_FUSED_TILES=4 eight:MINFER_GEMM_FUSED_TILES=8 rule2:MINFER_FUSED_GEMM_ROWS=64" \
  bash tests/gpu/run_on_device.sh bench-prefill; keep 3-prefill
cat "$out/all.md"
