#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build, run every GPU test, benchmark, and
# print a short summary table last. Results and logs go to $OUT (or ./gpu-out).
#
#   tests/gpu/run_on_device.sh [STAGE...]
#     build        configure and build (Release, sm_90 unless CUDA_ARCH is set)
#     test         GPU kernel and engine parity tests
#     bench-small  synth 0.5B Q8_0 / Q4_K_M and 1.5B Q4_K_M: pp512, tg128, graphs on/off, profile
#     bench-large  synth 7B Q4_K_M and Q8_0: pp512, tg128
#     ncu          per-kernel device time of decode steps (Nsight Compute)
#   default: build test bench-small
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
# .carry/boost_po (Debian's boost1.81 source package; git-ignored), and
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

stage_build() {
  boost_po_fallback || return 1
  local systemd=ON
  [ -f /usr/include/systemd/sd-daemon.h ] || systemd=OFF
  local t0=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" \
    -DMINFER_SYSTEMD=$systemd -DMINFER_TESTS=ON "${boost_po_args[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; return 1; }
  ninja -C "$build" -j"$(nproc)" minfer gpu_kernels_test gpu_engine_test engine_e2e_test >"$out/build.log" 2>&1 \
    || { grep -E "error|FAILED" "$out/build.log" | head -40; return 1; }
  note "build: ok in $(( $(date +%s) - t0 )) s (systemd $systemd)"
}

stage_test() {
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$summary"
  local failed=0
  for t in gpu_kernels_test gpu_engine_test; do
    "$build/tests/gpu/$t" --gtest_output=json:"$out/$t.json" >"$out/$t.log" 2>&1 || failed=1
    note "$t: $(grep -E '^\[  (PASSED|FAILED)  \]' "$out/$t.log" | head -1) $(grep -c '^\[  FAILED  \]' "$out/$t.log") failed lines"
    grep -E '^\[  FAILED  \]|Failure|parity   \]|graphs   \]' "$out/$t.log" | head -40
  done
  return $failed
}

synth() {  # preset type
  local f="$models/$1-$2.gguf"
  [ -f "$f" ] || "$build/daemon/minfer" synth --preset "$1" --type "$2" -o "$f" >>"$out/synth.log" 2>&1
  echo "$f"
}

bench() {  # file label [env...]
  local f=$1 label=$2
  shift 2
  env "$@" "$build/daemon/minfer" bench -m "$f" --backend cuda -p 512 -n 128 -r 3 -o json >"$out/bench-$label.json" 2>>"$out/bench.log"
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

stage_bench_small() {
  note "| model | prefill | decode |"
  note "|---|---|---|"
  local a b c
  a=$(synth qwen2.5-0.5b q8_0); b=$(synth qwen2.5-0.5b q4_k_m); c=$(synth qwen2.5-1.5b q4_k_m)
  bench "$a" 0.5b-q8_0
  bench "$a" 0.5b-q8_0-nographs MINFER_NO_CUDA_GRAPH=1
  bench "$a" 0.5b-q8_0-nopdl MINFER_NO_PDL=1
  bench "$a" 0.5b-q8_0-fusenorm MINFER_FUSE_NORM=1
  bench "$b" 0.5b-q4_k_m
  bench "$c" 1.5b-q4_k_m
}

# Per-kernel device time of decode steps with Nsight Compute (one metric,
# one pass per kernel): where a decode step's time goes.
stage_ncu() {
  local a ncu
  a=$(synth qwen2.5-0.5b q8_0)
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { note "ncu: not found"; return 0; }
  MINFER_NO_CUDA_GRAPH=1 "$ncu" --clock-control none --metrics gpu__time_duration.sum --launch-skip 400 \
    --launch-count 400 --csv "$build/daemon/minfer" bench -m "$a" --backend cuda -p 1 -n 8 -r 1 \
    >"$out/ncu.csv" 2>"$out/ncu.log" || { tail -5 "$out/ncu.log"; return 1; }
  python3 - "$out/ncu.csv" <<'PY' | tee -a "$summary"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
ki, vi, ui = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); u = r[ui]
    us = v / 1000 if u == "nsecond" else v if u == "usecond" else v * 1000
    name = r[ki].split("(")[0].split("<")[0].replace("minfer::kernels::", "").replace("(anonymous namespace)::", "")
    tot[name] += us; cnt[name] += 1
s = sum(tot.values())
print(f"ncu: {len(rows)-1} kernels, {s:.0f} us")
for k, v in sorted(tot.items(), key=lambda x: -x[1]):
    print(f"| {k} | {cnt[k]} | {v:.0f} us | {v/cnt[k]:.2f} us each | {100*v/s:.0f}% |")
PY
}

stage_bench_large() {
  local a b
  a=$(synth qwen2.5-7b q4_k_m); b=$(synth qwen2.5-7b q8_0)
  bench "$a" 7b-q4_k_m
  bench "$b" 7b-q8_0
}

status=0
for s in "${stages[@]}"; do
  case "$s" in
    build) stage_build || { status=1; break; } ;;
    test) stage_test || status=1 ;;
    bench-small) stage_bench_small || status=1 ;;
    bench-large) stage_bench_large || status=1 ;;
    ncu) stage_ncu || status=1 ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
# At most 8 files come back from the lent machines: pack the logs.
(cd "$out" && tar czf /tmp/minfer-logs.tgz --exclude=summary.md . 2>/dev/null; find . -type f ! -name summary.md -delete; mv /tmp/minfer-logs.tgz logs.tgz)
echo
echo "== summary =="
cat "$summary"
exit $status
