#!/usr/bin/env bash
# Session 27, run 1: where 7B's pipelined gate/up spends a decode step.
#   - the kernel alone, weights from DRAM and (MATVEC_BENCH_L2=1) from L2;
#   - its phases inside a replayed step (MINFER_PHASE_PROBE=1, a build with
#     the probes compiled in);
#   - its SASS, and Nsight Compute's issue and stall figures, alone.
# Run from the repository root on the GPU machine: OUT=... bash THIS
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
build=$root/build-gpu
export OUT=$out BUILD_DIR=$build
PHASE_PROBES=ON BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" bash tests/gpu/run_on_device.sh build || exit 1
cp "$out/summary.md" "$out/summary-build.md"
SASS_FILTER="gate_up_piped_kernelILi12ELb1|matvec_piped_kernelILi14ELb0|matvec_piped_kernelILi12ELb0" \
  bash tests/gpu/run_on_device.sh sass; cp "$out/summary.md" "$out/summary-sass.md"
{
  for c in "7b gate_up q4_k" "7b gate_up q4_k 8192 rows" "7b down q6_k" "7b down q4_k"; do
    for l2 in 0 1; do
      echo "## $c, MATVEC_BENCH_L2=$l2"
      MATVEC_BENCH_CASE="$c" MATVEC_BENCH_L2=$l2 "$build/tests/gpu/gpu_matvec_bench" auto | tail -1
    done
  done
} 2>&1 | tee "$out/kernels.md"
TIMELINE_MODELS="qwen2.5-7b:q4_k_m" TIMELINE_ENVS="- MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh timeline
cp "$out/summary.md" "$out/summary-timeline.md"
for c in "7b gate_up q4_k" "7b gate_up q4_k 8192 rows"; do
  for l2 in 0 1; do
    NCU_VARIANTS=auto NCU_CASE="$c" MATVEC_BENCH_L2=$l2 bash tests/gpu/run_on_device.sh ncu-stream
    cp "$out/summary.md" "$out/summary-ncu-${c// /_}-l2$l2.md"
  done
done
cd "$out" && tail -n +1 summary-*.md kernels.md > all.md
