// Expected<T> and the f16/bf16 conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/common/expected.h"
#include "engine/common/half.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace minfer {
namespace {

Expected<int> parse_positive(int v) {
  if (v <= 0) return unexpected(ErrorCode::kInvalidArgument, "value " + std::to_string(v) + " is not positive");
  return v;
}

Expected<int> twice_positive(int v) {
  MINFER_ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Expected, CarriesValueOrError) {
  auto good = twice_positive(21);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, 42);
  auto bad = twice_positive(-3);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(bad.error().message, "value -3 is not positive");
}

TEST(Half, KnownValues) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // rounds up to Inf
  EXPECT_EQ(f32_to_f16(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0001), 5.9604645e-8f);
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
}

#if defined(__x86_64__) && defined(__F16C__)
#define MINFER_TEST_F16C 1
#endif

TEST(Half, MatchesHardwareRounding) {
#ifdef MINFER_TEST_F16C
  // Every 7th float bit pattern against the F16C instruction (round to nearest even).
  for (uint64_t bits = 0; bits < 0x100000000ull; bits += 7919) {
    uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    if (std::isnan(f)) continue;
    const uint16_t hw = static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
    ASSERT_EQ(f32_to_f16(f), hw) << "float bits 0x" << std::hex << b;
  }
#else
  GTEST_SKIP() << "built without F16C: hardware rounding comparison not available";
#endif
}

}  // namespace
}  // namespace minfer
