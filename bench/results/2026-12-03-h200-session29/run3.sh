#!/usr/bin/env bash
# Session 29, run 3: the sampler's cost between a sampled request's decode
# steps. "new" is this tree (top-k by one pass with a heap of k, top-p over
# what top-k kept, no full sort without top-k); "base" the same tree with
# engine/sampling/sampler.cpp as committed before (HEAD). Both serve synth
# 0.5B Q8_0 and 7B Q4_K_M from minferd on the GPU, greedy and sampled, steps
# ahead and not (run_on_device.sh serve), two rounds alternating.
set -u
AB_REV=HEAD AB_FILES="engine/sampling/sampler.cpp" NEW_STAGES="build" BASE_TARGETS="minfer minferd" ROUNDS=2 \
  BUILD_TARGETS="minfer minferd" bash bench/results/2026-12-03-h200-session23/ab_files.sh serve
