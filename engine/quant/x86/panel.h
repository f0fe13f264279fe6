// x86: the n_cols > 1 path (prefill). A panel of V::kLanes weight rows is
// unpacked once into a row-interleaved layout, then every activation column
// streams past it:
//
//   codes   [scale block][group g of 4 elements][row]  4 bytes each
//   d       [scale block][row]  float
//   m       [scale block][row]  float (formats with a min)
//
// One vector of codes holds the same 4 elements of kLanes rows, so one
// multiply-add (VNNI vpdpbusd, or maddubs + madd on AVX2) against the 4
// activation bytes broadcast to every lane advances kLanes dot products at
// once, and the float scale work (convert, scale, fma) is paid once per
// kLanes rows per scale block instead of once per row. kCols columns are kept
// in registers so each panel load feeds kCols multiply-adds.
//
// Repacking costs about as much as 6 columns of dot products per panel
// (bench/quant_bench, n_cols 64 vs 512), so it pays from n_cols = 2 on.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "engine/quant/kernels.h"
#include "engine/quant/x86/summary.h"
#include "engine/quant/x86/unpack.h"

namespace minfer::quant::x86 {
namespace {

inline void transpose8x8_epi32(__m256i t[8]) {
  const __m256i a0 = _mm256_unpacklo_epi32(t[0], t[1]), a1 = _mm256_unpackhi_epi32(t[0], t[1]);
  const __m256i a2 = _mm256_unpacklo_epi32(t[2], t[3]), a3 = _mm256_unpackhi_epi32(t[2], t[3]);
  const __m256i a4 = _mm256_unpacklo_epi32(t[4], t[5]), a5 = _mm256_unpackhi_epi32(t[4], t[5]);
  const __m256i a6 = _mm256_unpacklo_epi32(t[6], t[7]), a7 = _mm256_unpackhi_epi32(t[6], t[7]);
  const __m256i b0 = _mm256_unpacklo_epi64(a0, a2), b1 = _mm256_unpackhi_epi64(a0, a2);
  const __m256i b2 = _mm256_unpacklo_epi64(a1, a3), b3 = _mm256_unpackhi_epi64(a1, a3);
  const __m256i b4 = _mm256_unpacklo_epi64(a4, a6), b5 = _mm256_unpackhi_epi64(a4, a6);
  const __m256i b6 = _mm256_unpacklo_epi64(a5, a7), b7 = _mm256_unpackhi_epi64(a5, a7);
  t[0] = _mm256_permute2x128_si256(b0, b4, 0x20);
  t[1] = _mm256_permute2x128_si256(b1, b5, 0x20);
  t[2] = _mm256_permute2x128_si256(b2, b6, 0x20);
  t[3] = _mm256_permute2x128_si256(b3, b7, 0x20);
  t[4] = _mm256_permute2x128_si256(b0, b4, 0x31);
  t[5] = _mm256_permute2x128_si256(b1, b5, 0x31);
  t[6] = _mm256_permute2x128_si256(b2, b6, 0x31);
  t[7] = _mm256_permute2x128_si256(b3, b7, 0x31);
}

template <class V, class F>
struct Panel {
  static constexpr int kRows = V::kLanes;
  static constexpr int kScaleElems = ActGeometry<F>::kScaleElems;
  static constexpr int kGroups = kScaleElems / 4;
  static constexpr int kSbPer32 = 32 / kScaleElems;
  int64_t n_sb;  // scale blocks per row
  uint8_t* codes;
  float* d;
  float* m;

  static size_t bytes(int64_t k) {
    const int64_t n_sb = k / kScaleElems;
    return static_cast<size_t>(n_sb) * kRows * (kScaleElems + 4 * (F::kHasMin ? 2 : 1));
  }
  Panel(void* mem, int64_t k) : n_sb(k / kScaleElems) {
    codes = static_cast<uint8_t*>(mem);
    d = reinterpret_cast<float*>(codes + n_sb * kRows * kScaleElems);
    m = d + n_sb * kRows;
  }

