#!/usr/bin/env bash
# Session 52, run 2: the split decode attention's combine with its copies of
# the splits' partials in bulk (cp.async.bulk on an mbarrier, a split an
# instruction of warp 0) instead of 16 bytes a thread (cp.async), the
# MINFER_ATTN_SPLIT_BULK=0 arm the other way, same build.
#   A: build, the GPU suites, the phase probe build and its timelines 4,096 deep
#   B: CUPTI timelines 4,096 deep and tg128 deep into the context, both arms
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session52-keeps2; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
N=$root/build-new P=$root/build-probe M=/tmp/minfer-models
case "${1:-A}" in
A)
  rm -f "$keeps"/*
  BUILD_DIR=$N bash tests/gpu/run_on_device.sh build; keep 1-build
  BUILD_DIR=$N GPU_TEST_TIMEOUT=240 bash tests/gpu/run_on_device.sh test; keep 2-test
  PHASE_PROBES=ON BUILD_DIR=$P BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep 3-build-probe
  BUILD_DIR=$P TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" \
    TIMELINE_ENVS="MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=split MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_BULK=0" \
    bash tests/gpu/run_on_device.sh timeline >/dev/null; grep -E "^timeline|attention_split|^split attention|^step" "$out/summary.md" > "$out/s.md"; mv "$out/s.md" "$out/summary.md"; keep 4-probe
  cat "$out/all.md"
  ;;
B)
  : > "$out/summary.md"
  f7=$M/qwen2.5-7b-q4_k_m.gguf f05=$M/qwen2.5-0.5b-q8_0.gguf
  [ -x "$N/daemon/minfer" ] || { echo "no build in $N: run part A first (on this machine)"; exit 1; }
  mkdir -p $M
  [ -f "$f7" ] || "$N/daemon/minfer" synth --preset qwen2.5-7b --type q4_k_m -o "$f7" >/dev/null 2>&1
  [ -f "$f05" ] || "$N/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$f05" >/dev/null 2>&1
  for arm in "bulk:-" "cpasync:MINFER_ATTN_SPLIT_BULK=0" "bulk2:-"; do
    IFS=: read -r label e <<<"$arm"
    for f in "$f7" "$f05"; do
      echo "== timeline $label $(basename "$f") d4096 split" >> "$out/summary.md"
      env MINFER_ATTN_DECODE=split $([ "$e" = - ] || echo "$e") "$N/tests/gpu/gpu_decode_timeline" "$f" 4096 128 "$out/tl-$label-$(basename "$f").csv" \
        2>>"$out/tl.log" | grep -E "^step|attention_split" >> "$out/summary.md"
    done
  done
  keep 5-timelines
  for f in "$f7" "$f05"; do
    for arm in "bulk:MINFER_ATTN_DECODE=split" "cpasync:MINFER_ATTN_DECODE=split,MINFER_ATTN_SPLIT_BULK=0" "auto:-"; do
      IFS=: read -r label e <<<"$arm"
      echo "== tg128 deep $label $(basename "$f")" >> "$out/summary.md"
      env $([ "$e" = - ] || echo "${e//,/ }") "$N/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 2 -d 0 1024 4096 8192 2>>"$out/bench.log" \
        | grep -E "tg128" | sed -E 's/^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|/|/' >> "$out/summary.md"
    done
    keep 6-deep
  done
  cat "$out/all.md"
  ;;
esac
