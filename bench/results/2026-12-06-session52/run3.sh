#!/usr/bin/env bash
# Session 52, run 3: the split decode attention in clusters of 8 blocks
# (sm_90): each cluster's splits combined through distributed shared memory,
# a head a block, then the clusters' partials of each head by the last
# cluster to count it; MINFER_ATTN_SPLIT_CLUSTER=0 (the last block of each KV
# head combines every split, as committed) the other arm, same build.
#   A: build, the GPU suites, CUPTI timelines 4,096 deep (both arms, twice)
#   B: tg128 deep into the context (split forced, both arms; auto)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session52-keeps3; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new M=/tmp/minfer-models
f7=$M/qwen2.5-7b-q4_k_m.gguf f05=$M/qwen2.5-0.5b-q8_0.gguf
case "${1:-AB}" in
A|AB)
  rm -f "$keeps"/*
  BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; keep 1-build
  BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 2-test
  mkdir -p $M
  [ -f "$f7" ] || "$N/daemon/minfer" synth --preset qwen2.5-7b --type q4_k_m -o "$f7" >/dev/null 2>&1
  [ -f "$f05" ] || "$N/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f05" >/dev/null 2>&1
  : > "$out/summary.md"
  for arm in "cluster:-" "last:MINFER_ATTN_SPLIT_CLUSTER=0" "cluster2:-" "last2:MINFER_ATTN_SPLIT_CLUSTER=0"; do
    IFS=: read -r label e <<<"$arm"
    for f in "$f7" "$f05"; do
      echo "== timeline $label $(basename "$f") d4096 split" >> "$out/summary.md"
      env MINFER_ATTN_DECODE=split $([ "$e" = - ] || echo "$e") "$N/tests/gpu/gpu_decode_timeline" "$f" 4096 128 "$out/tl-$label-$(basename "$f").csv" \
        2>>"$out/tl.log" | grep -E "^step|attention_split" >> "$out/summary.md"
    done
  done
  keep 3-timelines
  [ "${1:-AB}" = AB ] || { cat "$out/all.md"; exit 0; }
  ;&
B)
  : > "$out/summary.md"
  for f in "$f7" "$f05"; do
    for arm in "cluster:MINFER_ATTN_DECODE=split" "last:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_CLUSTER=0" "auto:-" "auto-last:MINFER_ATTN_SPLIT_CLUSTER=0"; do
      IFS=: read -r label e <<<"$arm"
      echo "== tg128 deep $label $(basename "$f")" >> "$out/summary.md"
      env $([ "$e" = - ] || echo "${e//,/ }") "$N/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 4096 8192 16384 2>>"$out/bench.log" \
        | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$out/summary.md"
    done
    keep 4-deep
  done
  cat "$out/all.md"
  ;;
esac
