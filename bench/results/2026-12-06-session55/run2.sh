#!/usr/bin/env bash
# Session 55, run 2 (run from a tree of HEAD with .carry/new/gemm_fused.cu
# over it): each mma k-step sent to every token tile in turn instead of a
# tile's eight steps one after the other (each tile's sum takes its steps in
# the same order: the same bits), in the split and the tiled forms. Run 1
# put both forms at ~86 TFLOPs at 128-256 tokens, 9% of what mma.sync
# reaches: the suspect is each tile's chain of eight dependent mma. The base
# (HEAD's kernel) built beside it; GpuGemmFused.* on the new one, then the
# product alone, new and base (the end-to-end benches cut: ~300 s of device
# time were left).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session55-keeps2; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
B=/tmp/base; rm -rf "$B"; mkdir -p "$B"; tar -cf - --exclude=./gpu-out . | tar -xf - -C "$B"
cp "$root/.carry/new/gemm_fused.cu" "$root/kernels/gemm_fused.cu"
N=$root/build-new
(BUILD_DIR=$B/build BUILD_TARGETS="minfer gpu_matvec_bench" bash "$B/tests/gpu/run_on_device.sh" build > /tmp/base-build.log 2>&1) &
BUILD_DIR=$N BUILD_TARGETS="minfer gpu_kernels_test gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; wait; keep 1-build
tail -3 /tmp/base-build.log > "$out/summary.md"; keep 1b-base-build
timeout 120 "$N/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/gemm-tests.log" 2>&1
{ echo "gemm-tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/gemm-tests.log" | head -1)"
  grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/gemm-tests.log" | head -12; } > "$out/summary.md"
keep 2-gemm-tests
{ for c in "7b gate_up q4_k" "7b down q6_k" "0.5b gate_up q8_0"; do for b in "$N" "$B/build"; do echo "$b:"
    MATVEC_BENCH_CASE="$c" timeout 30 "$b/tests/gpu/gpu_matvec_bench" gemm:32 gemm:64 gemm:64+t33 gemm:128 gemm:128+t33 2>&1 \
      | grep -E "^\| (case|[0-9])|copy bandwidth" ; done; done; } > "$out/summary.md"
keep 3-kernels
cat "$out/all.md"
