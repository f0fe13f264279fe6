#!/usr/bin/env bash
# Session 27, run 3: the tree to commit (A) against a build of it with
# -DMINFER_AB_BASELINE (B: the pipelined products' Q4_K dot with the high
# nibbles masked, gate/up's warp sums one at a time and its SwiGLU inside
# the rows, as before this session): GPU tests of A, tg128 / pp512 of both, CUPTI shares of 7B
# Q4_K_M, the kernels alone; A's 7B benches again last (drift).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session27-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; }  # (run_on_device.sh packs away what is in $out)
kb() {  # build-dir label: the kernels alone
  for c in "7b gate_up q4_k" "7b down q4_k" "7b gate_up q8_0" "7b down q6_k"; do
    MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto | tail -1 | sed "s/^/$2 /"
  done
}
A=$root/build-gpu B=$root/build-base
BUILD_DIR=$A bash tests/gpu/run_on_device.sh build test bench-small bench-large; keep A
BUILD_DIR=$B CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=-DMINFER_AB_BASELINE" \
  BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" bash tests/gpu/run_on_device.sh build bench-large; keep B
{
  for b in "$B base" "$A new"; do
    set -- $b
    kb "$1" "$2"
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-B
BUILD_DIR=$A TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-A
BUILD_DIR=$A bash tests/gpu/run_on_device.sh bench-large; keep A-again
cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"
