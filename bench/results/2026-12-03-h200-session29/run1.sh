#!/usr/bin/env bash
# Session 29, run 1: decode steps submitted ahead (EngineConfig::lookahead,
# on by default on CUDA) against MINFER_NO_LOOKAHEAD=1 on the same build and
# machine: the GPU tests (the fed steps' and the engine orders' tests among
# them), tg128 / pp512 of every file with both orders (0.5B Q8_0 also without
# graphs: the issue-5 ratio), the daemon on the GPU, the CUPTI step of 0.5B
# Q8_0 and 7B Q4_K_M (a step's GPU time against tg128's time a token: the gap
# between steps), then the small benches again (drift).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session29-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
# (run_on_device.sh packs away what is in $out: the summaries kept aside, and
# gathered into $out/all.md after each stage in case the call's time runs out)
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
AB=nolookahead bash tests/gpu/run_on_device.sh build test bench-small bench-large; keep main
# The rest while the call's 600 s allow (elapsed seconds in $SECONDS).
if [ "$SECONDS" -lt 420 ]; then
  TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" TIMELINE_ENVS="- MINFER_NO_LOOKAHEAD=1" \
    bash tests/gpu/run_on_device.sh timeline; keep timeline
fi
[ "$SECONDS" -lt 470 ] && { AB=nolookahead bash tests/gpu/run_on_device.sh bench-small; keep small-again; }
[ "$SECONDS" -lt 520 ] && { bash tests/gpu/run_on_device.sh daemon; keep daemon; }
