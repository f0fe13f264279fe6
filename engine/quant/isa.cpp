// Which instruction set the kernels use: detected once from the CPU (cpuid
// through __builtin_cpu_supports on x86-64, HWCAP on aarch64), optionally
// capped by MINFER_CPU_ISA, and switchable by tests through set_active_isa.
//
// Requirements per ISA (what the kernels in kernels_<isa>.cpp are compiled for):
//   avx2    AVX2 + FMA + F16C (Haswell, Zen 1 and later)
//   avx512  AVX-512 F/BW/VL + VNNI (Ice Lake, Zen 4 and later)
//   neon    AdvSIMD + dot product (ARMv8.2 dotprod: Cortex-A76/A78, Orin)
#include <atomic>
#include <cstdlib>
#include <string>

#include "engine/quant/kernels.h"
#include "platform/log.h"

#if defined(MINFER_QUANT_X86)
#include <cpuid.h>
#endif
#if defined(MINFER_QUANT_NEON)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)  // linux/arch/arm64/include/uapi/asm/hwcap.h
#endif
#endif

namespace minfer::quant {
namespace {

Isa detect() {
#if defined(MINFER_QUANT_X86)
  __builtin_cpu_init();
  // F16C straight from cpuid leaf 1 (ECX bit 29): clang 14's
  // __builtin_cpu_supports does not know "f16c" (the fuzz and sanitizer
  // builds use clang).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  // libgcc sets the avx512 bits only when the OS saves the zmm state (XCR0).
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  return avx512 ? Isa::kAvx512 : avx2 ? Isa::kAvx2 : Isa::kScalar;
#elif defined(MINFER_QUANT_NEON)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) ? Isa::kNeon : Isa::kScalar;
#else
  return Isa::kScalar;
#endif
}

bool supported(Isa isa) {
  const Isa best = detected_isa();
  if (isa == Isa::kScalar) return true;
  if (isa == Isa::kNeon || best == Isa::kNeon) return isa == best;
  return static_cast<int>(isa) <= static_cast<int>(best);
}

Isa initial() {
  const Isa best = detected_isa();
  const char* env = std::getenv("MINFER_CPU_ISA");
  if (env == nullptr || *env == '\0') return best;
  const std::string want(env);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (want != isa_name(isa)) continue;
    if (supported(isa)) return isa;
    log::warn("MINFER_CPU_ISA={} but this CPU/build supports at most {}; using {}", want, isa_name(best),
              isa_name(best));
    return best;
  }
  log::warn("MINFER_CPU_ISA={} is not one of scalar|avx2|avx512|neon; using {}", want, isa_name(best));
  return best;
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{initial()};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "unknown";
}

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

Status set_active_isa(Isa isa) {
  if (!supported(isa)) {
    return unexpected(ErrorCode::kUnsupported,
                      "ISA " + std::string(isa_name(isa)) + " is not available: this CPU/build supports at most " +
                          std::string(isa_name(detected_isa())));
  }
  active().store(isa, std::memory_order_relaxed);
  return ok_status();
}

}  // namespace minfer::quant
