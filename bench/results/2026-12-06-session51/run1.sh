#!/usr/bin/env bash
# Session 51, run 1: where deep decode attention spends its time, 4,096 cells
# deep (phase probe build, -DMINFER_PHASE_PROBES=ON): the split kernel on 7B
# Q4_K_M and 0.5B Q8_0, the heads kernel on 0.5B Q8_0 (CUPTI shares and the
# blocks' phases), then Nsight Compute on one split launch of 7B.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session51-keeps1; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
  mkdir -p "$out/keeps" && cp "$keeps"/* "$out/keeps/"; }
P=$root/build-probe
PHASE_PROBES=ON BUILD_DIR=$P BUILD_TARGETS="minfer gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build-probe
BUILD_DIR=$P TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-7b:q4_k_m qwen2.5-0.5b:q8_0" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=split" bash tests/gpu/run_on_device.sh timeline; keep timeline-split
BUILD_DIR=$P TIMELINE_PROMPT=4096 TIMELINE_MODELS="qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="MINFER_PHASE_PROBE=1,MINFER_ATTN_DECODE=heads" bash tests/gpu/run_on_device.sh timeline; keep timeline-heads
# Nsight Compute on two split launches of 7B decode, 4,096 deep (eager).
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
f=/tmp/minfer-models/qwen2.5-7b-q4_k_m.gguf; [ -f "$f" ] || f=
echo "ncu=$ncu model=$f" | tee -a "$out/summary.md"
if [ -n "$ncu" ] && [ -n "$f" ]; then
  MINFER_ATTN_DECODE=split MINFER_NO_CUDA_GRAPH=1 timeout 240 "$ncu" --clock-control none --cache-control none \
    -k "regex:attention_split" --launch-skip 56 --launch-count 2 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --section SchedulerStats --section SourceCounters \
    "$P/daemon/minfer" bench -m "$f" --backend cuda -p 4096 -n 8 -r 1 >"$out/ncu-split.txt" 2>&1
  grep -E "^  [a-z_]+|DRAM Throughput|Memory Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L1/TEX Hit|L2 Hit|Stall|stall|Long Scoreboard|Waves Per SM|Mem Busy|Eligible Warps|Dynamic Shared|Grid Size|Block Size" \
    "$out/ncu-split.txt" | head -80 | tee -a "$out/summary.md"
fi
keep ncu
