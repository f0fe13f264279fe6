#!/bin/bash
# Cross-builds tests for aarch64 and runs them under qemu-user: how the NEON
# code of Jetson's CPU backend is tested on an x86-64 machine.
#
#   tests/quant/run_neon_qemu.sh [quant|engine] [out_dir]
#
#   quant   (default; .ci/run) engine/quant's tests: the NEON kernels against
#           the scalar reference, ~30 s on two cores.
#   engine  the whole engine without CUDA, and the engine tests that run on
#           the CPU backend: the shipped model's reference tokens, the float64
#           forward reference, the CPU kernels (NEON attention rows too), the
#           thread pool. ~2 min to build and ~5 min under qemu on two cores:
#           run by hand (README "Jetson's CPU backend on aarch64").
#
# (packaging/dev.sh deps installs g++-aarch64-linux-gnu, qemu-user and
# googletest's sources.) qemu's "max" CPU has the ARMv8.2 dot product (like
# Orin's Cortex-A78AE); "cortex-a53" lacks it, so there detected_isa() must
# fall back to scalar. Only the engine is built: fmt and nlohmann-json are
# header-only and architecture-neutral, spdlog is not installed for aarch64,
# so a stand-in prints log lines. This checks correctness, not speed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-quant}
case "$mode" in quant|engine) ;; *) sed -n '5,13p' "$0" >&2; exit 2 ;; esac
out=${2:-/tmp/minfer-neon-$mode}
jobs=${JOBS:-$(nproc)}
mkdir -p "$out/obj" "$out/inc"
cp -r /usr/include/fmt /usr/include/nlohmann "$out/inc/"
gt=/usr/src/googletest/googletest
cat > "$out/log_stub.cpp" <<'CPP'
#include <cstdio>
#include "platform/log.h"
namespace minfer::log {
void write(Level, std::string_view m, const Fields&) { std::fprintf(stderr, "%.*s\n", (int)m.size(), m.data()); }
bool enabled(Level) { return true; }
}  // namespace minfer::log
CPP

# One object: SOURCE (a path under the repository, or absolute). The flags the
# CMake files give some sources: the reference's ggml arithmetic without
# fused multiply-adds, the NEON kernels' dot product. -Wno-restrict: GCC 12's
# false positive in std::string's assignment (GCC bug 105329).
compile_one() {
  local src=$1 path extra=()
  case "$src" in /*) path=$src ;; *) path=$root/$src ;; esac
  case "$src" in
    *quant/dequantize_ref.cpp | *quant/quantize_ref.cpp | *quant/quantize_kquants.cpp | *quant/vec_dot_ref.cpp | \
    *synth/normal_rng.cpp) extra=(-ffp-contract=off) ;;
    *quant/kernels_neon.cpp) extra=(-march=armv8.2-a+dotprod) ;;
  esac
  aarch64-linux-gnu-g++ -std=c++20 -O2 -Wall -Wextra -Wno-missing-field-initializers -Wno-restrict -Werror \
    -I"$root" -isystem "$out/inc" -isystem "$gt/include" -DFMT_HEADER_ONLY -DMINFER_QUANT_NEON=1 \
    -DMINFER_TEST_DATA_DIR="\"$root/tests/data\"" "${extra[@]}" -c "$path" -o "$out/obj/$(echo "$src" | tr '/' '_').o"
}
export -f compile_one
export root out gt
compile_all() { printf '%s\n' "$@" | xargs -P "$jobs" -I{} bash -c 'compile_one "$1"' _ {}; }

# Links the objects of `objs` and the tests' sources into one static binary.
link() {
  local name=$1
  shift
  # (Static linking warns that gtest's getaddrinfo needs glibc's shared
  # libraries at run time; the tests never call it.)
  aarch64-linux-gnu-g++ -static -o "$out/$name" "$@" "$out/obj/gtest-all.o" "$out/obj/gtest_main.o" -lpthread \
    2>"$out/link.log" || { cat "$out/link.log" >&2; exit 1; }
  grep -v -e "getaddrinfo" -e "SocketWriter::MakeConnection" "$out/link.log" >&2 || true
}

aarch64-linux-gnu-g++ -std=c++20 -O2 -I$gt/include -I$gt -c $gt/src/gtest-all.cc -o "$out/obj/gtest-all.o"
aarch64-linux-gnu-g++ -std=c++20 -O2 -I$gt/include -I$gt -c $gt/src/gtest_main.cc -o "$out/obj/gtest_main.o"
obj() { echo "$out/obj/$(echo "$1" | tr '/' '_').o"; }

if [ "$mode" = quant ]; then
  srcs=(engine/common/expected.cpp "$out/log_stub.cpp")
  for f in dtype isa quant scratch kernels_scalar dequantize_ref quantize_ref quantize_kquants vec_dot_ref kernels_neon; do
    srcs+=("engine/quant/$f.cpp")
  done
  compile_all "${srcs[@]}" tests/quant/blocks_test.cpp tests/quant/quantize_test.cpp tests/quant/kernels_test.cpp
  lib=()
  for s in "${srcs[@]}"; do lib+=("$(obj "$s")"); done
  # IsaEnv.* re-executes the test binary (a death test, for a fresh process
  # that reads MINFER_CPU_ISA): without binfmt_misc the kernel cannot exec an
  # aarch64 binary, so it is left out here (it runs natively in the README's tests).
  for t in blocks_test quantize_test kernels_test; do
    link "$t" "${lib[@]}" "$(obj tests/quant/$t.cpp)"
    qemu-aarch64 -cpu max "$out/$t" --gtest_brief=1 --gtest_filter='-IsaEnv.*'
  done
  qemu-aarch64 -cpu cortex-a53 "$out/kernels_test" --gtest_brief=1 --gtest_filter='Isa.*'
  echo "run_neon_qemu.sh: the quant tests passed on aarch64 (qemu-user, cpu max and cortex-a53)"
  exit 0
fi

mapfile -t srcs < <(cd "$root" && find engine -name '*.cpp' ! -path 'engine/backend/cuda/*' ! -name 'kernels_avx*' | sort)
srcs+=("$out/log_stub.cpp")
tests=(tests/engine/test_models.cpp tests/engine/stories_e2e_test.cpp tests/engine/forward_reference_test.cpp
       tests/engine/cpu_kernels_test.cpp tests/engine/thread_pool_test.cpp)
t0=$(date +%s)
compile_all "${srcs[@]}" "${tests[@]}"
objs=()
for s in "${srcs[@]}" "${tests[@]}"; do objs+=("$(obj "$s")"); done
link engine_tests "${objs[@]}"
echo "run_neon_qemu.sh: engine and tests built for aarch64 in $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
qemu-aarch64 -cpu max "$out/engine_tests" --gtest_brief=1 2>"$out/engine_tests.log"
echo "run_neon_qemu.sh: the engine tests passed on aarch64 (qemu-user, cpu max: NEON) in $(( $(date +%s) - t0 )) s"
