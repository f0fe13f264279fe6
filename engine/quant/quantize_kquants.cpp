// Scalar quantization of the K formats (Q4_K, Q5_K, Q6_K) and of the Q8_K
// activations, following ggml's reference quantizers (quantize_row_*_ref in
// ggml-quants.c) step for step, float operation for float operation, so that
// the bytes match llama.cpp's and re-quantizing a dequantized block gives the
// block back.
//
//   Q4_K/Q5_K  per 32-element sub-block a scale and a min from
//              make_qkx2_quants (a weighted least-squares search over 21 / 16
//              candidate scales), then both quantized to 6 bits against the
//              largest of the super-block, then the codes recomputed from the
//              6-bit values.
//   Q6_K       per 16-element sub-block a signed scale from make_qx_quants
//              (weighted by x^2, 18 candidates), quantized to int8 against the
//              largest magnitude, then codes recomputed.
//   Q8_K       one scale per 256: -127 / (value of largest magnitude), codes
//              rounded half to even; bsums for the K dot products.
#include <cmath>
#include <cstring>

#include "engine/common/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace minfer::quant::ref {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // ggml's GROUP_MAX_EPS: "all zero" below this

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// ggml's make_qkx2_quants: codes L in [0, nmax] and (scale, -min) with
// x ~ scale * L - the_min, minimising the weighted squared error over
// iscale = (rmin + rdelta * is + nmax) / (max - min), is = 0..nstep.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(clamp_int(l, 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += weights[i] * (diff * diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float diff = this_scale * Laux[i] + this_min - x[i];
        cur_error += weights[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ggml's make_qx_quants with rmse_type 1 and no importance weights (the
// Q6_K reference): signed codes L in [0, 2 nmax) (value + nmax), weights x^2.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): the 6-bit scales and mins,
// d/dmin, and the final codes L[256] recomputed from the stored values.
template <class Block>
void quantize_qk_scales(const float* x, Block* y, int nmax, float rmin, int nstep, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    // ggml stores nearest_int into a uint8_t before MIN(63, .): keep the wrap.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      y->scales[j] = ls;
      y->scales[j + 4] = lm;
    } else {
      y->scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      y->scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      y->scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  y->d = f32_to_f16(max_scale / 63.f);
  y->dmin = f32_to_f16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, y->scales, &sc, &m);
    const float d = f16_to_f32(y->d) * sc;
    if (!d) continue;
    const float dm = f16_to_f32(y->dmin) * m;
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + ii] + dm) / d), 0, nmax));
    }
  }
}

// Stable re-quantization for Q4_K/Q5_K. ggml's search covers 14..16
// (Q4_K) and 30.5..32 (Q5_K) levels per sub-block; a sub-block whose codes
// span fewer levels (which the search itself produces, e.g. codes 0..30) is
// not found again when its dequantized values are re-quantized, and a
// re-fitted largest scale can round d to a neighbouring f16: about 5% of
// Q5_K blocks would change (tests/quant: RequantizationIsStable).
//
// Repair, only for input that is already on a grid: ggml's block either
// reproduces at least half of the 256 inputs exactly, or puts every input
// within 0.1 of an integer code (real data does neither: a lossy quantizer
// hits a float exactly with probability ~0, and 256 fractional parts within
// 0.1 of integers have probability 0.2^256; so on real data the bytes stay
// ggml's). Then d and dmin and their f16 neighbours (+-3 ulp) are tried, and
// for each sub-block the 6-bit (scale, min) pair that reproduces it exactly
// is searched (64 x 64, first mismatch ends a try).
template <class Block>
void set_sub_block(Block* y, int j, int nmax, uint8_t sc, uint8_t m, const int* q) {
  if (j < 4) {
    y->scales[j] = static_cast<uint8_t>((y->scales[j] & 0xC0) | sc);
    y->scales[j + 4] = static_cast<uint8_t>((y->scales[j + 4] & 0xC0) | m);
  } else {
    y->scales[j + 4] = static_cast<uint8_t>((sc & 0xF) | ((m & 0xF) << 4));
    y->scales[j - 4] = static_cast<uint8_t>((y->scales[j - 4] & 0x3F) | ((sc >> 4) << 6));
    y->scales[j] = static_cast<uint8_t>((y->scales[j] & 0x3F) | ((m >> 4) << 6));
  }
  const int p = j / 2, h = j % 2;
  for (int l = 0; l < 32; ++l) {
    uint8_t& byte = y->qs[32 * p + l];
    byte = static_cast<uint8_t>(h ? ((byte & 0x0F) | ((q[l] & 0xF) << 4)) : ((byte & 0xF0) | (q[l] & 0xF)));
    if (nmax == 31) {
      if constexpr (requires { y->qh; }) {
        y->qh[l] = static_cast<uint8_t>((y->qh[l] & ~(1u << j)) | (((q[l] >> 4) & 1u) << j));
      }
    }
  }
}

