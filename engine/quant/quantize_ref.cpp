// Scalar quantization of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q8_1) with ggml's reference scale choices (quantize_row_*_ref in
// ggml-quants.c), and the per-type dispatch of ref::quantize_row. The K
// formats live in quantize_kquants.cpp.
//
// Scale rules, and why re-quantizing a dequantized block gives it back:
//   Q4_0/Q5_0  d = (signed value of largest magnitude) / -8 (or -16); that
//              element lands exactly on code 0, so dequantize -> quantize
//              finds the same element, the same f16 d and the same codes.
//   Q4_1/Q5_1  d = (max - min) / 15 (or 31), m = min: the extremes land on
//              codes 0 and 15 (31).
//   Q8_0/Q8_1  d = amax / 127, codes round half away from zero (roundf).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "engine/common/half.h"
#include "engine/quant/blocks.h"
#include "engine/quant/reference.h"

namespace minfer::quant::ref {
namespace {

// Q4_1/Q5_1: m = min, d = (max - min) / levels, id = 1 / d (0 for d = 0).
struct Affine {
  float m, d, id;
};
Affine affine_scale(const float* x, int levels) {
  float mn = FLT_MAX, mx = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < mn) mn = x[j];
    if (x[j] > mx) mx = x[j];
  }
  const float d = (mx - mn) / levels;
  return {mn, d, d != 0.0f ? 1.0f / d : 0.0f};
}

void quant_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quant_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const Affine a = affine_scale(x, 15);
    y[i].d = f32_to_f16(a.d);
    y[i].m = f32_to_f16(a.m);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - a.m) * a.id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + kQK / 2] - a.m) * a.id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

// Packs 32 five-bit codes: low nibbles as Q4, bit 4 of code j into qh bit j.
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

void quant_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = f32_to_f16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

void quant_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const Affine a = affine_scale(x, 31);
    y[i].d = f32_to_f16(a.d);
    y[i].m = f32_to_f16(a.m);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = static_cast<int>((x[j] - a.m) * a.id + 0.5f);
    pack_q5(q, y[i].qs, y[i].qh);
  }
}

// Shared by Q8_0 and Q8_1: returns d, writes the codes, returns their sum.
float quant_8bit(const float* x, int8_t* qs, int* sum) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *sum = 0;
  for (int j = 0; j < kQK; ++j) {
    qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    *sum += qs[j];
  }
  return d;
}

void quant_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int sum;
    y[i].d = f32_to_f16(quant_8bit(x, y[i].qs, &sum));
  }
}

void quant_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    int sum;
    const float d = quant_8bit(x, y[i].qs, &sum);
    y[i].d = f32_to_f16(d);
    y[i].s = f32_to_f16(static_cast<float>(sum) * d);
  }
}

template <class Fn>
void each_u16(const float* src, void* dst, int64_t n, Fn convert) {
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = convert(src[i]);
    std::memcpy(d + 2 * i, &h, 2);
  }
}

}  // namespace

float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  return max;
}

int nearest_int(float f) {
  const float val = f + 12582912.f;
  int i;
  std::memcpy(&i, &val, sizeof i);
  return (i & 0x007fffff) - 0x00400000;
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / kQK;
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::kF16: each_u16(src, dst, n, f32_to_f16); return;
    case DType::kBF16: each_u16(src, dst, n, f32_to_bf16); return;
    case DType::kQ4_0: quant_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); return;
    case DType::kQ4_1: quant_q4_1(src, static_cast<BlockQ4_1*>(dst), nb); return;
    case DType::kQ5_0: quant_q5_0(src, static_cast<BlockQ5_0*>(dst), nb); return;
    case DType::kQ5_1: quant_q5_1(src, static_cast<BlockQ5_1*>(dst), nb); return;
    case DType::kQ8_0: quant_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); return;
    case DType::kQ8_1: quant_q8_1(src, static_cast<BlockQ8_1*>(dst), nb); return;
    case DType::kQ4_K: quantize_row_q4_k(src, dst, n); return;
    case DType::kQ5_K: quantize_row_q5_k(src, dst, n); return;
    case DType::kQ6_K: quantize_row_q6_k(src, dst, n); return;
    case DType::kQ8_K: quantize_row_q8_k(src, dst, n); return;
    default: return;  // quant.cpp rejects other types before calling here
  }
}

}  // namespace minfer::quant::ref
