#!/usr/bin/env bash
# Session 30, run 1: sampled tokens drawn inside the decode step
# (kernels::launch_sample, EngineConfig::draw_in_step) — the GPU tests (the
# kernel against its host reference, the engine's draws against the host
# sampler's), then what a streaming client of minferd sees: greedy and sampled
# completions with the draw in the step (the default), drawn by the host from
# copied logits (MINFER_NO_DRAW_IN_STEP=1) and without steps ahead
# (MINFER_NO_LOOKAHEAD=1), on synth 0.5B Q8_0 and 7B Q4_K_M; then the small
# benches (greedy: nothing should move) while time allows.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session30-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
# (run_on_device.sh packs away what is in $out: the summaries kept aside, and
# gathered into $out/all.md after each stage in case the call's time runs out)
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 420 ] && { bash tests/gpu/run_on_device.sh serve; keep serve; }
[ "$SECONDS" -lt 500 ] && { AB=nolookahead bash tests/gpu/run_on_device.sh bench-small; keep small; }