// The (scale, min) codes and element codes that reproduce x[0..31] exactly
// under super-block scales d, dmin (the dequantizer's d1 * q - m1).
bool fit_sub_block(const float* x, float d, float dmin, int nmax, uint8_t* sc_out, uint8_t* m_out, int* q) {
  for (int m = 0; m < 64; ++m) {
    const float m1 = dmin * static_cast<float>(m);
    for (int sc = 0; sc < 64; ++sc) {
      const float d1 = d * static_cast<float>(sc);
      int l = 0;
      for (; l < 32; ++l) {
        q[l] = d1 != 0.f ? clamp_int(nearest_int((x[l] + m1) / d1), 0, nmax) : 0;
        if (d1 * static_cast<float>(q[l]) - m1 != x[l]) break;
      }
      if (l == 32) {
        *sc_out = static_cast<uint8_t>(sc);
        *m_out = static_cast<uint8_t>(m);
        return true;
      }
    }
  }
  return false;
}

template <class Block>
bool looks_like_grid(const float* x, const Block& y, const float* deq) {
  int exact = 0;
  for (int e = 0; e < kQK_K; ++e) exact += deq[e] == x[e];
  if (exact >= kQK_K / 2) return true;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    unpack_scale_min_k4(j, y.scales, &sc, &m);
    const float d1 = f16_to_f32(y.d) * sc, m1 = f16_to_f32(y.dmin) * m;
    if (d1 == 0.f) continue;
    for (int l = 0; l < 32; ++l) {
      const float t = (x[32 * j + l] + m1) / d1;
      if (std::fabs(t - std::nearbyint(t)) > 0.1f) return false;
    }
  }
  return true;
}

template <class Block>
void repair_exact_grid(const float* x, Block* y, int nmax, DType type) {
  float deq[kQK_K];
  dequantize_row(type, y, deq, kQK_K);
  if (std::memcmp(deq, x, sizeof deq) == 0 || !looks_like_grid(x, *y, deq)) return;
  static constexpr int kUlps[] = {0, -1, 1, -2, 2, -3, 3};
  for (int dd : kUlps) {
    for (int dm : kUlps) {
      Block cand = *y;
      cand.d = static_cast<uint16_t>(y->d + dd);
      cand.dmin = static_cast<uint16_t>(y->dmin + dm);
      const float d = f16_to_f32(cand.d), dmin = f16_to_f32(cand.dmin);
      bool ok = true;
      for (int j = 0; j < 8 && ok; ++j) {
        if (dd == 0 && dm == 0 && std::memcmp(deq + 32 * j, x + 32 * j, 32 * sizeof(float)) == 0) continue;
        uint8_t sc, m;
        int q[32];
        ok = fit_sub_block(x + 32 * j, d, dmin, nmax, &sc, &m, q);
        if (ok) set_sub_block(&cand, j, nmax, sc, m, q);
      }
      if (ok) {
        *y = cand;
        return;
      }
    }
  }
}

}  // namespace

void quantize_row_q4_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ4_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    quantize_qk_scales(x, &y[i], 15, -1.f, 20, L);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + l + 32] << 4));
      }
    }
    repair_exact_grid(x, &y[i], 15, DType::kQ4_K);
  }
}

void quantize_row_q5_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ5_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    uint8_t L[kQK_K];
    std::memset(y[i].scales, 0, sizeof y[i].scales);
    quantize_qk_scales(x, &y[i], 31, -0.5f, 15, L);
    std::memset(y[i].qh, 0, sizeof y[i].qh);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[64 * p + l], l2 = L[64 * p + l + 32];
        y[i].qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * p)) | ((l2 >> 4) << (2 * p + 1)));
        y[i].qs[32 * p + l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
    }
    repair_exact_grid(x, &y[i], 31, DType::kQ5_K);
  }
}

void quantize_row_q6_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    int8_t L[kQK_K];
    float scales[kQK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      const float abs_scale = std::fabs(scales[ib]);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const int s = nearest_int(iscale * scales[ib]);
      y[i].scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = f16_to_f32(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + ii] / d), -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = y[i].ql + 64 * h;
      uint8_t* qh = y[i].qh + 32 * h;
      const int8_t* Lh = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                     ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_k(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    const float max = signed_absmax(x, kQK_K);
    if (!max) {
      // ggml leaves bsums unwritten here; they are all zero, so write zeros.
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = nearest_int(iscale * x[j]);
      y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace minfer::quant::ref
