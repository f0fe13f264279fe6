#!/usr/bin/env bash
# Session 27, run 2: the pipelined products' last stages issued after the
# activations are staged (pipe.cuh), MINFER_PIPED_EARLY=-1 / 2 against all
# stages before the wait, and gate/up's rows in halves of Q8 blocks
# (MINFER_GATE_UP_HALVES=1); SwiGLU after the rows and the paired warp sums
# in every arm: GPU tests, tg128, CUPTI shares, and the gate/up phases from
# a build with the probes compiled in.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keep() { cp "$out/summary.md" "$out/summary-$1.md"; }
BUILD_DIR=$root/build-gpu bash tests/gpu/run_on_device.sh build test; keep test
# ptxas spilled 12 bytes in the Q6_K matvec once start() came before the late issues: where.
BUILD_DIR=$root/build-gpu SASS_FILTER="gate_up_piped_kernelILi12ELb1|matvec_piped_kernelILi14ELb0" bash tests/gpu/run_on_device.sh sass
(mkdir -p /tmp/sx && cd /tmp/sx && tar xzf "$out/logs.tgz" ./matvec_piped.sass 2>/dev/null
 awk '/Function :/{f=($0 ~ /matvec_piped_kernelILi14ELb0/)} f && /STL|LDL/' /tmp/sx/matvec_piped.sass | head -8) >> "$out/summary.md"
keep sass
BUILD_DIR=$root/build-gpu AB="late halves" bash tests/gpu/run_on_device.sh bench-large; keep bench
BUILD_DIR=$root/build-gpu TIMELINE_MODELS="qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="- MINFER_PIPED_EARLY=-1 MINFER_PIPED_EARLY=2 MINFER_GATE_UP_HALVES=1" bash tests/gpu/run_on_device.sh timeline; keep timeline
BUILD_DIR=$root/build-probe PHASE_PROBES=ON BUILD_TARGETS="gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep probebuild
BUILD_DIR=$root/build-probe TIMELINE_MODELS="qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1 MINFER_PHASE_PROBE=1,MINFER_PIPED_EARLY=-1 MINFER_PHASE_PROBE=1,MINFER_GATE_UP_HALVES=1" \
  bash tests/gpu/run_on_device.sh timeline; keep probe
cd "$out" && tail -n +1 summary-*.md > all.md
