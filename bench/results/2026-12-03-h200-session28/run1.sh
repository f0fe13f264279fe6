#!/usr/bin/env bash
# Session 28, run 1: the pipelined products taking a warp's rows as one
# sequence of units (new: the working tree) against the rows each begun at
# lane 0 (base: the same tree with kernels/pipe.cuh as before, run1-tree.patch
# reversed, carried in .carry/base): GPU tests of new, tg128 / pp512 of both,
# the kernels alone, CUPTI shares of 7B Q4_K_M, new's 7B benches again last
# (drift), new's pipelined SASS.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session28-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; }  # (run_on_device.sh packs away what is in $out)
kb() {  # build-dir label: the kernels alone
  for c in "7b gate_up q4_k" "7b gate_up q8_0" "7b down q6_k" "7b down q4_k" "7b head q6_k"; do
    MATVEC_BENCH_CASE="$c" "$1/tests/gpu/gpu_matvec_bench" auto | tail -1 | sed "s/^/$2 /"
  done
}
base=/tmp/tree-base
rm -rf "$base"; mkdir -p "$base"
tar -C "$root" --exclude=./build-gpu --exclude=./gpu-out --exclude=./.git -cf - . | tar -C "$base" -xf -
cp "$root/.carry/base/pipe.cuh" "$base/kernels/pipe.cuh"
N=$root/build-gpu B=$base/build-gpu
BUILD_DIR=$N bash tests/gpu/run_on_device.sh build test bench-small bench-large; keep new
(cd "$base" && BUILD_DIR=$B BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" \
  bash tests/gpu/run_on_device.sh build bench-large); keep base
{
  for b in "$B base" "$N new"; do
    set -- $b
    kb "$1" "$2"
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
(cd "$base" && BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline); keep timeline-base
BUILD_DIR=$N TIMELINE_MODELS="qwen2.5-7b:q4_k_m" bash tests/gpu/run_on_device.sh timeline; keep timeline-new
BUILD_DIR=$N bash tests/gpu/run_on_device.sh bench-large; keep new-again
obj=$(find "$N" -name "matvec_piped.cu.o" | head -1)
cuobjdump -sass "$obj" > "$keeps/new.sass" 2>&1 && python3 tests/gpu/sass_summary.py "$keeps/new.sass" \
  "gate_up_piped_kernelILi12ELb1|matvec_piped_kernelILi14ELb0|matvec_piped_kernelILi12ELb0" ops > "$keeps/keep-sass.md" 2>&1
gzip -9 "$keeps/new.sass"
cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md" && cp new.sass.gz "$out/"
