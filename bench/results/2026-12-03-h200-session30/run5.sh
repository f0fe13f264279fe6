#!/usr/bin/env bash
# Session 30, run 5: the kernel as committed — run 4's 16-bit bound and
# unrolled pick, the pairwise merge of run 2 back (run 4's gather lost). The
# GPU tests, tg128 sampled against greedy and the host's draw, then minferd's
# streamed completions of 0.5B while time allows.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session30-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 200 ] && { bash tests/gpu/run_on_device.sh bench-sampled; keep sampled; }
[ "$SECONDS" -lt 260 ] && {
  SERVE_MODELS="qwen2.5-0.5b:q8_0" SERVE_ENVS="- MINFER_NO_DRAW_IN_STEP=1" bash tests/gpu/run_on_device.sh serve; keep serve; }
