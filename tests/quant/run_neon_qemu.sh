#!/bin/bash
# Cross-builds the engine/quant tests for aarch64 and runs them under
# qemu-user: how the NEON kernels are tested on an x86-64 machine.
#   apt-get install g++-aarch64-linux-gnu qemu-user googletest
#   tests/quant/run_neon_qemu.sh [out_dir]
# qemu's "max" CPU has the ARMv8.2 dot product (like Orin's Cortex-A78AE);
# "cortex-a53" lacks it, so there detected_isa() must fall back to scalar.
# Only engine/quant is built (spdlog/fmt are not installed for aarch64; a
# stand-in prints log lines), so this checks correctness, not speed.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/minfer-neon}
mkdir -p "$out/obj" "$out/inc"
cp -r /usr/include/fmt "$out/inc/"  # header-only use; fmt's headers are architecture-neutral
cxx=(aarch64-linux-gnu-g++ -std=c++20 -O2 -Wall -Wextra -Wno-missing-field-initializers -Werror
     -I"$root" -isystem "$out/inc" -DFMT_HEADER_ONLY -DMINFER_QUANT_NEON=1)
gt=/usr/src/googletest/googletest
cat > "$out/log_stub.cpp" <<'CPP'
#include <cstdio>
#include "platform/log.h"
namespace minfer::log {
void write(Level, std::string_view m, const Fields&) { std::fprintf(stderr, "%.*s\n", (int)m.size(), m.data()); }
bool enabled(Level) { return true; }
}  // namespace minfer::log
CPP
objs=()
compile() { local o="$out/obj/$(basename "$1").o"; "${cxx[@]}" "${@:2}" -c "$1" -o "$o"; objs+=("$o"); }
for f in dtype isa quant scratch kernels_scalar; do compile "$root/engine/quant/$f.cpp"; done
for f in dequantize_ref quantize_ref quantize_kquants vec_dot_ref; do compile "$root/engine/quant/$f.cpp" -ffp-contract=off; done
compile "$root/engine/quant/kernels_neon.cpp" -march=armv8.2-a+dotprod
compile "$root/engine/common/expected.cpp"
compile "$out/log_stub.cpp"
aarch64-linux-gnu-g++ -std=c++20 -O2 -I$gt/include -I$gt -c $gt/src/gtest-all.cc -o "$out/obj/gtest-all.o"
aarch64-linux-gnu-g++ -std=c++20 -O2 -I$gt/include -I$gt -c $gt/src/gtest_main.cc -o "$out/obj/gtest_main.o"
for t in blocks_test quantize_test kernels_test; do
  "${cxx[@]}" -I$gt/include "$root/tests/quant/$t.cpp" "${objs[@]}" "$out/obj/gtest-all.o" "$out/obj/gtest_main.o" \
    -o "$out/$t" -static -lpthread 2>/dev/null
  qemu-aarch64 -cpu max "$out/$t"
done
qemu-aarch64 -cpu cortex-a53 "$out/kernels_test" --gtest_filter='Isa.*'
