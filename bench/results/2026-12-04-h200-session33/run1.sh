#!/usr/bin/env bash
# Session 33, run 1: what bounds the pipelined products on one SM. Three builds of
# the kernels alone: as committed (A); the dot products taken out, each staged
# unit's words folded instead (N: -DMINFER_AB_PIPED_NO_DOT, the cp.async pipeline
# and the reads of the stages alone); the copies taken out, the dot products run
# on whatever the stages hold (F: -DMINFER_AB_PIPED_NO_FETCH, the arithmetic and
# the staged activations alone). Each 7B case from DRAM and again from L2
# (MATVEC_BENCH_L2=1; only the 8,192-row gate/up fits). Patch: run1-tree.patch.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
kb() {  # build-dir label
  for c in "7b gate_up q4_k" "7b gate_up q4_k 8192 rows" "7b down q4_k" "7b down q6_k" "7b head q6_k" "7b gate_up q8_0" "7b down q8_0"; do
    MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto 2>&1 | tail -1 | sed "s/^/$2 dram /"
    MATVEC_BENCH_L2=1 MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto 2>&1 | tail -1 | sed "s/^/$2 l2 /"
  done
}
for b in "A " "N -DMINFER_AB_PIPED_NO_DOT" "F -DMINFER_AB_PIPED_NO_FETCH"; do
  set -- $b
  BUILD_DIR=$root/build-$1 BUILD_TARGETS="gpu_matvec_bench" CMAKE_ARGS="${2:+-DCMAKE_CUDA_FLAGS=$2}" \
    bash tests/gpu/run_on_device.sh build; keep "build-$1"
done
{
  for l in A N F; do kb "$root/build-$l" "$l"; done
} 2>&1 | tee "$keeps/keep-kernels.md"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv >> "$keeps/keep-kernels.md" 2>&1
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
