#!/usr/bin/env bash
# Session 49, run 1: an upper bound before building anything. How much of a
# 7B Q4_K_M decode step would the one-block deferred norms give back if they
# cost nothing? The tree carries skipnorm.patch (not committed: wrong
# output, timing only): MINFER_EXPERIMENT_SKIP_NORM=1 leaves out the norm
# launch before q/k/v (attn_norm), 2 the one before gate/up (ffn_norm), 3
# both; their consumers read the stale Q8 and scale. Then q/k/v (gate/up)
# waits on the product before the norm, as it would if that product wrote
# the norm itself.
#   bash bench/results/2026-12-06-session49/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nproc) cores"
B=$root/build-gpu
OUT=/tmp/b1 BUILD_DIR=$B BUILD_TARGETS="minfer gpu_decode_timeline" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
[ -x "$B/daemon/minfer" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
mkdir -p /tmp/minfer-models
f=/tmp/minfer-models/qwen2.5-7b-q4_k_m.gguf
[ -f "$f" ] || "$B/daemon/minfer" synth --preset qwen2.5-7b --type q4_k_m -o "$f" >/dev/null 2>&1
log "synth ($(el))"
for skip in 0 1 2 3 0 3 1 2; do
  r=$(MINFER_EXPERIMENT_SKIP_NORM=$skip "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128)
  log "tg128 7B Q4_K_M skip=$skip: $r ($(el))"
done
# Issue 5's ratio on this machine: 0.5B Q8_0 tg128 with graphs and eager, in turn.
g=/tmp/minfer-models/qwen2.5-0.5b-q8_0.gguf
[ -f "$g" ] || "$B/daemon/minfer" synth --preset qwen2.5-0.5b --type q8_0 -o "$g" >/dev/null 2>&1
for arm in graphs eager graphs eager; do
  e=""; [ $arm = eager ] && e="MINFER_NO_CUDA_GRAPH=1"
  r=$(env $e "$B/daemon/minfer" bench -m "$g" --backend cuda -p 0 -n 128 -r 3 2>/dev/null | grep tg128)
  log "tg128 0.5B Q8_0 $arm: $r ($(el))"
done
[ -x "$B/tests/gpu/gpu_decode_timeline" ] || { log "no timeline tool"; exit 0; }
for e in 0 3 1; do
  MINFER_EXPERIMENT_SKIP_NORM=$e "$B/tests/gpu/gpu_decode_timeline" "$f" 1 128 "$out/timeline-skip$e.csv" \
    > "$out/timeline-skip$e.txt" 2>"$out/timeline-skip$e.log"
  log "### timeline skip=$e ($(el))"
  cat "$out/timeline-skip$e.txt" >> "$sum"
done
log "($(el))"
