// NEON (aarch64 + dotprod): one 32-element block of any weight format
// unpacked to 32 signed codes in element order, with its scales:
//
//   w_i = d * q_i + m     (Q6_K: d for elements 0..15, d_hi for 16..31)
//
// sdot multiplies signed by signed bytes, so unlike x86 no offset is needed:
// every code fits int8 (Q8_0 -128..127, Q6_K -32..31, Q5 0..31 or -16..15).
// Included only by kernels_neon.cpp; the anonymous namespace keeps it there.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "engine/quant/blocks.h"
#include "engine/quant/dtype.h"

namespace minfer::quant::neon {
namespace {

enum class Act { kQ8_0, kQ8_1, kQ8_K };

struct Unpacked {
  int8x16_t lo, hi;  // elements 0..15 and 16..31
  float d, d_hi, m;
};

// f16 -> f32 with the FCVT instruction (exact; no half.h in ISA files, see blocks.h).
inline float load_f16(uint16_t h) { return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0); }

inline void nibbles(const uint8_t* qs, int8x16_t* lo, int8x16_t* hi) {
  const uint8x16_t b = vld1q_u8(qs);
  *lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0F)));
  *hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
}

// 0x10 in byte i where bit i of the 32-bit little-endian word is set.
inline void bit4_from_bits32(const uint8_t* qh, uint8x16_t* lo, uint8x16_t* hi) {
  static const uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t mask = vld1q_u8(kBit);
  const uint8x16_t b01 = vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1]));
  const uint8x16_t b23 = vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3]));
  *lo = vandq_u8(vtstq_u8(b01, mask), vdupq_n_u8(0x10));
  *hi = vandq_u8(vtstq_u8(b23, mask), vdupq_n_u8(0x10));
}

template <DType kType>
struct Format;

template <>
struct Format<DType::kQ4_0> {
  static constexpr bool kHasMin = false, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[j];
    Unpacked u;
    nibbles(b.qs, &u.lo, &u.hi);
    u.lo = vsubq_s8(u.lo, vdupq_n_s8(8));
    u.hi = vsubq_s8(u.hi, vdupq_n_s8(8));
    u.d = u.d_hi = load_f16(b.d);
    u.m = 0.f;
    return u;
  }
};

template <>
struct Format<DType::kQ4_1> {
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_1;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[j];
    Unpacked u;
    nibbles(b.qs, &u.lo, &u.hi);
    u.d = u.d_hi = load_f16(b.d);
    u.m = load_f16(b.m);
    return u;
  }
};

template <class Block>
Unpacked unpack_q5(const Block& b, int offset) {
  Unpacked u;
  nibbles(b.qs, &u.lo, &u.hi);
  uint8x16_t hlo, hhi;
  bit4_from_bits32(b.qh, &hlo, &hhi);
  u.lo = vsubq_s8(vorrq_s8(u.lo, vreinterpretq_s8_u8(hlo)), vdupq_n_s8(static_cast<int8_t>(offset)));
  u.hi = vsubq_s8(vorrq_s8(u.hi, vreinterpretq_s8_u8(hhi)), vdupq_n_s8(static_cast<int8_t>(offset)));
  u.d = u.d_hi = load_f16(b.d);
  return u;
}

template <>
struct Format<DType::kQ5_0> {
  static constexpr bool kHasMin = false, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    Unpacked u = unpack_q5(reinterpret_cast<const BlockQ5_0*>(row)[j], 16);
    u.m = 0.f;
    return u;
  }
};

template <>
struct Format<DType::kQ5_1> {
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_1;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[j];
    Unpacked u = unpack_q5(b, 0);
    u.m = load_f16(b.m);
    return u;
  }
};

template <>
struct Format<DType::kQ8_0> {
  static constexpr bool kHasMin = false, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[j];
    const float d = load_f16(b.d);
    return {vld1q_s8(b.qs), vld1q_s8(b.qs + 16), d, d, 0.f};
  }
};

// Q4_K / Q5_K sub-block s (0..7) of super-block j / 8.
template <class Block, bool kFiveBit>
Unpacked unpack_qk_4_5(const uint8_t* row, int64_t j) {
  const auto& b = reinterpret_cast<const Block*>(row)[j / 8];
  const int s = static_cast<int>(j % 8);
  const uint8_t* q = b.qs + 32 * (s / 2);
  uint8x16_t lo = vld1q_u8(q), hi = vld1q_u8(q + 16);
  if (s % 2) {
    lo = vshrq_n_u8(lo, 4);
    hi = vshrq_n_u8(hi, 4);
  } else {
    lo = vandq_u8(lo, vdupq_n_u8(0x0F));
    hi = vandq_u8(hi, vdupq_n_u8(0x0F));
  }
  if constexpr (kFiveBit) {
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(4 - s));  // bit s -> bit 4
    const uint8x16_t m = vdupq_n_u8(0x10);
    // vshlq with a negative count shifts right; bit s moved to bit 4.
    const uint8x16_t h0 = vld1q_u8(b.qh), h1 = vld1q_u8(b.qh + 16);
    const uint8x16_t b0 = vandq_u8(vshlq_u8(vandq_u8(h0, vdupq_n_u8(static_cast<uint8_t>(1u << s))), shift), m);
    const uint8x16_t b1 = vandq_u8(vshlq_u8(vandq_u8(h1, vdupq_n_u8(static_cast<uint8_t>(1u << s))), shift), m);
    lo = vorrq_u8(lo, b0);
    hi = vorrq_u8(hi, b1);
  }
  uint8_t sc, mn;
  unpack_scale_min_k4(s, b.scales, &sc, &mn);
  const float d = load_f16(b.d) * sc;
  return {vreinterpretq_s8_u8(lo), vreinterpretq_s8_u8(hi), d, d, -(load_f16(b.dmin) * mn)};
}

template <>
struct Format<DType::kQ4_K> {
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) { return unpack_qk_4_5<BlockQ4_K, false>(row, j); }
};

template <>
struct Format<DType::kQ5_K> {
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) { return unpack_qk_4_5<BlockQ5_K, true>(row, j); }
};

// Q6_K: 32-element block j is elements 128h + 32s + l of super-block j / 8.
template <>
struct Format<DType::kQ6_K> {
  static constexpr bool kHasMin = false, kTwoScales = true;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[j / 8];
    const int sub = static_cast<int>(j % 8), h = sub / 4, s = sub % 4;
    const uint8_t* ql = b.ql + 64 * h + 32 * (s & 1);
    const uint8_t* qh = b.qh + 32 * h;
    uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
    if (s < 2) {
      l0 = vandq_u8(l0, vdupq_n_u8(0x0F));
      l1 = vandq_u8(l1, vdupq_n_u8(0x0F));
    } else {
      l0 = vshrq_n_u8(l0, 4);
      l1 = vshrq_n_u8(l1, 4);
    }
    const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(4 - 2 * s));  // bits 2s..2s+1 -> 4..5
    const uint8x16_t m = vdupq_n_u8(static_cast<uint8_t>(3u << (2 * s)));
    const uint8x16_t h0 = vshlq_u8(vandq_u8(vld1q_u8(qh), m), shift);
    const uint8x16_t h1 = vshlq_u8(vandq_u8(vld1q_u8(qh + 16), m), shift);
    const int8x16_t k32 = vdupq_n_s8(32);
    const float d = load_f16(b.d);
    return {vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l0, h0)), k32), vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l1, h1)), k32),
            d * b.scales[2 * sub], d * b.scales[2 * sub + 1], 0.f};
  }
};

}  // namespace
}  // namespace minfer::quant::neon
