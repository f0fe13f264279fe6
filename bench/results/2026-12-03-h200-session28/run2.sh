#!/usr/bin/env bash
# Session 28, run 2: the pipelined matvec kernel's blocks of 28 warps
# (-DMINFER_MATVEC_PIPED_WARPS=28: 7B's 3,584 ffn_down rows make 27-28 an SM,
# one a warp, and 65,536 / 896 threads leave ptxas up to 72 registers) against
# the 32 of now: GPU tests of 28, tg128 / pp512 of both, the kernels alone,
# CUPTI shares of 7B Q4_K_M, both 7B benches again last (drift), SASS counts.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session28-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; }  # (run_on_device.sh packs away what is in $out)
kb() {  # build-dir label: the kernels alone
  for c in "7b down q6_k" "7b down q4_k" "7b head q6_k" "7b down q8_0" "7b qkv q8_0"; do
    MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto | tail -1 | sed "s/^/$2 /"
  done
}
sass() {  # build-dir label
  local obj
  obj=$(find "$1" -name "matvec_piped.cu.o" | head -1)
  cuobjdump -sass "$obj" > "/tmp/$2.sass" 2>&1 && python3 tests/gpu/sass_summary.py "/tmp/$2.sass" \
    "matvec_piped_kernelILi14ELb0|matvec_piped_kernelILi12ELb0|matvec_piped_kernelILi8ELb1" ops | sed "s/^/$2 /" >> "$keeps/keep-sass.md"
}
A=$root/build-gpu W=$root/build-w28
BUILD_DIR=$W CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=-DMINFER_MATVEC_PIPED_WARPS=28" \
  bash tests/gpu/run_on_device.sh build test bench-large; keep w28
BUILD_DIR=$A BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" bash tests/gpu/run_on_device.sh build bench-large; keep w32
{
  for b in "$A w32" "$W w28"; do
    set -- $b
    kb "$1" "$2"
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
BUILD_DIR=$A TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-w32
BUILD_DIR=$W TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-w28
BUILD_DIR=$W bash tests/gpu/run_on_device.sh bench-large; keep w28-again
BUILD_DIR=$A bash tests/gpu/run_on_device.sh bench-large; keep w32-again
sass "$A" w32; sass "$W" w28
cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"
