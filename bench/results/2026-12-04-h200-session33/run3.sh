#!/usr/bin/env bash
# Session 33, run 3: the pipelined products' first steps pulled into the L2
# before the PDL wait instead of copied into their stages
# (MINFER_PIPED_L2_AHEAD=N: N steps by prefetch.global.L2 beyond the
# MINFER_PIPED_EARLY copied ones; with it the activations are staged before the
# rest of the stages go out). Run 1 put the products close to their load
# floors; session 27 put gate/up's activation staging at ~3 µs inside a step,
# queued behind the stages in flight. One build, the arms by environment:
# kernels alone, tg128 of 7B Q4_K_M / Q8_0 and 1.5B Q4_K_M twice over, CUPTI
# shares. Patch: run3-tree.patch.
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
export OUT=$out
keeps=/tmp/session33-keeps; rm -rf "$keeps"; mkdir -p "$keeps"
keep() { cp "$out/summary.md" "$keeps/keep-$1.md"; (cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md"); }
B=$root/build-gpu
BUILD_DIR=$B BUILD_TARGETS="minfer gpu_matvec_bench gpu_decode_timeline" bash tests/gpu/run_on_device.sh build; keep build
{
  for c in "7b gate_up q4_k" "7b down q4_k" "7b down q6_k" "7b gate_up q8_0" "7b down q8_0"; do
    MATVEC_BENCH_CASE="$c" "$B/tests/gpu/gpu_matvec_bench" auto auto+l2 auto+e1+l2 auto+e1+l3 auto+e2+l2 2>&1 | grep "^|" | grep -v "^|---"
  done
} 2>&1 | tee "$keeps/keep-kernels.md"
models=/tmp/minfer-models; mkdir -p "$models"
for m in qwen2.5-7b:q4_k_m qwen2.5-7b:q8_0 qwen2.5-1.5b:q4_k_m; do
  f="$models/${m%%:*}-${m##*:}.gguf"; [ -f "$f" ] || "$B/daemon/minfer" synth --preset "${m%%:*}" --type "${m##*:}" -o "$f" >/dev/null 2>&1
done
tg() {  # label file env...
  local label=$1 f=$2; shift 2
  env "$@" "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); r=j['results'][-1]; print(f\"| $label | {r['median_tokens_per_s']:.0f} |\")"
}
{
  echo "| arm / model | tg128 tok/s |"
  for pass in 1 2; do
    for arm in "-" "MINFER_PIPED_L2_AHEAD=2" "MINFER_PIPED_EARLY=1 MINFER_PIPED_L2_AHEAD=2" "MINFER_PIPED_EARLY=1 MINFER_PIPED_L2_AHEAD=3" "MINFER_PIPED_EARLY=2 MINFER_PIPED_L2_AHEAD=2"; do
      envs=(); [ "$arm" = - ] || read -ra envs <<<"$arm"
      for m in qwen2.5-7b-q4_k_m qwen2.5-7b-q8_0 qwen2.5-1.5b-q4_k_m; do
        tg "pass$pass $m ${arm}" "$models/$m.gguf" "${envs[@]}"
      done
    done
  done
} 2>&1 | tee "$keeps/keep-tg.md"
BUILD_DIR=$B TIMELINE_MODELS="qwen2.5-7b:q4_k_m" \
  TIMELINE_ENVS="- MINFER_PIPED_EARLY=1,MINFER_PIPED_L2_AHEAD=2 MINFER_PIPED_L2_AHEAD=2" bash tests/gpu/run_on_device.sh timeline; keep timeline
(cd "$keeps" && tail -n +1 keep-*.md > "$out/all.md")
