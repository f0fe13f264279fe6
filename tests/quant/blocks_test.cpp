// Hand-built blocks with known bytes decode to known values: the element
// order and scale packing of every format, worked out by hand from ggml's
// ggml-common.h layouts (the arithmetic is in the comments). Also the struct
// sizes against the DType table.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "engine/quant/blocks.h"
#include "engine/quant/dtype.h"
#include "engine/quant/quant.h"

namespace minfer::quant {
namespace {

std::vector<float> decode(DType t, const void* block, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  dequantize_row(t, block, y.data(), n);
  return y;
}

TEST(Blocks, SizesMatchTheTypeTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), dtype_traits(DType::kQ4_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_1), dtype_traits(DType::kQ4_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_0), dtype_traits(DType::kQ5_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_1), dtype_traits(DType::kQ5_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_0), dtype_traits(DType::kQ8_0).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_1), dtype_traits(DType::kQ8_1).block_bytes);
  EXPECT_EQ(sizeof(BlockQ4_K), dtype_traits(DType::kQ4_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ5_K), dtype_traits(DType::kQ5_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ6_K), dtype_traits(DType::kQ6_K).block_bytes);
  EXPECT_EQ(sizeof(BlockQ8_K), dtype_traits(DType::kQ8_K).block_bytes);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
}

TEST(Blocks, Q4_0) {
  // d = 0x3800 = 0.5. Byte j: low nibble = element j, high = element j + 16;
  // value = (nibble - 8) * d.
  //   qs[0] = 0x1F: e0 = (15-8)*0.5 = 3.5, e16 = (1-8)*0.5 = -3.5
  //   qs[1] = 0x80: e1 = (0-8)*0.5 = -4,   e17 = (8-8)*0.5 = 0
  //   qs[j] = 0x88 elsewhere: 0
  BlockQ4_0 b{};
  b.d = 0x3800;
  std::memset(b.qs, 0x88, sizeof b.qs);
  b.qs[0] = 0x1F;
  b.qs[1] = 0x80;
  const auto y = decode(DType::kQ4_0, &b, 32);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[1], -4.0f);
  EXPECT_EQ(y[17], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[31], 0.0f);
}

