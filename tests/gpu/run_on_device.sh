#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build, run every GPU test, benchmark, and
# print a short summary table last. Results and logs go to $OUT (or ./gpu-out).
#
#   tests/gpu/run_on_device.sh [STAGE...]
#     build        configure and build (Release, sm_90 unless CUDA_ARCH is set)
#     test         GPU kernel and engine parity tests
#     bench-small  synth 0.5B Q8_0 / Q4_K_M and 1.5B Q4_K_M: pp512, tg128, graphs on/off, profile
#     bench-large  synth 7B Q4_K_M and Q8_0: pp512, tg128
#     bench-kernels  decode matvecs alone on 7B / 0.5B shapes, per load schedule
#   AB="ARM..." adds same-run A/B benches, AB=1 all of them: nopdl (MINFER_NO_PDL=1),
#        sched0 (MINFER_MATVEC_SCHEDULE=0), stream (MINFER_MATVEC_STREAM=1, 0.5B and 7B),
#        nofusenorm (MINFER_FUSE_NORM=0: every layer norm its own launch; 0.5B and 7B), nodefer (MINFER_DEFER_NORM=0,
#        0.5B Q8_0, 1.5B, 7B), fusenorm (MINFER_FUSE_NORM=1: norms folded at every width; 1.5B, 7B),
#        nopreload (MINFER_MATVEC_PRELOAD=0; 0.5B, 1.5B), tail (MINFER_NORM_TAIL=1,
#        0.5B and 7B), again (the default again: order effects), quarter / warp
#        (MINFER_MATVEC_LANES=8 / 32: a quarter-warp or a warp a matvec row; every model),
#        generic (MINFER_MATVEC_TWO_TYPES=0: two-type q/k/v on the run-time-typed kernel; the Q4_K_M files),
#        split (MINFER_ATTN_DECODE=split: decode attention a block a KV head and range of cells; 0.5B Q8_0, 7B Q4_K_M),
#        attn256 (MINFER_ATTN_THREADS=256: decode attention's blocks at 256 threads; 0.5B Q8_0, 1.5B, 7B),
#        stages (MINFER_PIPED_STAGES=2 and =8: the pipelined products at most that many stages; 7B),
#        early (MINFER_PIPED_EARLY=1 and =2: that many of their stages issued before the PDL wait; 7B),
#        depth (tg128 deep into the context, attention auto / one launch / split; 0.5B Q8_0, 7B Q4_K_M),
#        depth256 (the same on 7B Q4_K_M, attention auto with blocks of 256 threads),
#        bridge (MINFER_BRIDGE=1: a seam's product, norm and pipelined products in one launch; 7B),
#        allbridge (MINFER_BRIDGE=all: every eligible seam so, whatever its size; 7B),
#        stagev (MINFER_ATTN_STAGE_V=0: decode attention's V rows into L1, not staged in shared
#        memory; 0.5B Q8_0, 7B), fitbatch (MINFER_ATTN_FIT_BATCH=0: decode attention's K loads always
#        16 rows a thread, not fitted to the cells; 0.5B Q8_0, 7B),
#        fixedshape (MINFER_ATTN_FIXED_SHAPE=0: decode attention on the kernel that reads the head
#        shape at run time, not the ones compiled for head dims 64 and 128; 0.5B Q8_0, 7B),
#        tailfold (MINFER_QKV_TAIL_IN_PRODUCT=0: the q/k/v tail as its own launch, not folded into
#        the q/k/v product's; 0.5B, 1.5B, 7B Q4_K_M — 7B Q8_0's pipelined q/k/v keeps its tail launch),
#        nolookahead (MINFER_NO_LOOKAHEAD=1: each decode step submitted once the host has its token,
#        none ahead; every model, 0.5B Q8_0 also without graphs),
#        piped (7B with nothing pipelined, MINFER_MATVEC_PIPED=0 MINFER_GATE_UP_PIPED=0, and with
#        every eligible launch pipelined, =1; the smaller models' launches are under the default's 16 MiB)
#     ncu          per-kernel time, DRAM throughput, occupancy of 0.5B decode steps (Nsight Compute)
#     ncu-large    the same for 7B Q4_K_M
#     ncu-stream   stall reasons of the streamed, plain and pipelined gate/up kernels (kernel bench)
#     ncu-detail   stall reasons, memory and occupancy of 7B's matvecs, and their SASS
#                  (NCU_KERNELS="regex ...": other kernels of the step instead)
#     sass         the pipelined kernels' SASS (matvec_piped.cu) into the logs, with each
#                  kernel's instruction count and its opcodes' counts (SASS_FILTER: a regex of names)
#     profile-large  7B Q4_K_M pp512 / tg128 time per op kind (minfer bench --profile)
#     timeline     each decode kernel's share of a replayed step (CUPTI), 0.5B Q8_0 and 7B Q4_K_M
#                  (TIMELINE_PROMPT=N: the steps after an N-token prompt, deep into the context)
#                  (TIMELINE_MODELS="preset:type ..."; TIMELINE_ENVS="- NAME=VALUE ...": one a setting;
#                  MINFER_PHASE_PROBE=1 with a build of PHASE_PROBES=ON: attention's, the deferred
#                  norm's and the pipelined gate/up's phases inside their blocks)
#     daemon       minferd on the GPU in a sandbox like the unit's, queried over its socket
#     serve        minferd on the GPU streaming completions of synth 0.5B Q8_0 and 7B Q4_K_M, greedy
#                  and sampled (the daemon's default sampling, temperature 0.8; and with presence
#                  and frequency penalties 0.5 and 0.3): the decode rate a
#                  client sees (events a second) and the daemon's own gauge, decode steps ahead of
#                  the host and sampled tokens drawn in the step (the default), drawn by the host
#                  from copied logits (MINFER_NO_DRAW_IN_STEP=1), no steps ahead
#                  (MINFER_NO_LOOKAHEAD=1); SERVE_ENVS="- NAME=VALUE ...": other arms
#     bench-sampled  tg128 sampled (temperature 0.8, the default filters; and with a repetition
#                  penalty 1.1) with the draw in the step and on the host, next to greedy: synth
#                  0.5B Q8_0 and 7B Q4_K_M
#     bench-logprobs tg128 with --logprobs 5 computed in the step (the default) and on the host
#                  (MINFER_NO_LOGPROBS_IN_STEP=1), and a scored prompt (pp512@score: echo with
#                  logprobs) scored by the prefill steps and by the host, next to plain pp512:
#                  synth 0.5B Q8_0 and 7B Q4_K_M (BENCH_LOGPROBS_MODELS="preset:type ...")
#     bench-prefill  prefill of short prompts (pp1 .. pp512, -n 0) with the fused prefill products
#                  (kernels::launch_gemm_fused) up to 512 tokens (MINFER_FUSED_GEMM_ROWS=512) and with
#                  every weight dequantized for cuBLAS (MINFER_NO_FUSED_GEMM=1): the crossover;
#                  synth 0.5B Q8_0 and 7B Q4_K_M (BENCH_PREFILL_MODELS="preset:type ...";
#                  BENCH_PREFILL_ARMS="label:NAME=VALUE,NAME=VALUE ...": other arms;
#                  BENCH_PREFILL_ARGS: other bench arguments)
#     jetson       the GPU suites and a decode bench shaped as Jetson AGX Orin (MINFER_DEVICE_SHAPE, kernels.h:
#                  16 SMs, 163 KiB of shared memory a block, 1,536 threads an SM, no PDL), from a build of
#                  compute_87 PTX alone that the driver JIT-compiles for this GPU: Orin's device code and
#                  launch shapes on this machine's clocks and memory (JETSON_SHAPES="orin orin,sms=4 ...";
#                  its own build dir, JETSON_BUILD_DIR)
#   default: build test bench-small
#   BUILD_TARGETS="..." builds only those ninja targets (default: the tools, tests and benches)
#   PHASE_PROBES=ON builds the kernels' phase probes in (-DMINFER_PHASE_PROBES; diagnostics only)
#   CMAKE_ARGS="-DNAME=VALUE ..." more configure options, split at spaces (with another BUILD_DIR:
#   a same-run A/B of a build option, as bench/results/2026-12-02-h200-session20/ab_build_option.sh)
#   GPU_TEST_TIMEOUT=S stops a GPU test binary after S seconds (default 900)
#
# Needs what the build needs (CMake, Ninja, CUDA, Boost, spdlog, nlohmann-json,
# GoogleTest); builds without libsystemd (MINFER_SYSTEMD=OFF) when its headers
# are missing, as on the lent H200 machines.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-$root/gpu-out}
build=${BUILD_DIR:-$root/build-gpu}
models=${MODELS_DIR:-/tmp/minfer-models}
mkdir -p "$out" "$models"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test bench-small)
summary="$out/summary.md"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

