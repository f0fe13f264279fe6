#!/usr/bin/env bash
# Session 51, run 4: run 3 with the ulp of the scale fixed (run 3: the compiled
# split kernel's folded rsqrtf(128) against the general one's), and the early
# staging A/B (MINFER_ATTN_SPLIT_EARLY=0). Run 3: run 2's split decode attention, and the rows of every cell
# but the tail's staged before the PDL wait, the combine's statistics loaded ahead
# of its partials and no fence after its count's reset; with its V sums a thread a
# pair of dimensions of every head of the group (each V value converted once),
# its scores several heads a lane, its loops compiled for head dims 64 and 128,
# against the committed kernel (.carry/base/attention_decode.cu, build-base).
#   part A: both builds, the GPU suites on the new one
#   part B: CUPTI timelines 4,096 cells deep and tg128 deep into the context
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session51-keeps4; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new B=$root/build-base M=/tmp/minfer-models
case "${1:-AB}" in
A|AB)
  rm -f "$keeps"/*
  BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; keep 1-build-new
  cp kernels/attention_decode.cu /tmp/new-attention_decode.cu
  cp .carry/base/attention_decode.cu kernels/attention_decode.cu
  BUILD_DIR=$B BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep 2-build-base
  cp /tmp/new-attention_decode.cu kernels/attention_decode.cu
  BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 3-test
  [ "${1:-AB}" = AB ] || exit 0
  ;&
B)
  : > "$out/summary.md"
  f7=$M/qwen2.5-7b-q4_k_m.gguf f05=$M/qwen2.5-0.5b-q8_0.gguf
  mkdir -p $M
  [ -f "$f7" ] || "$N/daemon/minfer" synth --preset qwen2.5-7b --type q4_k_m -o "$f7" >/dev/null 2>&1
  [ -f "$f05" ] || "$N/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f05" >/dev/null 2>&1
  for arm in "new:$N:-" "noearly:$N:MINFER_ATTN_SPLIT_EARLY=0" "base:$B:-"; do
    IFS=: read -r label dir e <<<"$arm"
    for f in "$f7" "$f05"; do
      echo "== timeline $label $(basename "$f") d4096 split" >> "$out/summary.md"
      env MINFER_ATTN_DECODE=split $([ "$e" = - ] || echo "$e") "$dir/tests/gpu/gpu_decode_timeline" "$f" 4096 128 "$out/tl-$label-$(basename "$f").csv" \
        2>>"$out/tl.log" | head -9 >> "$out/summary.md"
    done
  done
  keep 4-timelines
  for f in "$f7" "$f05"; do
    for arm in "heads:$N:MINFER_ATTN_DECODE=heads" "split-new:$N:MINFER_ATTN_DECODE=split" "split-noearly:$N:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_EARLY=0" "split-base:$B:MINFER_ATTN_DECODE=split"; do
      IFS=: read -r label dir e <<<"$arm"
      echo "== tg128 deep $label $(basename "$f")" >> "$out/summary.md"
      env ${e//,/ } "$dir/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 512 1024 2048 4096 8192 2>>"$out/bench.log" \
        | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$out/summary.md"
    done
    keep 5-deep
  done
  cat "$out/summary.md"
  ;;
esac
