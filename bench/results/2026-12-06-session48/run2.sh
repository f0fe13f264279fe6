#!/usr/bin/env bash
# Session 48, run 2: the thread pool's change (a972e02) on the GPU machine.
# The CUDA backend uses the pool only to repack weights at upload, so:
#   1. gpu_engine_test whole (every model it loads is repacked on the pool);
#   2. minfer bench pp512 / tg128 of synth 0.5B Q8_0 (RUN2_MODELS="preset type"
#      pairs for others), with the load split (file, upload, warm-up, capture).
#   bash bench/results/2026-12-06-session48/run2.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run2-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(nproc) cores"
B=$root/build-gpu
OUT=/tmp/b2 BUILD_DIR=$B BUILD_TARGETS="minfer gpu_engine_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b2/summary.md | tail -1) ($(el))"
[ -x "$B/tests/gpu/gpu_engine_test" ] || { grep -E "error|FAILED" /tmp/b2/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
"$B/tests/gpu/gpu_engine_test" > "$out/run2-gpu_engine_test.log" 2>&1
log "gpu_engine_test rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$out/run2-gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E "^\[  FAILED  \]" "$out/run2-gpu_engine_test.log" | head -20 | tee -a "$sum"
gzip -f "$out/run2-gpu_engine_test.log"
mkdir -p /tmp/minfer-models
for spec in ${RUN2_MODELS:-"qwen2.5-0.5b q8_0"}; do
  set -- $spec
  f=/tmp/minfer-models/$1-$2.gguf
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "$1" --type "$2" -o "$f" >/dev/null 2>&1
  log "### $1 $2 ($(el))"
  "$B/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 128 -r 3 2>/dev/null | tee -a "$sum"
  # The load split of one more load: file, upload (with the repack on the pool), warm-up, capture.
  "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 16 -r 1 -o json 2>/dev/null |
    python3 -c "import json,sys; print('load_ms', json.dumps(json.load(sys.stdin)['load_ms']))" | tee -a "$sum"
done
log "($(el))"
