#!/usr/bin/env bash
# Session 33, run 4: 0.5B's gate/up (the largest share of its decode step, 4.95
# µs a layer) alone, on 152 blocks of 32 rows as in the model (20 of the 132
# SMs take two), on 132 and on 264: whether the SMs with two blocks set its
# time. With the rest of 0.5B's products alone beside it.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="gpu_matvec_bench" bash tests/gpu/run_on_device.sh build; keep build
{
  for pass in 1 2; do
    for c in "0.5b gate_up q8_0" "0.5b gate_up q8_0 132 blocks" "0.5b gate_up q8_0 264 blocks" "0.5b down q8_0" "0.5b qkv q8_0" "0.5b o q8_0" "0.5b head q8_0"; do
      MATVEC_BENCH_CASE="$c" "$B/tests/gpu/gpu_matvec_bench" auto auto+nopre 2>&1 | grep "^|" | grep -v "^|---\|^| case" | sed "s/^/pass$pass /"
    done
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
