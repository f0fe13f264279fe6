#!/usr/bin/env bash
# Session 47, run 1 (prepared without a GPU; for the next session that gets
# one): the multi-entry prefix cache and --kv-cells on CUDA.
#   1. gpu_engine_test, all of it (CudaPrefixCache.KeptHistoriesGiveTheCpusTokens
#      is new: kept histories' shared, non-contiguous cells through the decode
#      graphs, 64 and 160 cells);
#   2. prefix_turns.sh on minferd --backend cuda, 0.5B Q8_0 and 7B Q4_K_M:
#      two conversations in turn, --prefix-cache-entries 1 against 16.
#   bash bench/results/2026-12-05-session47/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run1-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer minferd gpu_engine_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/daemon/minferd/minferd" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
"$B/tests/gpu/gpu_engine_test" > "$out/run1-gpu_engine_test.log" 2>&1
log "gpu_engine_test rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$out/run1-gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E "^\[  FAILED  \]|CudaPrefixCache" "$out/run1-gpu_engine_test.log" | head -20 | tee -a "$sum"
gzip -f "$out/run1-gpu_engine_test.log"
mkdir -p /tmp/minfer-models
for spec in "qwen2.5-0.5b q8_0" "qwen2.5-7b q4_k_m"; do
  set -- $spec
  f=/tmp/minfer-models/$1-$2.gguf
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "$1" --type "$2" -o "$f" >/dev/null 2>&1
  log "### $1 $2, cuda ($(el))"
  bash bench/results/2026-12-05-session47/prefix_turns.sh "$B" "$f" cuda 1536 2>&1 | tee -a "$sum"
done
log "($(el))"
cat "$sum"
