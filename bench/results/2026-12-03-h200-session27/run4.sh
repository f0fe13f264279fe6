#!/usr/bin/env bash
# Session 27, run 4: the pipelined products' activations staged by bulk
# copies (MINFER_PIPED_BULK_ACTS=1) against the threads' loads, same build:
# GPU tests, tg128 of 7B, CUPTI shares of 7B Q4_K_M, then A's benches again.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out BUILD_DIR=$root/build-gpu
keeps=/tmp/session27-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; }
AB=bulk bash tests/gpu/run_on_device.sh build test bench-large; keep 1
TIMELINE_MODELS="qwen2.5-7b:q4_k_m" TIMELINE_ENVS="- MINFER_PIPED_BULK_ACTS=1" bash tests/gpu/run_on_device.sh timeline; keep 2
AB=bulk bash tests/gpu/run_on_device.sh bench-large; keep 3
cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"
