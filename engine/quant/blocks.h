// Block structs of the quantized formats, byte-identical to ggml's
// ggml-common.h (the layout of GGUF files people download), with the element
// order each one uses. Internal to engine/quant: other modules go through
// quant.h and never touch the bytes.
//
// Element order within a block (ggml's, checked by tests/quant/blocks_test):
//   Q4_0/Q4_1   qs[j] low nibble = element j, high nibble = element j + 16.
//   Q5_0/Q5_1   as Q4, plus bit 4 of element j in qh bit j (qh read as a
//               little-endian u32).
//   Q8_0/Q8_1   qs[j] = element j.
//   Q4_K        256 elements in 8 sub-blocks of 32; qs[32*p + l] holds element
//               64p + l (low nibble) and 64p + 32 + l (high nibble); sub-block
//               scales/mins are 6-bit, packed in scales[12] (unpack_scale_min_k4).
//   Q5_K        as Q4_K, plus bit 4 of element 64p + l in qh[l] bit 2p and of
//               element 64p + 32 + l in qh[l] bit 2p + 1.
//   Q6_K        16 sub-blocks of 16 with an int8 scale each; see q6_k_value().
//   Q8_K        qs[j] = element j; bsums[g] = sum of qs[16g .. 16g + 15].
#pragma once

#include <cstdint>
#include <cstring>


namespace minfer::quant {

inline constexpr int kQK = 32;     // elements per block of the legacy formats
inline constexpr int kQK_K = 256;  // elements per super-block of the K formats

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d, m;  // f16 scale and minimum
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d, s;  // s = d * sum(qs), rounded to f16
  int8_t qs[kQK];
};
struct BlockQ4_K {
  uint16_t d, dmin;  // super-block scales of the 6-bit sub-block scales and mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];  // low 4 bits
  uint8_t qh[kQK_K / 4];  // high 2 bits
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
// Blocks are read straight from the file mapping, where they are only 1- or
// 2-byte aligned; every field is read at its natural alignment or via memcpy.
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ6_K) == 2 && alignof(BlockQ8_K) == 4);

// The helpers below are `static`: this header is included by the ISA kernel
// files, each compiled with its own -m flags, and an inline function with
// external linkage compiled there could be the copy the linker keeps for the
// whole program (then an AVX-512 instruction runs on a CPU without it).
static inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Scale (low 6 bits of the first 4 bytes, or nibble + 2 high bits) and min of
// sub-block j of a Q4_K/Q5_K block: ggml's get_scale_min_k4.
static inline void unpack_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// The 6-bit value (0..63, stored value = q - 32) of element i of a Q6_K block:
// element 128h + 32s + l lives in ql[64h + 32(s&1) + l] (low nibble for s < 2,
// high for s >= 2) and bits 2s..2s+1 of qh[32h + l].
static inline int q6_k_value(const BlockQ6_K& b, int i) {
  const int h = i / 128, s = (i % 128) / 32, l = i % 32;
  const uint8_t lo = b.ql[64 * h + 32 * (s & 1) + l];
  const int low4 = s < 2 ? (lo & 0xF) : (lo >> 4);
  const int high2 = (b.qh[32 * h + l] >> (2 * s)) & 3;
  return low4 | (high2 << 4);
}

}  // namespace minfer::quant
