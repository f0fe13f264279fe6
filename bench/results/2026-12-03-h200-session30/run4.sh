#!/usr/bin/env bash
# Session 30, run 4: the draw after run 3's probes — a 16-bit bound (16
# block-wide counts, not 32), the last block gathering the keys at or above
# the largest of the lists' k-th keys instead of merging the lists pairwise,
# the pick's loops unrolled. The GPU tests, tg128 sampled against greedy and
# the host's draw, then the probes again (a build with PHASE_PROBES=ON).
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session30-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
bash tests/gpu/run_on_device.sh build test; keep test
[ "$SECONDS" -lt 420 ] && { bash tests/gpu/run_on_device.sh bench-sampled; keep sampled; }
[ "$SECONDS" -lt 480 ] && {
  BUILD_DIR=$root/build-probes PHASE_PROBES=ON BUILD_TARGETS="gpu_decode_timeline minfer" TIMELINE_MODELS="qwen2.5-0.5b:q8_0" \
    TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8,MINFER_PHASE_PROBE=1" bash tests/gpu/run_on_device.sh build timeline; keep probes; }
