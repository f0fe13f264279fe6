#!/usr/bin/env bash
# Session 30, run 2: the draw's kernel with a bound that leaves a few times k
# keys a block to sort (run 1's sorted all 4,096 of every chunk, and a sampled
# token cost ~140 µs more than a greedy one on 0.5B and 7B alike). The GPU
# tests, tg128 sampled (minfer bench --temp 0.8) with the draw in the step and
# on the host next to greedy, the CUPTI step of 0.5B greedy and sampled (the
# draw's own time), then minferd's streamed completions on 0.5B.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session30-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 400 ] && { bash tests/gpu/run_on_device.sh bench-sampled; keep sampled; }
[ "$SECONDS" -lt 460 ] && {
  TIMELINE_MODELS="qwen2.5-0.5b:q8_0" TIMELINE_ENVS="- MINFER_TIMELINE_TEMP=0.8" \
    bash tests/gpu/run_on_device.sh timeline; keep timeline; }
[ "$SECONDS" -lt 520 ] && {
  SERVE_MODELS="qwen2.5-0.5b:q8_0" SERVE_ENVS="- MINFER_NO_DRAW_IN_STEP=1" bash tests/gpu/run_on_device.sh serve; keep serve; }
