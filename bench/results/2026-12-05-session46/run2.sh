#!/usr/bin/env bash
# Session 46, run 2: perplexity's context half evaluated without the output
# head (GenerationRequest::prompt_logprobs_from), against the build before it.
#   - builds the tree (minfer, the GPU suites) and, from old-src/ (the sources
#     of cf13f17, carried git-ignored: `git archive cf13f17 CMakeLists.txt
#     platform engine kernels daemon packaging`), the minfer before the change;
#   - gpu_engine_test (CudaLogprobs.ScoredPromptMatchesTheCpuAndGraphsStillReplay
#     now scores half a prompt too) and GpuGemmFused.* (gemm_fused.cu's Group
#     lost its unused type parameter: the same PTX, checked on the 2-core
#     machine);
#   - minfer perplexity over README.md, chunks of 512, before / after,
#     alternating, two passes: 0.5B Q8_0 (8 chunks) and 7B Q4_K_M (4);
#   - tg128 of 0.5B Q8_0 with graphs and with eager launches (issue 5's ratio
#     on this machine).
#   bash bench/results/2026-12-05-session46/run2.sh   (carry: .carry/boost_po old-src)
set -uo pipefail
root=$(pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
sum="$out/run2-summary.md"
log() { echo "$*" | tee -a "$sum"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 )) s"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
OUT=/tmp/b1 BUILD_DIR=$root/build-gpu BUILD_TARGETS="minfer gpu_engine_test gpu_kernels_test" \
  bash tests/gpu/run_on_device.sh build >/dev/null 2>&1
log "$(grep -h 'build:' /tmp/b1/summary.md | tail -1) ($(el))"
B=$root/build-gpu
[ -x "$B/tests/gpu/gpu_engine_test" ] || { grep -E "error|FAILED" /tmp/b1/build.log | head -40 >> "$sum"; cat "$sum"; exit 1; }
O=/tmp/build-old
( cmake -S "$root/old-src" -B "$O" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DMINFER_SYSTEMD=OFF \
    -DMINFER_TESTS=OFF -Dboost_program_options_DIR=/tmp/minfer-boost-po/cmake > /tmp/old-configure.log 2>&1 &&
  ninja -C "$O" -j12 minfer > /tmp/old-build.log 2>&1; echo "old build rc=$?" >> /tmp/old-build.log ) &
old_pid=$!
timeout 120 "$B/tests/gpu/gpu_kernels_test" --gtest_filter='GpuGemmFused.*' > "$out/run2-gpu_kernels_test.log" 2>&1
log "gpu_kernels_test GpuGemmFused.* rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run2-gpu_kernels_test.log" | tr '\n' ' ') ($(el))"
timeout 300 "$B/tests/gpu/gpu_engine_test" > "$out/run2-gpu_engine_test.log" 2>&1
log "gpu_engine_test rc=$?: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/run2-gpu_engine_test.log" | tr '\n' ' ') ($(el))"
grep -E '^\[  FAILED  \]|Failure|Expected|Which is' "$out/run2-gpu_engine_test.log" | head -30 >> "$sum"
gzip -f "$out/run2-gpu_engine_test.log" "$out/run2-gpu_kernels_test.log"
wait "$old_pid"
log "old minfer: $(tail -1 /tmp/old-build.log) ($(el))"
[ -x "$O/daemon/minfer" ] || { tail -20 /tmp/old-build.log >> "$sum"; grep -E "error" /tmp/old-build.log | head >> "$sum"; }
models=/tmp/minfer-models; mkdir -p "$models"
log ""
log "| file | build (pass) | chunks x 512 | seconds | tok/s | ppl |"
log "|---|---|---:|---:|---:|---:|"
for m in qwen2.5-0.5b:q8_0:8 qwen2.5-7b:q4_k_m:4; do
  IFS=: read -r preset type chunks <<< "$m"
  f="$models/$preset-$type.gguf"
  [ -f "$f" ] || "$B/daemon/minfer" synth --preset "$preset" --type "$type" -o "$f" >/dev/null 2>&1
  for pass in 1 2; do
    for arm in old new; do
      bin="$B/daemon/minfer"; [ $arm = old ] && bin="$O/daemon/minfer"
      [ -x "$bin" ] || continue
      timeout 120 "$bin" perplexity -m "$f" --backend cuda -c 1024 --chunk 512 --chunks "$chunks" -f "$root/README.md" -o json \
        2>/dev/null | python3 -c "
import json,sys; j=json.load(sys.stdin)
print(f\"| $preset $type | $arm ($pass) | {j['chunks']} | {j['seconds']:.3f} | {j['chunks']*512/j['seconds']:.0f} | {j['ppl']:.6f} |\")" |
        tee -a "$sum"
    done
  done
  log "($(el))"
done
log ""
f="$models/qwen2.5-0.5b-q8_0.gguf"
for pass in 1 2; do
  for g in true false; do
    timeout 100 "$B/daemon/minfer" bench -m "$f" --backend cuda -p 0 -n 128 -r 3 -o json --cuda-graphs $g 2>/dev/null |
      python3 -c "
import json,sys; j=json.load(sys.stdin)
for r in j['results']: print(f\"0.5B Q8_0 {r['test']} cuda-graphs $g (pass $pass): {r['median_tokens_per_s']:.1f} tok/s\")" | tee -a "$sum"
  done
done
log "($(el))"
cat "$sum"
