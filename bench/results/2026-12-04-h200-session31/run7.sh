#!/usr/bin/env bash
# Session 31, run 7: the committed draw kernel (each thread's best key a
# maximum; run 6's "base"): the GPU tests, tg128 sampled and penalized 0.5B
# Q8_0 and 7B Q4_K_M.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session31-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 330 ] && { bash tests/gpu/run_on_device.sh bench-sampled; keep sampled; }
