#!/usr/bin/env bash
# Session 31, run 2: the draw's candidates sorted by one warp and the last
# block taking the lists as a chunk, against HEAD's kernel (the block-wide
# sort and the pairwise merge), same machine: new built and its GPU tests
# run, base (kernels/sample.cu at HEAD) built beside it, then two rounds of
# tg128 sampled (0.5B Q8_0) and a CUPTI timeline of a sampled 0.5B step on
# each.
set -uo pipefail
export OUT=${OUT:-$(pwd)/gpu-out}
AB_FILES="kernels/sample.cu" ROUNDS=2 BENCH_SAMPLED_MODELS="qwen2.5-0.5b:q8_0" \
  TIMELINE_MODELS="qwen2.5-0.5b:q8_0" TIMELINE_ENVS="MINFER_TIMELINE_TEMP=0.8" \
  bash bench/results/2026-12-03-h200-session23/ab_files.sh bench-sampled timeline
