#!/usr/bin/env bash
# Session 31, run 4: the committed kernel (run 1's), minferd streaming
# completions of 0.5B Q8_0 to a client — greedy, sampled, and sampled with
# presence and frequency penalties (0.5, 0.3) — drawn in the step and by the
# host (MINFER_NO_DRAW_IN_STEP=1).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session31-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
BUILD_TARGETS="minfer minferd" bash tests/gpu/run_on_device.sh build; keep build
SERVE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" SERVE_ENVS="- MINFER_NO_DRAW_IN_STEP=1" \
  bash tests/gpu/run_on_device.sh serve; keep serve
