// The `avx512` ISA (AVX-512 F/BW/VL/DQ + VNNI): 512-bit panels of 16 rows and
// vpdpbusd (u8 x s8 summed 4 at a time into s32, no saturation), so every
// weight format, Q8_0 included, is stored as unsigned codes (q + offset) and
// the offset is undone by the per-block correction. The GEMV path uses the
// 256-bit VNNI form (one 32-element block per instruction).
//
// Zen 5 executes 512-bit VNNI at full width (Zen 4 double-pumps it, which
// still halves the instruction count against 256-bit).
// Compiled with the AVX-512 flags only (engine/quant/CMakeLists.txt).
#include <immintrin.h>

#include <cstring>

#include "engine/quant/kernels.h"
#include "engine/quant/x86/table.h"

namespace minfer::quant {
namespace {

struct Avx512Vec {
  static constexpr int kLanes = 16;      // rows per panel
  static constexpr int kCols = 8;        // columns per panel tile: 16 accumulators of 32 zmm
  static constexpr int kFloatRows = 4;   // float gemm tile: 4 x 4 accumulators
  static constexpr int kFloatCols = 4;
  static constexpr bool kUnsignedQ8_0 = true;
  using I = __m512i;
  using F = __m512;

  static I zeroi() { return _mm512_setzero_si512(); }
  static I set1(int32_t v) { return _mm512_set1_epi32(v); }
  static I load(const void* p) { return _mm512_loadu_si512(p); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
  static __m256i dot256(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }

  static F zerof() { return _mm512_setzero_ps(); }
  static F set1f(float v) { return _mm512_set1_ps(v); }
  static F loadf(const float* p) { return _mm512_loadu_ps(p); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
  static float hsum(F v) { return _mm512_reduce_add_ps(v); }
  static void store_rows(float* y, F v, int n) {
    _mm512_mask_storeu_ps(y, static_cast<__mmask16>((1u << n) - 1), v);
  }
  template <class W>
  static F load_weights(const uint8_t* p) {
    if constexpr (W::kBytes == 4) {
      return _mm512_loadu_ps(p);
    } else if constexpr (std::is_same_v<W, x86::WeightF16>) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    } else {
      const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
      return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
    }
  }
};

}  // namespace

const KernelTable& kernels_avx512() {
  static const KernelTable kTable = x86::make_table<Avx512Vec>();
  return kTable;
}

}  // namespace minfer::quant
