#!/usr/bin/env bash
# Session 31, run 1: penalties drawn in the step. The GPU tests (the kernel
# against its reference with penalty windows, the engine's drawn steps against
# the host sampler), then tg128 sampled with and without a repetition penalty,
# drawn in the step and by the host, next to greedy; minferd's streamed
# completions of 0.5B while time allows.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session31-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 330 ] && { bash tests/gpu/run_on_device.sh bench-sampled; keep sampled; }
