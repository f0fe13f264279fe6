#!/usr/bin/env bash
# Session 28, run 3: MINFER_NORM_IN_GATE_UP=1 (the deferred norm before
# gate/up worked out by each pipelined gate/up block from the stream, no norm
# launch) against the default, same build and run: GPU tests, tg128 / pp512
# of both arms twice (AB=normgu), CUPTI shares of 7B Q4_K_M in both.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session28-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; }  # (run_on_device.sh packs away what is in $out)
AB=normgu bash tests/gpu/run_on_device.sh build test bench-large; keep first
TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0" TIMELINE_ENVS="- MINFER_NORM_IN_GATE_UP=1" \
  bash tests/gpu/run_on_device.sh timeline; keep timeline
AB=normgu bash tests/gpu/run_on_device.sh bench-large; keep again
cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"
