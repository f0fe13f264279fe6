// Scalar dequantization of one row, per format, in ggml's arithmetic order
// (dequantize_row_* in ggml-quants.c) so that values are bit-identical to what
// llama.cpp computes from the same file.
#include <cstring>

#include "engine/common/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace minfer::quant::ref {
namespace {

void dequant_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequant_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0xF) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// Bit 4 of elements j and j + 16 of a Q5 block.
inline int q5_high(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

void dequant_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(((b[i].qs[j] & 0xF) | q5_high(qh, j)) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((b[i].qs[j] >> 4) | q5_high(qh, j + 16)) - 16) * d;
    }
  }
}

void dequant_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0xF) | q5_high(qh, j)) * d + m;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) | q5_high(qh, j + 16)) * d + m;
    }
  }
}

void dequant_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void dequant_q8_1(const BlockQ8_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// Q4_K and Q5_K: element 64p + 32h + l has sub-block 2p + h.
template <bool kFiveBit, class Block>
void dequant_qk_4_5(const Block* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int p = 0; p < 4; ++p) {
      for (int h = 0; h < 2; ++h, y += 32) {
        uint8_t sc, m;
        unpack_scale_min_k4(2 * p + h, b[i].scales, &sc, &m);
        const float d1 = d * sc, m1 = dmin * m;
        for (int l = 0; l < 32; ++l) {
          const uint8_t byte = b[i].qs[32 * p + l];
          int q = h ? (byte >> 4) : (byte & 0xF);
          if constexpr (kFiveBit) q += ((b[i].qh[l] >> (2 * p + h)) & 1) << 4;
          y[l] = d1 * static_cast<float>(q) - m1;
        }
      }
    }
  }
}

void dequant_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    const float d = f16_to_f32(b[i].d);
    for (int e = 0; e < kQK_K; ++e) {
      y[e] = d * static_cast<float>(b[i].scales[e / 16]) * static_cast<float>(q6_k_value(b[i], e) - 32);
    }
  }
}

void dequant_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK_K) {
    for (int j = 0; j < kQK_K; ++j) y[j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

template <class Fn>
void each_u16(const void* src, float* dst, int64_t n, Fn convert) {
  const auto* s = static_cast<const uint8_t*>(src);  // may be only 1-byte aligned in a file
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, s + 2 * i, 2);
    dst[i] = convert(h);
  }
}

}  // namespace

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  const int64_t nb32 = n / kQK, nb256 = n / kQK_K;
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::kF16: each_u16(src, dst, n, f16_to_f32); return;
    case DType::kBF16: each_u16(src, dst, n, bf16_to_f32); return;
    case DType::kQ4_0: dequant_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb32); return;
    case DType::kQ4_1: dequant_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb32); return;
    case DType::kQ5_0: dequant_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb32); return;
    case DType::kQ5_1: dequant_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb32); return;
    case DType::kQ8_0: dequant_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb32); return;
    case DType::kQ8_1: dequant_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb32); return;
    case DType::kQ4_K: dequant_qk_4_5<false>(static_cast<const BlockQ4_K*>(src), dst, nb256); return;
    case DType::kQ5_K: dequant_qk_4_5<true>(static_cast<const BlockQ5_K*>(src), dst, nb256); return;
    case DType::kQ6_K: dequant_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb256); return;
    case DType::kQ8_K: dequant_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb256); return;
    default: return;  // quant.cpp rejects other types before calling here
  }
}

}  // namespace minfer::quant::ref
