#!/usr/bin/env bash
# Session 29, run 2: what a streaming client of minferd sees on the GPU, the
# engine's decode steps ahead of the host (the default) against
# MINFER_NO_LOOKAHEAD=1 (run_on_device.sh serve: synth 0.5B Q8_0 and 7B
# Q4_K_M, 5 streamed greedy completions of 256 tokens an arm), then the
# benches of 0.5B Q8_0 with and without graphs once more.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session29-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
BUILD_TARGETS="minfer minferd" bash tests/gpu/run_on_device.sh build serve; keep serve
[ "$SECONDS" -lt 450 ] && { SERVE_MODELS="qwen2.5-0.5b:q8_0" bash tests/gpu/run_on_device.sh serve; keep serve-again; }
[ "$SECONDS" -lt 500 ] && { AB=nolookahead bash tests/gpu/run_on_device.sh bench-small; keep small; }
