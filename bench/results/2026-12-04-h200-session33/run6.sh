#!/usr/bin/env bash
# Session 33, run 6: run 1's lead on ffn_down's load floor (81-83% of the copy
# rate without its dot products, against gate/up's 97%): its blocks stage 28 KB
# of activations at the wait (gate/up's 4.5 KB). N: no dot products (run 1);
# N0: no dot products and nothing staged (-DMINFER_AB_PIPED_BARE). Patch:
# run6-tree.patch.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
for b in "N -DMINFER_AB_PIPED_NO_DOT" "N0 -DMINFER_AB_PIPED_BARE"; do
  set -- $b
  BUILD_DIR=$root/build-$1 BUILD_TARGETS="gpu_matvec_bench" CMAKE_ARGS="-DCMAKE_CUDA_FLAGS=$2" \
    bash tests/gpu/run_on_device.sh build; keep "build-$1"
done
{
  for pass in 1 2; do
    for l in N N0; do
      for c in "7b gate_up q4_k" "7b down q4_k" "7b down q6_k" "7b down q8_0" "7b head q6_k"; do
        MATVEC_BENCH_CASE="$c" "$root/build-$l/tests/gpu/gpu_matvec_bench" auto 2>&1 | tail -1 | sed "s/^/pass$pass $l /"
      done
    done
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