TEST(Blocks, Q4_1) {
  // d = 0.5 (0x3800), m = -1 (0xBC00); value = nibble * d + m.
  //   qs[0] = 0x2F: e0 = 15*0.5 - 1 = 6.5, e16 = 2*0.5 - 1 = 0; zeros: -1
  BlockQ4_1 b{};
  b.d = 0x3800;
  b.m = 0xBC00;
  b.qs[0] = 0x2F;
  const auto y = decode(DType::kQ4_1, &b, 32);
  EXPECT_EQ(y[0], 6.5f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(Blocks, Q5_0) {
  // d = 0.25 (0x3400); bit 4 of element j is qh bit j (little-endian u32);
  // value = (code - 16) * d.
  //   qh = {0x01, 0, 0x01, 0}: bits 0 and 16 set. qs[0] = 0x0F.
  //   e0 = (15 | 16) - 16 = 15 -> 3.75;  e16 = (0 | 16) - 16 = 0 -> 0
  //   e1 = (0 - 16) * 0.25 = -4
  BlockQ5_0 b{};
  b.d = 0x3400;
  b.qh[0] = 0x01;
  b.qh[2] = 0x01;
  b.qs[0] = 0x0F;
  const auto y = decode(DType::kQ5_0, &b, 32);
  EXPECT_EQ(y[0], 3.75f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[1], -4.0f);
  EXPECT_EQ(y[17], -4.0f);
}

TEST(Blocks, Q5_1) {
  // d = 1 (0x3C00), m = 0.5 (0x3800); qh bit 3 (byte 0 = 0x08) and bit 19
  // (byte 2 = 0x08); qs[3] = 0xA5.
  //   e3 = (5 | 16) * 1 + 0.5 = 21.5;  e19 = (10 | 16) + 0.5 = 26.5; zeros: 0.5
  BlockQ5_1 b{};
  b.d = 0x3C00;
  b.m = 0x3800;
  b.qh[0] = 0x08;
  b.qh[2] = 0x08;
  b.qs[3] = 0xA5;
  const auto y = decode(DType::kQ5_1, &b, 32);
  EXPECT_EQ(y[3], 21.5f);
  EXPECT_EQ(y[19], 26.5f);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[16], 0.5f);
}

TEST(Blocks, Q8_0AndQ8_1) {
  // Q8_0: d = 2 (0x4000): qs[0] = -3 -> -6, qs[31] = 127 -> 254.
  BlockQ8_0 a{};
  a.d = 0x4000;
  a.qs[0] = -3;
  a.qs[31] = 127;
  const auto y = decode(DType::kQ8_0, &a, 32);
  EXPECT_EQ(y[0], -6.0f);
  EXPECT_EQ(y[31], 254.0f);
  EXPECT_EQ(y[1], 0.0f);
  // Q8_1: d = 0.5: qs[5] = -128 -> -64 (s plays no part in the values).
  BlockQ8_1 b{};
  b.d = 0x3800;
  b.s = 0x7BFF;
  b.qs[5] = -128;
  const auto z = decode(DType::kQ8_1, &b, 32);
  EXPECT_EQ(z[5], -64.0f);
  EXPECT_EQ(z[4], 0.0f);
}

TEST(Blocks, Q4_K) {
  // d = 1 (0x3C00), dmin = 0.5 (0x3800). Sub-block j covers elements
  // 32j..32j+31; value = d*sc_j*q - dmin*m_j.
  //   Sub-block 0: sc = scales[0] & 63 = 2, m = scales[4] & 63 = 3.
  //     e0 = low nibble of qs[0] = 5: 1*2*5 - 0.5*3 = 8.5
  //   Sub-block 5 (j >= 4): sc = (scales[9] & 0xF) | (scales[1] >> 6) << 4
  //     = 1 | 1<<4 = 17;  m = (scales[9] >> 4) | (scales[5] >> 6) << 4
  //     = 7 | 2<<4 = 39   (scales[9] = 0x71, scales[1] = 0x40, scales[5] = 0x80)
  //     e160 = element 64*2 + 32 + 0 = high nibble of qs[64] = 9:
  //     17*9 - 0.5*39 = 153 - 19.5 = 133.5
  //   Sub-block 1: sc = 0x40 & 63 = 0, m = 0x80 & 63 = 0 -> e32 = 0.
  //   Sub-block 4: sc = scales[8] & 0xF | (scales[0] >> 6) << 4 = 0 -> e128 = 0.
  BlockQ4_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  b.scales[0] = 2;
  b.scales[4] = 3;
  b.scales[1] = 0x40;
  b.scales[5] = 0x80;
  b.scales[9] = 0x71;
  b.qs[0] = 0x05;
  b.qs[64] = 0x90;
  const auto y = decode(DType::kQ4_K, &b, 256);
  EXPECT_EQ(y[0], 8.5f);
  EXPECT_EQ(y[1], -1.5f);  // q = 0: 0 - 0.5*3
  EXPECT_EQ(y[160], 133.5f);
  EXPECT_EQ(y[161], -19.5f);  // q = 0 in sub-block 5
  EXPECT_EQ(y[32], 0.0f);
  EXPECT_EQ(y[128], 0.0f);
}

TEST(Blocks, Q5_K) {
  // d = 1, dmin = 1; sub-block 0: sc = 1, m = 2. qs[0] = 0x03 and qh[0] bit 0
  // (sub-block 0's high bit for element 0): q = 3 + 16 = 19 -> 1*19 - 2 = 17.
  // qh[0] bit 1 is the high bit of element 32 (sub-block 1, sc = m = 0): 0.
  // Element 1: q = 0 -> -2.
  BlockQ5_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3C00;
  b.scales[0] = 1;
  b.scales[4] = 2;
  b.qs[0] = 0x03;
  b.qh[0] = 0x03;
  const auto y = decode(DType::kQ5_K, &b, 256);
  EXPECT_EQ(y[0], 17.0f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(y[32], 0.0f);
}

TEST(Blocks, Q6_K) {
  // d = 0.5 (0x3800); element e has scale scales[e / 16]; its 6-bit code is
  // the low nibble of ql[e] (e < 32) plus bits 0..1 of qh[e] as bits 4..5;
  // value = d * scale * (code - 32).
  //   e0:  ql[0] = 0x0A, qh[0] = 0x02 -> code 10 | 2<<4 = 42 -> 0.5*2*10 = 10
  //   e16: code 0, scale scales[1] = -1 -> 0.5*(-1)*(-32) = 16
  //   e1:  code 0, scale 2 -> 0.5*2*(-32) = -32
  //   e64: high nibble of ql[0] = 0, qh[0] bits 4..5 = 0, scales[4] = 0 -> 0
  //   e224: element 128 + 96 + 0: high nibble of ql[64 + 32] = 0xC, qh[32]
  //         bits 6..7 = 3 -> code 12 | 3<<4 = 60; scales[14] = 3:
  //         0.5*3*(60-32) = 42
  BlockQ6_K b{};
  b.d = 0x3800;
  b.scales[0] = 2;
  b.scales[1] = -1;
  b.scales[14] = 3;
  b.ql[0] = 0x0A;
  b.qh[0] = 0x02;
  b.ql[96] = 0xC0;
  b.qh[32] = 0xC0;
  const auto y = decode(DType::kQ6_K, &b, 256);
  EXPECT_EQ(y[0], 10.0f);
  EXPECT_EQ(y[16], 16.0f);
  EXPECT_EQ(y[1], -32.0f);
  EXPECT_EQ(y[64], 0.0f);
  EXPECT_EQ(y[224], 42.0f);
}

TEST(Blocks, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.25f;
  b.qs[7] = 100;  // 25
  b.qs[200] = -128;  // -32
  const auto y = decode(DType::kQ8_K, &b, 256);
  EXPECT_EQ(y[7], 25.0f);
  EXPECT_EQ(y[200], -32.0f);
  EXPECT_EQ(y[0], 0.0f);
}

TEST(Blocks, FloatFormats) {
  // F16 0x3C00 = 1, 0xC000 = -2; BF16 0x3F80 = 1, 0xC040 = -3.
  const uint16_t f16[2] = {0x3C00, 0xC000};
  const uint16_t bf16[2] = {0x3F80, 0xC040};
  EXPECT_EQ(decode(DType::kF16, f16, 2), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(decode(DType::kBF16, bf16, 2), (std::vector<float>{1.0f, -3.0f}));
}

}  // namespace
}  // namespace minfer::quant
