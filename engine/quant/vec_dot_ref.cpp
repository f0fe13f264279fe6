// Scalar dot products of a weight row with an activation row, one per
// (weight, activation) pair; ggml's generic kernels (ggml-cpu/quants.c) in
// meaning: integer products summed per block, then scaled in float.
//
//   Q4_0 . Q8_0   sum_b d_w d_x sum_i (q_i - 8) x_i
//   Q4_1 . Q8_1   sum_b d_w d_x sum_i q_i x_i + m_w s_x      (s_x = d_x sum x_i, f16)
//   Q4_K . Q8_K   sum_b d_x (d sum_j sc_j sum_i q_i x_i - dmin sum_j m_j bsum_j)
//   Q6_K . Q8_K   sum_b d_x d sum_g sc_g sum_i (q_i - 32) x_i
#include <cstring>

#include "engine/common/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace minfer::quant::ref {
namespace {

// Weight codes of one 32-element block, made signed (q - offset), and the
// block's scale/min, for the legacy formats.
struct Codes32 {
  int q[kQK];
  float d, m;
};

Codes32 codes(const BlockQ4_0& b) {
  Codes32 c{{}, f16_to_f32(b.d), 0.f};
  for (int j = 0; j < kQK / 2; ++j) {
    c.q[j] = (b.qs[j] & 0xF) - 8;
    c.q[j + kQK / 2] = (b.qs[j] >> 4) - 8;
  }
  return c;
}
Codes32 codes(const BlockQ4_1& b) {
  Codes32 c{{}, f16_to_f32(b.d), f16_to_f32(b.m)};
  for (int j = 0; j < kQK / 2; ++j) {
    c.q[j] = b.qs[j] & 0xF;
    c.q[j + kQK / 2] = b.qs[j] >> 4;
  }
  return c;
}
template <class Block>
Codes32 codes_q5(const Block& b, int offset, float m) {
  Codes32 c{{}, f16_to_f32(b.d), m};
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    c.q[j] = ((b.qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4)) - offset;
    c.q[j + kQK / 2] = ((b.qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4)) - offset;
  }
  return c;
}
Codes32 codes(const BlockQ5_0& b) { return codes_q5(b, 16, 0.f); }
Codes32 codes(const BlockQ5_1& b) { return codes_q5(b, 0, f16_to_f32(b.m)); }
Codes32 codes(const BlockQ8_0& b) {
  Codes32 c{{}, f16_to_f32(b.d), 0.f};
  for (int j = 0; j < kQK; ++j) c.q[j] = b.qs[j];
  return c;
}

// Legacy weight block against Q8_0 (no min) or Q8_1 (min times s).
template <class WBlock, class XBlock>
float dot_legacy(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const WBlock*>(w);
  const auto* xb = static_cast<const XBlock*>(x);
  float sum = 0.f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const Codes32 c = codes(wb[i]);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += c.q[j] * xb[i].qs[j];
    sum += static_cast<float>(sumi) * (c.d * f16_to_f32(xb[i].d));
    if constexpr (sizeof(XBlock) == sizeof(BlockQ8_1)) sum += c.m * f16_to_f32(xb[i].s);
  }
  return sum;
}

template <bool kFiveBit, class Block>
float dot_qk_4_5(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const Block*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, wb[i].scales, &sc, &m);
      const int p = j / 2, h = j % 2;
      int s = 0;
      for (int l = 0; l < 32; ++l) {
        const uint8_t byte = wb[i].qs[32 * p + l];
        int q = h ? (byte >> 4) : (byte & 0xF);
        if constexpr (kFiveBit) q += ((wb[i].qh[l] >> j) & 1) << 4;
        s += q * xb[i].qs[32 * j + l];
      }
      sumi += sc * s;
      summ += m * (xb[i].bsums[2 * j] + xb[i].bsums[2 * j + 1]);
    }
    sum += xb[i].d * (f16_to_f32(wb[i].d) * static_cast<float>(sumi) -
                      f16_to_f32(wb[i].dmin) * static_cast<float>(summ));
  }
  return sum;
}

float dot_q6_k(const void* w, const void* x, int64_t n) {
  const auto* wb = static_cast<const BlockQ6_K*>(w);
  const auto* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    for (int g = 0; g < kQK_K / 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += (q6_k_value(wb[i], 16 * g + l) - 32) * xb[i].qs[16 * g + l];
      sumi += wb[i].scales[g] * s;
    }
    sum += xb[i].d * f16_to_f32(wb[i].d) * static_cast<float>(sumi);
  }
  return sum;
}

template <class Convert>
float dot_float(const void* w, const void* x, int64_t n, int elem_bytes, Convert convert) {
  const auto* wp = static_cast<const uint8_t*>(w);
  const auto* xp = static_cast<const float*>(x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(convert(wp + i * elem_bytes)) * xp[i];
  return static_cast<float>(sum);
}

template <class T, float (*kConvert)(T)>
float at(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return kConvert(v);
}
float identity(float f) { return f; }

}  // namespace

float vec_dot(DType wt, const void* w, const void* x, int64_t n) {
  switch (wt) {
    case DType::kF32: return dot_float(w, x, n, 4, at<float, identity>);
    case DType::kF16: return dot_float(w, x, n, 2, at<uint16_t, f16_to_f32>);
    case DType::kBF16: return dot_float(w, x, n, 2, at<uint16_t, bf16_to_f32>);
    case DType::kQ4_0: return dot_legacy<BlockQ4_0, BlockQ8_0>(w, x, n);
    case DType::kQ4_1: return dot_legacy<BlockQ4_1, BlockQ8_1>(w, x, n);
    case DType::kQ5_0: return dot_legacy<BlockQ5_0, BlockQ8_0>(w, x, n);
    case DType::kQ5_1: return dot_legacy<BlockQ5_1, BlockQ8_1>(w, x, n);
    case DType::kQ8_0: return dot_legacy<BlockQ8_0, BlockQ8_0>(w, x, n);
    case DType::kQ4_K: return dot_qk_4_5<false, BlockQ4_K>(w, x, n);
    case DType::kQ5_K: return dot_qk_4_5<true, BlockQ5_K>(w, x, n);
    case DType::kQ6_K: return dot_q6_k(w, x, n);
    default: return 0.f;  // quant.cpp rejects other types before calling here
  }
}

}  // namespace minfer::quant::ref
