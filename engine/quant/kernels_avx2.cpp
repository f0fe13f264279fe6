// The `avx2` ISA (AVX2 + FMA + F16C): 256-bit panels of 8 rows, integer
// multiply-adds as maddubs (u8 x s8 -> s16 pairs) + madd (-> s32), since
// plain AVX2 has no VNNI. Q8_0 weights stay signed and use the sign trick
// (|w| * sign(x, w)) so the 16-bit pair sums cannot saturate.
// Compiled with -mavx2 -mfma -mf16c only (engine/quant/CMakeLists.txt).
#include <immintrin.h>

#include <cstring>

#include "engine/quant/kernels.h"
#include "engine/quant/x86/table.h"

namespace minfer::quant {
namespace {

struct Avx2Vec {
  static constexpr int kLanes = 8;       // int32 / float lanes: rows per panel
  static constexpr int kCols = 4;        // columns per panel tile: 8 accumulators of 16 ymm
  static constexpr int kFloatRows = 4;   // float gemm tile: 4 x 2 accumulators
  static constexpr int kFloatCols = 2;
  static constexpr bool kUnsignedQ8_0 = false;
  using I = __m256i;
  using F = __m256;

  static I zeroi() { return _mm256_setzero_si256(); }
  static I set1(int32_t v) { return _mm256_set1_epi32(v); }
  static I load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static I bcast32(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static I dot(I acc, I u, I s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
  }
  static I dot_signed(I acc, I w, I x) { return dot(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)); }
  static __m256i dot256(__m256i acc, __m256i u, __m256i s) { return dot(acc, u, s); }
  static __m256i dot256_signed(__m256i acc, __m256i w, __m256i x) { return dot_signed(acc, w, x); }

  static F zerof() { return _mm256_setzero_ps(); }
  static F set1f(float v) { return _mm256_set1_ps(v); }
  static F loadf(const float* p) { return _mm256_loadu_ps(p); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
  static float hsum(F v) { return x86::hsum_ps(v); }
  static void store_rows(float* y, F v, int n) {
    if (n == kLanes) {
      _mm256_storeu_ps(y, v);
      return;
    }
    alignas(32) float t[kLanes];
    _mm256_store_ps(t, v);
    std::memcpy(y, t, sizeof(float) * n);
  }
  template <class W>
  static F load_weights(const uint8_t* p) {
    if constexpr (W::kBytes == 4) {
      return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else if constexpr (std::is_same_v<W, x86::WeightF16>) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    } else {
      const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
  }
};

}  // namespace

const KernelTable& kernels_avx2() {
  static const KernelTable kTable = x86::make_table<Avx2Vec>();
  return kTable;
}

}  // namespace minfer::quant