# The lent H200 machines have Boost's headers but no compiled Boost libraries.
# Boost.ProgramOptions is then built from its sources, carried in
# .carry/boost_po (Debian's boost1.81 sources, fetched by fetch_boost_po.sh; git-ignored), and
# offered to CMake as a package config.
boost_po_args=()
boost_po_fallback() {
  ls /usr/lib/*/libboost_program_options.* >/dev/null 2>&1 && return 0
  [ -d "$root/.carry/boost_po" ] || { echo "no Boost.ProgramOptions library and no .carry/boost_po sources"; return 1; }
  local dir=/tmp/minfer-boost-po ver
  ver=$(sed -n 's/#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp | tr _ .)
  [ "$(echo "$ver" | tr -cd . | wc -c)" -eq 1 ] && ver="$ver.0"
  mkdir -p "$dir/cmake"
  for f in "$root"/.carry/boost_po/*.cpp; do
    [ "$(basename "$f")" = winmain.cpp ] && continue
    g++ -O2 -fPIC -std=c++17 -c "$f" -o "$dir/$(basename "$f" .cpp).o" &
  done
  wait
  ar rcs "$dir/libboost_program_options.a" "$dir"/*.o
  cat >"$dir/cmake/boost_program_options-config.cmake" <<CFG
if(NOT TARGET Boost::program_options)
  add_library(Boost::program_options STATIC IMPORTED)
  set_target_properties(Boost::program_options PROPERTIES IMPORTED_LOCATION "$dir/libboost_program_options.a")
endif()
CFG
  cat >"$dir/cmake/boost_program_options-config-version.cmake" <<CFG
set(PACKAGE_VERSION "$ver")
set(PACKAGE_VERSION_COMPATIBLE TRUE)
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
CFG
  boost_po_args=(-Dboost_program_options_DIR="$dir/cmake")
  note "Boost.ProgramOptions $ver built from .carry/boost_po"
}

# The CUPTI timeline tool is built where the toolkit has CUPTI.
timeline_target() { grep -q "build gpu_decode_timeline\b\|tests/gpu/gpu_decode_timeline:" "$build/build.ninja" 2>/dev/null && echo gpu_decode_timeline; }

stage_build() {
  boost_po_fallback || return 1
  local systemd=ON
  [ -f /usr/include/systemd/sd-daemon.h ] || systemd=OFF
  local t0=$(date +%s)
  # shellcheck disable=SC2086  # CMAKE_ARGS: one word an option
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -DMINFER_SYSTEMD=$systemd -DMINFER_TESTS=ON -DMINFER_PHASE_PROBES="${PHASE_PROBES:-OFF}" "${boost_po_args[@]}" ${CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; return 1; }
  # shellcheck disable=SC2046
  ninja -C "$build" -j"$(nproc)" ${BUILD_TARGETS:-minfer minferd gpu_kernels_test gpu_engine_test engine_e2e_test gpu_matvec_bench $(timeline_target)} >"$out/build.log" 2>&1 \
    || { grep -E "error|FAILED|undefined reference|cannot find|No such file" "$out/build.log" | head -40; return 1; }
  note "build: ok in $(( $(date +%s) - t0 )) s (systemd $systemd)"
}

stage_test() {
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$summary"
  local failed=0
  for t in gpu_kernels_test gpu_engine_test; do
    # A bounded run: a kernel that never ends (a barrier no block leaves)
    # must not take the rest of the session with it. GPU_TEST_TIMEOUT:
    # seconds a test binary may run (the H200 needs about 40).
    timeout "${GPU_TEST_TIMEOUT:-900}" "$build/tests/gpu/$t" --gtest_output=json:"$out/$t.json" >"$out/$t.log" 2>&1 || failed=1
    note "$t: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/$t.log") failed lines"
    grep -E '^\[  FAILED  \]|Failure|parity   \]|graphs   \]' "$out/$t.log" | head -40
  done
  return $failed
}

# Shaped as Jetson Orin: a build of compute_87 PTX alone (sm_87's code paths,
# JIT-compiled by the driver), the GPU suites and a 0.5B decode bench under
# each shape. The bench's speed is this GPU's memory on Orin's 16 SMs, not
# Orin's; what it shows is that the shaped engine decodes, and its launches.
stage_jetson() {
  boost_po_fallback || return 1
  local jbuild=${JETSON_BUILD_DIR:-$root/build-jetson} systemd=ON t0
  [ -f /usr/include/systemd/sd-daemon.h ] || systemd=OFF
  t0=$(date +%s)
  cmake -S "$root" -B "$jbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=87-virtual \
    -DMINFER_SYSTEMD=$systemd -DMINFER_TESTS=ON "${boost_po_args[@]}" >"$out/configure-jetson.log" 2>&1 \
    || { tail -30 "$out/configure-jetson.log"; return 1; }
  ninja -C "$jbuild" -j"$(nproc)" minfer gpu_kernels_test gpu_engine_test >"$out/build-jetson.log" 2>&1 \
    || { grep -E "error|FAILED|undefined reference|cannot find|No such file" "$out/build-jetson.log" | head -40; return 1; }
  note "jetson build (compute_87 PTX only): ok in $(( $(date +%s) - t0 )) s"
  # The driver's JIT of the kernels, kept on disk for the next binary.
  export CUDA_CACHE_MAXSIZE=4294967296
  local failed=0 shape tag t a
  for shape in ${JETSON_SHAPES:-orin}; do
    tag=${shape//[^a-z0-9]/-}
    for t in gpu_kernels_test gpu_engine_test; do
      t0=$(date +%s)
      MINFER_DEVICE_SHAPE=$shape timeout "${GPU_TEST_TIMEOUT:-900}" "$jbuild/tests/gpu/$t" \
        --gtest_output=json:"$out/jetson-$tag-$t.json" >"$out/jetson-$tag-$t.log" 2>&1 || failed=1
      note "jetson $shape $t: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/jetson-$tag-$t.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/jetson-$tag-$t.log") failed lines, $(grep -c '^\[  SKIPPED \]' "$out/jetson-$tag-$t.log") skipped lines ($(( $(date +%s) - t0 )) s)"
      grep -E '^\[  FAILED  \]|Failure' "$out/jetson-$tag-$t.log" | head -40
    done
    a=$(build=$jbuild synth qwen2.5-0.5b q8_0)
    build=$jbuild BENCH_ARGS="-p 512 -n 128" bench "$a" "0.5b-q8_0-shaped-$tag" MINFER_DEVICE_SHAPE="$shape"
    python3 -c 'import json, sys; print("  backend:", json.load(open(sys.argv[1])).get("backend_detail", "?"))' \
      "$out/bench-0.5b-q8_0-shaped-$tag.json" 2>&1 | tee -a "$summary"
  done
  return $failed
}

# The A/B arms AB asks for: a list of names, or 1 for all of them.
ab_arms() {
  case "${AB:-}" in
    "") ;;
    1) echo nopdl sched0 stream nofusenorm nodefer tail again ;;
    *) echo "$AB" ;;
  esac
}

synth() {  # preset type
  local f="$models/$1-$2.gguf"
  [ -f "$f" ] || "$build/daemon/minfer" synth --preset "$1" --type "$2" -o "$f" >>"$out/synth.log" 2>&1
  echo "$f"
}

bench() {  # file label [env...]; BENCH_ARGS replaces "-p 512 -n 128"
  local f=$1 label=$2
  shift 2
  # shellcheck disable=SC2086
  env "$@" "$build/daemon/minfer" bench -m "$f" --backend cuda ${BENCH_ARGS:--p 512 -n 128} -r 3 -o json >"$out/bench-$label.json" 2>>"$out/bench.log"
  python3 - "$out/bench-$label.json" "$label" <<'PY' | tee -a "$summary"
import json, sys
j = json.load(open(sys.argv[1]))
cells = []
for r in j["results"]:
    s = f"{r['test']} {r['median_tokens_per_s']:.0f} t/s"
    if "fraction_of_copy_bandwidth" in r:
        s += f" ({r['weight_gb_per_s']:.0f} GB/s, {100*r['fraction_of_copy_bandwidth']:.0f}% of copy {j.get('device_copy_gb_per_s',0):.0f})"
    cells.append(s)
l = j.get("load_ms", {})
cells.append(f"load {l.get('file',0):.0f}+{l.get('backend',0):.0f}+{l.get('warmup',0):.0f} ms (capture {l.get('capture',0):.0f}), {j.get('decode_launches',0)} launches/step")
print(f"| {sys.argv[2]} | " + " | ".join(cells) + " |")
PY
}

# Sampled decode (minfer bench --temp 0.8: top-k 40, top-p 0.95, min-p 0.05)
# against greedy, the draw in the step (the default) and the host's
# (MINFER_NO_DRAW_IN_STEP=1); BENCH_SAMPLED_MODELS="preset:type ...".
stage_bench_sampled() {
  note "| model | decode |"
  note "|---|---|"
  local m f
  for m in ${BENCH_SAMPLED_MODELS:-qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m}; do
    f=$(synth "${m%%:*}" "${m##*:}")
    BENCH_ARGS="-p 0 -n 128" bench "$f" "${m/:/-}-greedy"
    BENCH_ARGS="-p 0 -n 128 --temp 0.8" bench "$f" "${m/:/-}-sampled"
    BENCH_ARGS="-p 0 -n 128 --temp 0.8" bench "$f" "${m/:/-}-sampled-host" MINFER_NO_DRAW_IN_STEP=1
    BENCH_ARGS="-p 0 -n 128 --temp 0.8 --repeat-penalty 1.1" bench "$f" "${m/:/-}-penalized"
    BENCH_ARGS="-p 0 -n 128 --temp 0.8 --repeat-penalty 1.1" bench "$f" "${m/:/-}-penalized-host" MINFER_NO_DRAW_IN_STEP=1
  done
}

# Log-probabilities: in the decode step and the prefill steps (the default,
# Op::kLogprobs, Logits::kScore) against the host's from copied logits.
stage_bench_logprobs() {
  note "| model | results |"
  note "|---|---|"
  local m f
  for m in ${BENCH_LOGPROBS_MODELS:-qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m}; do
    f=$(synth "${m%%:*}" "${m##*:}")
    BENCH_ARGS="-p 512 -n 128" bench "$f" "${m/:/-}"
    BENCH_ARGS="-p 512 -n 128 --logprobs 5 --score" bench "$f" "${m/:/-}-logprobs"
    BENCH_ARGS="-p 512 -n 128 --logprobs 5 --score" bench "$f" "${m/:/-}-logprobs-host" MINFER_NO_LOGPROBS_IN_STEP=1
  done
}

# Prefill of short prompts: the fused products (kernels::launch_gemm_fused)
# up to 512 tokens against every weight dequantized for cuBLAS: where the
# default crossover (64 tokens) should be.
stage_bench_prefill() {
  note "| model | results |"
  note "|---|---|"
  local m f arm
  for m in ${BENCH_PREFILL_MODELS:-qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m}; do
    f=$(synth "${m%%:*}" "${m##*:}")
    for arm in ${BENCH_PREFILL_ARMS:-fused:MINFER_FUSED_GEMM_ROWS=512 cublas:MINFER_NO_FUSED_GEMM=1}; do
      # shellcheck disable=SC2046
      BENCH_ARGS="${BENCH_PREFILL_ARGS:--p 1 2 4 8 16 32 64 128 256 512 -n 0}" bench "$f" "${m/:/-}-${arm%%:*}" \
        $(echo "${arm#*:}" | tr , ' ')
    done
  done
}

stage_bench_small() {
  note "| model | prefill | decode |"
  note "|---|---|---|"
  local a b c
  a=$(synth qwen2.5-0.5b q8_0); b=$(synth qwen2.5-0.5b q4_k_m); c=$(synth qwen2.5-1.5b q4_k_m)
  bench "$a" 0.5b-q8_0
  bench "$a" 0.5b-q8_0-nographs MINFER_NO_CUDA_GRAPH=1
  local arm
  for arm in $(ab_arms); do
    case $arm in
      nopdl) bench "$a" 0.5b-q8_0-nopdl MINFER_NO_PDL=1 ;;
      sched0) bench "$a" 0.5b-q8_0-sched0 MINFER_MATVEC_SCHEDULE=0 ;;
      stream) bench "$a" 0.5b-q8_0-stream MINFER_MATVEC_STREAM=1 ;;
      nofusenorm) bench "$a" 0.5b-q8_0-nofusenorm MINFER_FUSE_NORM=0 ;;
      nodefer) bench "$a" 0.5b-q8_0-nodefer MINFER_DEFER_NORM=0; bench "$c" 1.5b-q4_k_m-nodefer MINFER_DEFER_NORM=0 ;;
      fusenorm) bench "$c" 1.5b-q4_k_m-fusenorm MINFER_FUSE_NORM=1 ;;
      nopreload) bench "$a" 0.5b-q8_0-nopreload MINFER_MATVEC_PRELOAD=0; bench "$b" 0.5b-q4_k_m-nopreload MINFER_MATVEC_PRELOAD=0
                 bench "$c" 1.5b-q4_k_m-nopreload MINFER_MATVEC_PRELOAD=0 ;;
      tail) bench "$a" 0.5b-q8_0-tail MINFER_NORM_TAIL=1 ;;
      again) bench "$a" 0.5b-q8_0-again ;;
      stagev) bench "$a" 0.5b-q8_0-nostagev MINFER_ATTN_STAGE_V=0 ;;
      fitbatch) bench "$a" 0.5b-q8_0-nofitbatch MINFER_ATTN_FIT_BATCH=0 ;;
      fixedshape) bench "$a" 0.5b-q8_0-nofixedshape MINFER_ATTN_FIXED_SHAPE=0 ;;
      tailfold) bench "$a" 0.5b-q8_0-notailfold MINFER_QKV_TAIL_IN_PRODUCT=0; bench "$b" 0.5b-q4_k_m-notailfold MINFER_QKV_TAIL_IN_PRODUCT=0
                bench "$c" 1.5b-q4_k_m-notailfold MINFER_QKV_TAIL_IN_PRODUCT=0 ;;
      generic) bench "$b" 0.5b-q4_k_m-generic MINFER_MATVEC_TWO_TYPES=0; bench "$c" 1.5b-q4_k_m-generic MINFER_MATVEC_TWO_TYPES=0 ;;
      split) bench "$a" 0.5b-q8_0-split MINFER_ATTN_DECODE=split ;;
      attn256) bench "$a" 0.5b-q8_0-attn256 MINFER_ATTN_THREADS=256; bench "$c" 1.5b-q4_k_m-attn256 MINFER_ATTN_THREADS=256 ;;
      depth) for m in auto heads split; do
               BENCH_ARGS="-p 0 -n 128 -d 0 1024 4096 8192" bench "$a" "0.5b-q8_0-depth-$m" MINFER_ATTN_DECODE=$m
             done ;;
      quarter) bench "$a" 0.5b-q8_0-quarter MINFER_MATVEC_LANES=8; bench "$b" 0.5b-q4_k_m-quarter MINFER_MATVEC_LANES=8
               bench "$c" 1.5b-q4_k_m-quarter MINFER_MATVEC_LANES=8 ;;
      warp) bench "$a" 0.5b-q8_0-warp MINFER_MATVEC_LANES=32; bench "$b" 0.5b-q4_k_m-warp MINFER_MATVEC_LANES=32
            bench "$c" 1.5b-q4_k_m-warp MINFER_MATVEC_LANES=32 ;;
      nolookahead) bench "$a" 0.5b-q8_0-nolookahead MINFER_NO_LOOKAHEAD=1
                   bench "$a" 0.5b-q8_0-nographs-nolookahead MINFER_NO_CUDA_GRAPH=1 MINFER_NO_LOOKAHEAD=1
                   bench "$b" 0.5b-q4_k_m-nolookahead MINFER_NO_LOOKAHEAD=1; bench "$c" 1.5b-q4_k_m-nolookahead MINFER_NO_LOOKAHEAD=1 ;;
    esac
  done
  bench "$b" 0.5b-q4_k_m
  bench "$c" 1.5b-q4_k_m
}

# Per-kernel figures of decode steps with Nsight Compute: device time, DRAM
# throughput and achieved occupancy, caches not flushed between kernels (as in
# a real step), kernels serialized (so PDL overlap is not seen).
ncu_model() {  # model-file label launches-to-skip launches
  local f=$1 label=$2 skip=$3 count=$4 ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "ncu: not found"; return 0; }
  MINFER_NO_CUDA_GRAPH=1 "$ncu" --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
    --launch-skip "$skip" --launch-count "$count" --csv "$build/daemon/minfer" bench -m "$f" --backend cuda -p 64 -n 16 -r 1 \
    >"$out/ncu-$label.csv" 2>"$out/ncu-$label.log" || { tail -5 "$out/ncu-$label.log"; return 1; }
  python3 - "$out/ncu-$label.csv" "$label" <<'PY' | tee -a "$summary"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, ii, mi, vi, ui = (head.index(x) for x in ("Kernel Name", "ID", "Metric Name", "Metric Value", "Metric Unit"))
per = collections.defaultdict(dict)
names = {}
for r in rows[1:]:
    name = r[ki].replace("(anonymous namespace)::", "").replace("minfer::kernels::", "").replace("void ", "")
    name = name.split("(")[0].replace("unnamed>::", "")
    names[r[ii]] = name
    v = float(r[vi].replace(",", ""))
    if r[mi] == "gpu__time_duration.sum":
        v = v / 1000 if r[ui] in ("ns", "nsecond") else v if r[ui] in ("us", "usecond") else v * 1000
    per[r[ii]][r[mi]] = v
tot = collections.defaultdict(lambda: collections.defaultdict(float)); cnt = collections.Counter()
for i, m in per.items():
    n = names[i]; cnt[n] += 1
    for k, v in m.items(): tot[n][k] += v
s = sum(t["gpu__time_duration.sum"] for t in tot.values())
print(f"ncu {sys.argv[2]}: {len(per)} kernels, {s:.0f} us")
print("| kernel | launches | us each | share | DRAM % | occupancy % | registers |")
print("|---|---|---|---|---|---|---|")
for n, t in sorted(tot.items(), key=lambda x: -x[1]["gpu__time_duration.sum"]):
    c = cnt[n]; us = t["gpu__time_duration.sum"]
    print(f"| {n[:60]} | {c} | {us/c:.2f} | {100*us/s:.0f}% | {t['dram__throughput.avg.pct_of_peak_sustained_elapsed']/c:.0f} | "
          f"{t['sm__warps_active.avg.pct_of_peak_sustained_active']/c:.0f} | {t['launch__registers_per_thread']/c:.0f} |")
PY
}

stage_ncu() {
  ncu_model "$(synth qwen2.5-0.5b q8_0)" 0.5b-q8_0 1200 200
}
stage_ncu_large() {
  ncu_model "$(synth qwen2.5-7b q4_k_m)" 7b-q4_k_m 1600 240
}

# One instance each of the big decode kernels of 7B Q4_K_M in detail (stall
# reasons, memory, occupancy), and their SASS: why a kernel is below the
# bandwidth.
stage_ncu_detail() {
  local f ncu obj
  f=$(synth qwen2.5-7b q4_k_m)
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "ncu: not found"; return 0; }
  for k in ${NCU_KERNELS:-gate_up_kernel matvec_kernel}; do
    MINFER_NO_CUDA_GRAPH=1 "$ncu" --clock-control none --cache-control none -k "regex:$k" --launch-skip 300 --launch-count 2 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
      --section LaunchStats --section SchedulerStats "$build/daemon/minfer" bench -m "$f" --backend cuda -p 64 -n 16 -r 1 \
      >"$out/ncu-detail-$k.txt" 2>&1
    note "ncu detail $k:"
    grep -E "^  [a-z_]+<|DRAM Throughput|Memory Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issued Warp Per|No Eligible|L1/TEX Hit|L2 Hit|Stall|stall|Long Scoreboard|Waves Per SM|Mem Busy|Max Bandwidth|Eligible Warps" \
      "$out/ncu-detail-$k.txt" | head -60 | tee -a "$summary"
  done
  obj=$(find "$build" -name "matvec.cu.o" | head -1)
  if [ -n "$obj" ] && command -v cuobjdump >/dev/null; then
    cuobjdump -sass "$obj" >"$out/matvec.sass" 2>&1
    python3 "$root/tests/gpu/sass_summary.py" "$out/matvec.sass" "gate_up_kernelILi12ELi2|matvec_kernelILi14E|matvec_kernelILi12E" kinds |
      tee -a "$summary"
  fi
}

# The pipelined kernels' SASS: the whole listing into the logs, and a line a
# kernel (SASS_FILTER: which ones) with its instruction count and the
# opcodes it issues most.
stage_sass() {
  local obj
  obj=$(find "$build" -name "matvec_piped.cu.o" | head -1)
  command -v cuobjdump >/dev/null || { note "sass: no cuobjdump"; return 0; }
  [ -n "$obj" ] || { note "sass: no matvec_piped.cu.o"; return 1; }
  cuobjdump -sass "$obj" >"$out/matvec_piped.sass" 2>&1
  python3 "$root/tests/gpu/sass_summary.py" "$out/matvec_piped.sass" "${SASS_FILTER:-.}" ops | tee -a "$summary"
}

# Decode matvec kernels alone on 7B and 0.5B weight shapes: µs a launch and
# GB/s for each variant (tests/gpu/matvec_bench.cpp): the plain kernels'
# per-launch schedule choice, and the streamed kernels with stage shapes
# warps/units/stages (KERNEL_VARIANTS overrides the list).
stage_bench_kernels() {
  # shellcheck disable=SC2086
  "$build/tests/gpu/gpu_matvec_bench" ${KERNEL_VARIANTS:-auto stream stream:8/64/2 stream:4/128/4} 2>&1 | tee -a "$summary"
}

# The streamed, the plain and the pipelined gate/up kernel (NCU_VARIANTS:
# matvec_bench variants) on 7B Q4_K shapes (NCU_CASE: another matvec_bench
# case) under Nsight Compute: stall reasons a issued instruction,
# instructions, each pipe's share of issue, shared-memory bank conflicts and
# wavefronts, DRAM throughput.
stage_ncu_stream() {
  local ncu v k
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "ncu: not found"; return 0; }
  for v in ${NCU_VARIANTS:-stream auto+plain auto}; do
    case $v in stream*) k=matvec_stream_kernel ;; *plain*) k=gate_up_kernel ;; *) k=piped_kernel ;; esac
    MATVEC_BENCH_CASE="${NCU_CASE:-7b gate_up q4_k}" "$ncu" --clock-control none --cache-control none -k "regex:$k" --launch-skip 20 --launch-count 1 \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__t_sector_hit_rate.pct,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active,launch__grid_size,launch__occupancy_limit_shared_mem,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_ldgsts.sum" \
      "$build/tests/gpu/gpu_matvec_bench" "$v" >"$out/ncu-stream-$v.txt" 2>&1
    note "ncu $v ($k):"
    grep -E "^    [a-z_]+__" "$out/ncu-stream-$v.txt" | awk '{v=$NF; if (v != "0" && v != "0.00" && v != "0,00") print}' | head -45 | tee -a "$summary"
  done
}

# Each decode kernel's share of a replayed step (CUPTI kernel records; graphs
# and PDL on, as the service runs): 0.5B Q8_0 and 7B Q4_K_M, tg128 after a
# one-token prompt like the bench. TIMELINE_MODELS overrides the list
# (preset:type ...); every kernel of the last step goes to a CSV in the logs.
# TIMELINE_ENVS="- NAME=VALUE ...": one timeline per entry, "-" with the
# environment as it is, NAME=VALUE with that set (A/B of one kernel's share;
# NAME=VALUE,NAME2=VALUE2 sets both). TIMELINE_PROMPT=N: steps after a prompt
# of N tokens (deep into the context) instead of one.
stage_timeline() {
  [ -x "$build/tests/gpu/gpu_decode_timeline" ] || { note "timeline: gpu_decode_timeline not built (no CUPTI)"; return 0; }
  local m f e label
  for m in ${TIMELINE_MODELS:-qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m}; do
    f=$(synth "${m%%:*}" "${m##*:}")
    for e in ${TIMELINE_ENVS:--}; do
      label=${m/:/-}
      [ "${TIMELINE_PROMPT:-1}" = 1 ] || label="$label-d${TIMELINE_PROMPT}"
      [ "$e" = - ] || label="$label-${e//[^A-Za-z0-9]/_}"
      note "timeline $label"
      # shellcheck disable=SC2046
      env $([ "$e" = - ] || echo "${e//,/ }") "$build/tests/gpu/gpu_decode_timeline" "$f" "${TIMELINE_PROMPT:-1}" 128 "$out/timeline-$label.csv" \
        2>"$out/timeline-$label.log" | tee -a "$summary" || { tail -5 "$out/timeline-$label.log"; return 1; }
    done
  done
}

# Where a 7B Q4_K_M pp512 and tg128 spend their time, per op kind (CUDA events).
stage_profile_large() {
  local f
  f=$(synth qwen2.5-7b q4_k_m)
  "$build/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 128 -r 1 --profile 2>>"$out/bench.log" | tee -a "$summary" | tail -40
}

# minferd on the GPU under what the systemd unit's sandbox can be reproduced
# with here (no systemd on the lent machines), one restriction set at a time
# and then all together:
#   ns-only  its own network, IPC and mount namespaces (PrivateNetwork,
#         PrivateIPC, PrivateMounts);
#   ns    the same with /usr /etc /opt /var /home /root read-only
#         (ProtectSystem=strict, ProtectHome);
#   user  an unprivileged user (65534) with no capabilities and no_new_privs
#         (User=, CapabilityBoundingSet=, NoNewPrivileges=);
#   all   both.
# Not reproduced: the seccomp filter and the device cgroup. --backend cuda
# makes minferd refuse to start unless the GPU runs the whole model.
daemon_run() {  # label prefix-command...
  local label=$1 dir=/tmp/minfer-gpu sock log pid i
  shift
  rm -rf "$dir" && mkdir -p "$dir" && chmod 0777 "$dir"
  cp "$build/daemon/minferd/minferd" "$dir/minferd" && chmod 0755 "$dir/minferd"
  cp "$root/tests/data/models/stories260K.gguf" "$dir/model.gguf" && chmod 0644 "$dir/model.gguf"
  sock=$dir/minferd.sock
  log=$out/minferd-$label.log
  "$@" sh -c "$DAEMON_RO exec $DAEMON_DROP $dir/minferd --model $dir/model.gguf --socket $sock --backend ${MINFERD_BACKEND:-cuda} --ctx-size 256" >"$log" 2>&1 &
  pid=$!
  for i in $(seq 1 100); do [ -S "$sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  python3 - "$sock" "$label" <<'PY' 2>&1 | tee -a "$summary"
import http.client, json, socket, sys, time
class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=30); self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); self.sock.connect(self.path_)
def req(method, url, body=None):
    c = UnixConn(sys.argv[1]); c.request(method, url, body=json.dumps(body) if body else None,
                                         headers={"Content-Type": "application/json"})
    r = c.getresponse(); return r.status, r.read().decode()
try:
    for _ in range(150):
        st, body = req("GET", "/health")
        if st == 200: break
        time.sleep(0.2)
    h = json.loads(body)
    st2, body2 = req("POST", "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})
    j = json.loads(body2)
    print(f"minferd [{sys.argv[2]}]: /health {st} backend {h.get('backend')}; /v1/completions {st2}: {j['choices'][0]['text']!r}")
except Exception as e:
    print(f"minferd [{sys.argv[2]}]: no answer ({type(e).__name__})")
PY
  # unshare --fork does not pass signals on: SIGTERM goes to minferd itself.
  pkill -TERM -f "$dir/minferd --model" || true
  wait "$pid"
  note "minferd [$label] exit status after SIGTERM: $?; $(grep -E 'error|weight gate|backend' "$log" | grep -v ' request ' | head -2 | cut -c1-240)"
}

stage_daemon() {
  ls -l /dev/nvidia* 2>&1 | head -6 | tee -a "$summary"
  local ns=() ro="" drop=""
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then ns=(unshare --net --ipc --mount --fork); fi
  # Recursive binds: a plain --bind drops the mounts beneath (GPU driver
  # libraries bind-mounted into /usr by the machine's runtime vanish: seen as
  # cudaErrorInsufficientDriver). ProtectSystem= keeps them too.
  for d in /usr /etc /opt /var /home /root; do [ -d "$d" ] && ro="$ro mount --rbind $d $d && mount -o remount,bind,ro $d;"; done
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    drop="setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs --bounding-set=-all --inh-caps=-all"
  fi
  DAEMON_RO="" DAEMON_DROP="" daemon_run plain env
  [ ${#ns[@]} -gt 0 ] && DAEMON_RO="" DAEMON_DROP="" daemon_run ns-only "${ns[@]}"
  [ ${#ns[@]} -gt 0 ] && DAEMON_RO="$ro" DAEMON_DROP="" daemon_run ns "${ns[@]}"
  [ -n "$drop" ] && DAEMON_RO="" DAEMON_DROP="$drop" daemon_run user env
  local video
  video=$(getent group video | cut -d: -f3)
  [ -n "$drop" ] && [ -n "$video" ] && DAEMON_RO="" DAEMON_DROP="${drop/--clear-groups/--groups=$video}" daemon_run user-video env
  [ ${#ns[@]} -gt 0 ] && [ -n "$drop" ] && DAEMON_RO="$ro" DAEMON_DROP="$drop" daemon_run all "${ns[@]}"
}

# The decode rate a streaming client sees from minferd on the GPU, with the
# engine's steps ahead of the host and without: per model and arm, 5
# streamed completions of 256 tokens greedy and 5 sampled (temperature 0.8,
# the rest the daemon's defaults: top-k 40, drawn in the step); the rate
# is the events after the first over the time from the first to the last,
# median of the 5, next to the daemon's minfer_decode_tokens_per_second
# gauge (its own decode rate).
stage_serve() {
  local m f env dir=/tmp/minfer-serve sock pid i
  for m in ${SERVE_MODELS:-qwen2.5-0.5b:q8_0 qwen2.5-7b:q4_k_m}; do
    f=$(synth "${m%%:*}" "${m##*:}")
    for env in ${SERVE_ENVS:-- MINFER_NO_DRAW_IN_STEP=1 MINFER_NO_LOOKAHEAD=1}; do
      rm -rf "$dir" && mkdir -p "$dir"
      sock=$dir/minferd.sock
      # shellcheck disable=SC2046
      env $([ "$env" = - ] || echo "$env") "$build/daemon/minferd/minferd" --model "$f" --socket "$sock" \
        --backend "${MINFERD_BACKEND:-cuda}" --ctx-size 2048 >"$out/serve-${m/:/-}-${env%%=*}.log" 2>&1 &
      pid=$!
      for i in $(seq 1 300); do [ -S "$sock" ] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      python3 - "$sock" "${m/:/-} ${env}" "${SERVE_TOKENS:-256}" <<'PY' 2>&1 | tee -a "$summary"
import http.client, json, socket, statistics, sys, time
class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=120); self.path_ = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); self.sock.connect(self.path_)
def get(url):
    c = UnixConn(sys.argv[1]); c.request("GET", url); r = c.getresponse(); return r.status, r.read().decode()
try:
    for _ in range(300):
        try:
            st, _ = get("/health")
            if st == 200: break
        except OSError:
            pass
        time.sleep(0.2)
    penalties = {"presence_penalty": 0.5, "frequency_penalty": 0.3}
    for temperature, extra in ((0.0, {}), (0.8, {}), (0.8, penalties)):
        rates, gauges, events = [], [], []
        for i in range(5):
            c = UnixConn(sys.argv[1])
            c.request("POST", "/v1/completions", json.dumps({"prompt": "Once upon a time", "max_tokens": int(sys.argv[3]),
                      "temperature": temperature, "seed": i, "stream": True, **extra}), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            times = []
            while True:
                line = r.readline()
                if not line: break
                if line.startswith(b"data: ") and not line.startswith(b"data: [DONE]"): times.append(time.perf_counter())
            events.append(len(times))
            if len(times) > 2: rates.append((len(times) - 1) / (times[-1] - times[0]))
            _, metrics = get("/metrics")
            for l in metrics.splitlines():
                if l.startswith("minfer_decode_tokens_per_second "): gauges.append(float(l.split()[1]))
        print(f"serve {sys.argv[2]} {'greedy' if temperature == 0 else f'T {temperature}'}{' penalties' if extra else ''}: client "
              f"{statistics.median(rates):.0f} events/s (of {events}), daemon gauge {statistics.median(gauges):.0f} tok/s")
except Exception as e:
    print(f"serve {sys.argv[2]}: failed ({type(e).__name__}: {e})")
PY
      kill -TERM "$pid" 2>/dev/null; wait "$pid"
    done
  done
}

stage_bench_large() {
  local a b
  a=$(synth qwen2.5-7b q4_k_m); b=$(synth qwen2.5-7b q8_0)
  bench "$a" 7b-q4_k_m
  bench "$b" 7b-q8_0
  local arm
  for arm in $(ab_arms); do
    case $arm in
      stream) bench "$a" 7b-q4_k_m-stream MINFER_MATVEC_STREAM=1; bench "$b" 7b-q8_0-stream MINFER_MATVEC_STREAM=1 ;;
      nofusenorm) bench "$a" 7b-q4_k_m-nofusenorm MINFER_FUSE_NORM=0; bench "$b" 7b-q8_0-nofusenorm MINFER_FUSE_NORM=0 ;;
      nodefer) bench "$a" 7b-q4_k_m-nodefer MINFER_DEFER_NORM=0; bench "$b" 7b-q8_0-nodefer MINFER_DEFER_NORM=0 ;;
      fusenorm) bench "$a" 7b-q4_k_m-fusenorm MINFER_FUSE_NORM=1; bench "$b" 7b-q8_0-fusenorm MINFER_FUSE_NORM=1 ;;
      tail) bench "$a" 7b-q4_k_m-tail MINFER_NORM_TAIL=1; bench "$b" 7b-q8_0-tail MINFER_NORM_TAIL=1 ;;
      generic) bench "$a" 7b-q4_k_m-generic MINFER_MATVEC_TWO_TYPES=0 ;;
      split) bench "$a" 7b-q4_k_m-split MINFER_ATTN_DECODE=split ;;
      attn256) bench "$a" 7b-q4_k_m-attn256 MINFER_ATTN_THREADS=256; bench "$b" 7b-q8_0-attn256 MINFER_ATTN_THREADS=256 ;;
      stages) for n in 2 8; do
                bench "$a" "7b-q4_k_m-stages$n" MINFER_PIPED_STAGES=$n; bench "$b" "7b-q8_0-stages$n" MINFER_PIPED_STAGES=$n
              done ;;
      early) for n in 1 2; do
               bench "$a" "7b-q4_k_m-early$n" MINFER_PIPED_EARLY=$n; bench "$b" "7b-q8_0-early$n" MINFER_PIPED_EARLY=$n
             done ;;
      depth) for m in auto heads split; do
               BENCH_ARGS="-p 0 -n 128 -d 0 512 2048 4096" bench "$a" "7b-q4_k_m-depth-$m" MINFER_ATTN_DECODE=$m
             done ;;
      depth256) BENCH_ARGS="-p 0 -n 128 -d 0 512 2048 4096" bench "$a" 7b-q4_k_m-depth-auto-256 MINFER_ATTN_THREADS=256 ;;
      quarter) bench "$a" 7b-q4_k_m-quarter MINFER_MATVEC_LANES=8; bench "$b" 7b-q8_0-quarter MINFER_MATVEC_LANES=8 ;;
      warp) bench "$a" 7b-q4_k_m-warp MINFER_MATVEC_LANES=32; bench "$b" 7b-q8_0-warp MINFER_MATVEC_LANES=32 ;;
      bridge) bench "$a" 7b-q4_k_m-bridge MINFER_BRIDGE=1; bench "$b" 7b-q8_0-bridge MINFER_BRIDGE=1 ;;
      allbridge) bench "$a" 7b-q4_k_m-allbridge MINFER_BRIDGE=all; bench "$b" 7b-q8_0-allbridge MINFER_BRIDGE=all ;;
      stagev) bench "$a" 7b-q4_k_m-nostagev MINFER_ATTN_STAGE_V=0; bench "$b" 7b-q8_0-nostagev MINFER_ATTN_STAGE_V=0 ;;
      fitbatch) bench "$a" 7b-q4_k_m-nofitbatch MINFER_ATTN_FIT_BATCH=0; bench "$b" 7b-q8_0-nofitbatch MINFER_ATTN_FIT_BATCH=0 ;;
      fixedshape) bench "$a" 7b-q4_k_m-nofixedshape MINFER_ATTN_FIXED_SHAPE=0; bench "$b" 7b-q8_0-nofixedshape MINFER_ATTN_FIXED_SHAPE=0 ;;
      tailfold) bench "$a" 7b-q4_k_m-notailfold MINFER_QKV_TAIL_IN_PRODUCT=0 ;;
      nolookahead) bench "$a" 7b-q4_k_m-nolookahead MINFER_NO_LOOKAHEAD=1; bench "$b" 7b-q8_0-nolookahead MINFER_NO_LOOKAHEAD=1 ;;
      piped) bench "$a" 7b-q4_k_m-plain MINFER_MATVEC_PIPED=0 MINFER_GATE_UP_PIPED=0
             bench "$b" 7b-q8_0-plain MINFER_MATVEC_PIPED=0 MINFER_GATE_UP_PIPED=0
             bench "$a" 7b-q4_k_m-allpiped MINFER_MATVEC_PIPED=1 MINFER_GATE_UP_PIPED=1
             bench "$b" 7b-q8_0-allpiped MINFER_MATVEC_PIPED=1 MINFER_GATE_UP_PIPED=1 ;;
    esac
  done
}

status=0
for s in "${stages[@]}"; do
  case "$s" in
    build) stage_build || { status=1; break; } ;;
    test) stage_test || status=1 ;;
    bench-small) stage_bench_small || status=1 ;;
    bench-large) stage_bench_large || status=1 ;;
    bench-kernels) stage_bench_kernels || status=1 ;;
    ncu-stream) stage_ncu_stream || status=1 ;;
    ncu) stage_ncu || status=1 ;;
    ncu-large) stage_ncu_large || status=1 ;;
    ncu-detail) stage_ncu_detail || status=1 ;;
    sass) stage_sass || status=1 ;;
    profile-large) stage_profile_large || status=1 ;;
    timeline) stage_timeline || status=1 ;;
    daemon) stage_daemon || status=1 ;;
    serve) stage_serve || status=1 ;;
    bench-sampled) stage_bench_sampled || status=1 ;;
    bench-logprobs) stage_bench_logprobs || status=1 ;;
    bench-prefill) stage_bench_prefill || status=1 ;;
    jetson) stage_jetson || status=1 ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
# At most 8 files come back from the lent machines: pack the logs.
(cd "$out" && tar czf /tmp/minfer-logs.tgz --exclude=summary.md . 2>/dev/null; find . -type f ! -name summary.md -delete; mv /tmp/minfer-logs.tgz logs.tgz)
echo
echo "== summary =="
cat "$summary"
exit $status
