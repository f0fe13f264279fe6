#!/usr/bin/env bash
# Session 51, run 5: the committed form (run 4's kernels, the late-trigger
# knob gone, auto's switch at 8 MiB of K/V a layer or 8,192 cells): the GPU
# suites, and 0.5B Q8_0 decode deep into the context with auto's pick.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session51-keeps5; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
BUILD_TARGETS="minfer gpu_kernels_test gpu_engine_test" bash tests/gpu/run_on_device.sh build; keep 1-build
GPU_TEST_TIMEOUT=150 bash tests/gpu/run_on_device.sh test; keep 2-test
M=/tmp/minfer-models f=$M/qwen2.5-0.5b-q8_0.gguf
mkdir -p $M; [ -f "$f" ] || "$root/build-gpu/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f" >/dev/null 2>&1
: > "$out/summary.md"
for e in MINFER_ATTN_DECODE=auto MINFER_ATTN_DECODE=heads; do
  echo "== tg128 deep 0.5B Q8_0 $e" >> "$out/summary.md"
  env $e "$root/build-gpu/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 4096 8192 2>>"$out/bench.log" \
    | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$out/summary.md"
done
keep 3-deep