  // Unpacks rows [0, n_rows) (n_rows <= kRows) of w; missing rows become zero
  // codes with zero scales (their outputs are computed and never stored).
  void repack(const uint8_t* w, size_t w_stride, int64_t n_rows) {
    for (int64_t j = 0; j < n_sb / kSbPer32; ++j) {
      for (int h = 0; h < kRows / 8; ++h) {
        __m256i t[8];
        alignas(32) float dl[8], dh[8], mn[8];
        for (int i = 0; i < 8; ++i) {
          const int r = 8 * h + i;
          if (r < n_rows) {
            const Unpacked b = F::unpack(w + r * w_stride, j);
            t[i] = b.u;
            dl[i] = b.d;
            dh[i] = b.d_hi;
            mn[i] = b.m;
          } else {
            t[i] = _mm256_setzero_si256();
            dl[i] = dh[i] = mn[i] = 0.f;
          }
        }
        transpose8x8_epi32(t);
        // Group g of 32-element block j is group g % kGroups of scale block
        // kSbPer32 * j + g / kGroups: (j * 8 + g) * kRows dwords in.
        for (int g = 0; g < 8; ++g) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 4 * ((j * 8 + g) * kRows + 8 * h)), t[g]);
        }
        _mm256_storeu_ps(d + (kSbPer32 * j) * kRows + 8 * h, _mm256_load_ps(dl));
        if constexpr (F::kTwoScales) _mm256_storeu_ps(d + (2 * j + 1) * kRows + 8 * h, _mm256_load_ps(dh));
        if constexpr (F::kHasMin) _mm256_storeu_ps(m + j * kRows + 8 * h, _mm256_load_ps(mn));
      }
    }
  }

  // y[c * ldy + r] for r < n_rows, c < kCols: the panel against kCols columns.
  template <int kCols>
  void tile(const uint8_t* const* xs, const Summary* const* sums, float* y, int64_t ldy, int n_rows) const {
    using G = ActGeometry<F>;
    typename V::F acc[kCols];
    for (int c = 0; c < kCols; ++c) acc[c] = V::zerof();
    for (int64_t b = 0; b < n_sb; ++b) {
      const uint8_t* wc = codes + 4 * b * kGroups * kRows;
      const int64_t xoff = G::offset(b);
      typename V::I iacc[kCols];
      for (int c = 0; c < kCols; ++c) {
        iacc[c] = F::kOffset != 0 ? V::set1(sums[c][b].corr) : V::zeroi();
      }
      for (int g = 0; g < kGroups; ++g) {
        const typename V::I wg = V::load(wc + 4 * g * kRows);
        for (int c = 0; c < kCols; ++c) {
          const typename V::I xg = V::bcast32(xs[c] + xoff + 4 * g);
          if constexpr (is_signed_format<F>()) {
            iacc[c] = V::dot_signed(iacc[c], wg, xg);
          } else {
            iacc[c] = V::dot(iacc[c], wg, xg);
          }
        }
      }
      const typename V::F dv = V::loadf(d + b * kRows);
      for (int c = 0; c < kCols; ++c) {
        acc[c] = V::fma(V::cvt(iacc[c]), V::mul(dv, V::set1f(sums[c][b].dx)), acc[c]);
      }
      if constexpr (F::kHasMin) {
        const typename V::F mv = V::loadf(m + b * kRows);
        for (int c = 0; c < kCols; ++c) acc[c] = V::fma(mv, V::set1f(sums[c][b].sx), acc[c]);
      }
    }
    for (int c = 0; c < kCols; ++c) V::store_rows(y + c * ldy, acc[c], n_rows);
  }
};

// A tile of exactly n (<= N) columns: the widest instantiation that fits.
template <class V, class F, int N>
void tile_n(const Panel<V, F>& p, int64_t n, const uint8_t* const* xs, const Summary* const* ss, float* y,
            int64_t ldy, int n_rows) {
  if constexpr (N > 1) {
    if (n < N) return tile_n<V, F, N - 1>(p, n, xs, ss, y, ldy, n_rows);
  }
  p.template tile<N>(xs, ss, y, ldy, n_rows);
}

// All columns against one repacked panel, kCols at a time.
template <class V, class F, int kCols>
void panel_columns(const Panel<V, F>& p, const uint8_t* x, size_t x_stride, const Summary* sums, int64_t n_cols,
                   float* y, int64_t ldy, int n_rows) {
  const uint8_t* xs[kCols];
  const Summary* ss[kCols];
  for (int64_t c = 0; c < n_cols; c += kCols) {
    const int64_t n = n_cols - c < kCols ? n_cols - c : kCols;
    for (int64_t i = 0; i < n; ++i) {
      xs[i] = x + (c + i) * x_stride;
      ss[i] = sums + (c + i) * p.n_sb;
    }
    tile_n<V, F, kCols>(p, n, xs, ss, y + c * ldy, ldy, n_rows);
  }
}

}  // namespace
}  // namespace minfer::quant::x86
