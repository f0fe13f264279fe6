#!/usr/bin/env bash
# Session 48, run 1: session 47's prepared run (gpu_engine_test whole, with
# CudaPrefixCache.KeptHistoriesGiveTheCpusTokens; two conversations in turn
# on CUDA), then n choices on CUDA (choices.sh: "n": 4 against the cache off).
#   bash bench/results/2026-12-06-session48/run1.sh   (carry: .carry/boost_po)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
bash bench/results/2026-12-05-session47/run1.sh
for spec in "qwen2.5-0.5b q8_0" "qwen2.5-7b q4_k_m"; do
  set -- $spec
  echo "### choices, $1 $2, cuda" | tee -a "$out/run1-summary.md"
  bash bench/results/2026-12-06-session48/choices.sh "$root/build-gpu" "/tmp/minfer-models/$1-$2.gguf" cuda 1536 4 64 2>&1 |
    tee -a "$out/run1-summary.md"
done
