#!/usr/bin/env bash
# Session 52, run 4: run 3's clusters, with the splits fitted to the clusters
# the device holds at once (of 8 or 4 blocks, the size that keeps more
# splits; MINFER_ATTN_SPLIT_CLUSTER=0|4|8 the other arms, same build); run 3
# asked for 16 clusters of 8, which an H100 does not hold, so its launches fell
# back to the last-block combine.
#   build, the GPU suites, tg128 deep into the context (split forced: auto,
#   none, 8, 4; auto's choice of kernel: clusters and none), then CUPTI
#   timelines 4,096 deep (clusters and none)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session52-keeps4; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new M=/tmp/minfer-models
f7=$M/qwen2.5-7b-q4_k_m.gguf f05=$M/qwen2.5-0.5b-q8_0.gguf
BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; keep 1-build
BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 2-test
mkdir -p $M
[ -f "$f7" ] || "$N/daemon/minfer" synth --preset qwen2.5-7b --type q4_k_m -o "$f7" >/dev/null 2>&1
[ -f "$f05" ] || "$N/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f05" >/dev/null 2>&1
: > "$out/summary.md"
for f in "$f7" "$f05"; do
  for arm in "split-auto:MINFER_ATTN_DECODE=split" "split-none:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=0" \
             "split-8:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=8" "split-4:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=4" \
             "auto:-" "auto-none:MINFER_ATTN_SPLIT_CLUSTER=0"; do
    IFS=: read -r label e <<<"$arm"
    echo "== tg128 deep $label $(basename "$f")" >> "$out/summary.md"
    env $([ "$e" = - ] || echo "${e//,/ }") "$N/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 4096 8192 2>>"$out/bench.log" \
      | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$out/summary.md"
  done
  keep 3-deep
done
: > "$out/summary.md"
for arm in "cluster:-" "none:MINFER_ATTN_SPLIT_CLUSTER=0"; do
  IFS=: read -r label e <<<"$arm"
  for f in "$f7" "$f05"; do
    echo "== timeline $label $(basename "$f") d4096 split" >> "$out/summary.md"
    env MINFER_ATTN_DECODE=split $([ "$e" = - ] || echo "$e") "$N/tests/gpu/gpu_decode_timeline" "$f" 4096 128 "$out/tl-$label-$(basename "$f").csv" \
      2>>"$out/tl.log" | grep -E "^step|attention_split" >> "$out/summary.md"
  done
  keep 4-timelines
done
cat "$out/all.md"
