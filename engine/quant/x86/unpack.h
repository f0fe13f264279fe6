// x86 (AVX2 and up): one 32-element block of any weight format unpacked to
// 32 unsigned code bytes u = q + offset in element order, with its scales, so
// that one GEMV and one panel kernel serve every format:
//
//   w_i = d * (u_i - offset) + m     (Q6_K: d for elements 0..15, d_hi for 16..31)
//
// Included only by the ISA kernel files, each inside its own flags; the
// anonymous namespace keeps every copy local to its TU, so the AVX-512 build
// of a helper can never be the one an AVX2 caller links to.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/quant/blocks.h"
#include "engine/quant/dtype.h"

namespace minfer::quant::x86 {
namespace {

enum class Act { kQ8_0, kQ8_1, kQ8_K };

struct Unpacked {
  __m256i u;
  float d, d_hi, m;
};

inline float load_f16(const uint16_t& h) { return _cvtsh_ss(h); }

// The 4-bit codes of 16 bytes: low nibbles are elements 0..15, high 16..31.
inline __m256i nibbles_lo_hi(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
}

// 0x10 in byte i where bit i of the little-endian 32-bit word is set.
inline __m256i bit4_from_bits32(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                          0x0303030303030303);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));  // all bits but bit i%8
  return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1)), _mm256_set1_epi8(0x10));
}

// Per-format traits and unpack. Block j counts 32-element blocks in the row.
template <DType kType>
struct Format;

template <>
struct Format<DType::kQ4_0> {
  static constexpr int kOffset = 8;
  static constexpr bool kHasMin = false, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ4_0*>(row)[j];
    const float d = load_f16(b.d);
    return {nibbles_lo_hi(b.qs), d, d, 0.f};
  }
};

template <>
struct Format<DType::kQ4_1> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_1;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ4_1*>(row)[j];
    const float d = load_f16(b.d);
    return {nibbles_lo_hi(b.qs), d, d, load_f16(b.m)};
  }
};

template <>
struct Format<DType::kQ5_0> {
  static constexpr int kOffset = 16;
  static constexpr bool kHasMin = false, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ5_0*>(row)[j];
    const float d = load_f16(b.d);
    return {_mm256_or_si256(nibbles_lo_hi(b.qs), bit4_from_bits32(b.qh)), d, d, 0.f};
  }
};

template <>
struct Format<DType::kQ5_1> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_1;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ5_1*>(row)[j];
    const float d = load_f16(b.d);
    return {_mm256_or_si256(nibbles_lo_hi(b.qs), bit4_from_bits32(b.qh)), d, d, load_f16(b.m)};
  }
};

// Q8_0 codes are signed: the VNNI kernels shift them by 128 to unsigned; the
// AVX2 kernels keep them signed (kOffset 0) and use the sign trick, because
// maddubs on (q + 128) * x would saturate its 16-bit pair sums.
template <bool kUnsigned>
struct FormatQ8_0 {
  static constexpr int kOffset = kUnsigned ? 128 : 0;
  static constexpr bool kHasMin = false, kTwoScales = false, kSigned = !kUnsigned;
  static constexpr Act kAct = Act::kQ8_0;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[j];
    __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    if constexpr (kUnsigned) q = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
    const float d = load_f16(b.d);
    return {q, d, d, 0.f};
  }
};

// Q4_K / Q5_K sub-block s (0..7) of super-block j / 8.
template <class Block, bool kFiveBit>
Unpacked unpack_qk_4_5(const uint8_t* row, int64_t j) {
  const auto& b = reinterpret_cast<const Block*>(row)[j / 8];
  const int s = static_cast<int>(j % 8);
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * (s / 2)));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i u = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(bytes, 4) : bytes, m4);
  if constexpr (kFiveBit) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
    const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(s)), _mm256_set1_epi8(1));
    u = _mm256_or_si256(u, _mm256_slli_epi16(bit, 4));
  }
  uint8_t sc, mn;
  unpack_scale_min_k4(s, b.scales, &sc, &mn);
  const float d = load_f16(b.d) * sc;
  return {u, d, d, -(load_f16(b.dmin) * mn)};
}

template <>
struct Format<DType::kQ4_K> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) { return unpack_qk_4_5<BlockQ4_K, false>(row, j); }
};

template <>
struct Format<DType::kQ5_K> {
  static constexpr int kOffset = 0;
  static constexpr bool kHasMin = true, kTwoScales = false;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) { return unpack_qk_4_5<BlockQ5_K, true>(row, j); }
};

// Q6_K: 32-element block j is elements 128h + 32s + l of super-block j / 8
// (h = (j % 8) / 4, s = j % 4); its two 16-element halves have their own
// int8 scales.
template <>
struct Format<DType::kQ6_K> {
  static constexpr int kOffset = 32;
  static constexpr bool kHasMin = false, kTwoScales = true;
  static constexpr Act kAct = Act::kQ8_K;
  static Unpacked unpack(const uint8_t* row, int64_t j) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[j / 8];
    const int sub = static_cast<int>(j % 8), h = sub / 4, s = sub % 4;
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32 * (s & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
    const __m256i low = _mm256_and_si256(s < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(0x0F));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * s)), _mm256_set1_epi8(3));
    const float d = load_f16(b.d);
    return {_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), d * b.scales[2 * sub], d * b.scales[2 * sub + 1],
            0.f};
  }
};

}  // namespace
}  // namespace minfer::quant::x86
