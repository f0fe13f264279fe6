#!/usr/bin/env bash
# Session 33, run 2: pipelined blocks of 16 warps and half the SM's shared memory
# (H: -DMINFER_PIPED_WARPS=16, which splits the shared memory two ways), so that
# the next kernel's block can start on an SM while this one's ends (64 registers
# a thread either way: a block of 32 holds all of an SM's registers), against
# the committed 32 (A). Kernels alone, tg128 / pp512 of 7B, CUPTI shares of 7B
# Q4_K_M, the small benches, then H's kernel tests. Patch: run2-tree.patch.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
kb() {  # build-dir label
  for c in "7b gate_up q4_k" "7b down q4_k" "7b down q6_k" "7b head q6_k" "7b gate_up q8_0" "7b down q8_0"; do
    MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto 2>&1 | tail -1 | sed "s/^/$2 /"
  done
}
A=$root/build-A H=$root/build-H
BUILD_DIR=$A BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build-A
BUILD_DIR=$H CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=-DMINFER_PIPED_WARPS=16" \
  BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline gpu_kernels_test" bash tests/gpu/run_on_device.sh build; keep build-H
{ kb "$A" A; kb "$H" H; } 2>&1 | tee "$keeps/keep-kernels.md"
BUILD_DIR=$A bash tests/gpu/run_on_device.sh bench-large; keep large-A
BUILD_DIR=$H bash tests/gpu/run_on_device.sh bench-large; keep large-H
BUILD_DIR=$A TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-A
BUILD_DIR=$H TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-H
BUILD_DIR=$H bash tests/gpu/run_on_device.sh bench-large; keep large-H-again
BUILD_DIR=$A bash tests/gpu/run_on_device.sh bench-large; keep large-A-again
GPU_TEST_TIMEOUT=120 BUILD_DIR=$H bash tests/gpu/run_on_device.sh test; keep test-H
