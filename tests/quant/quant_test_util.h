// Helpers shared by the engine/quant tests: seeded random rows and blocks,
// the list of ISAs to run each kernel test on, and a guard that switches the
// active ISA (skipping, with the reason, where the CPU or build lacks it).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/common/half.h"
#include "engine/quant/dtype.h"
#include "engine/quant/quant.h"

namespace minfer::quant::quant_test {

inline const std::vector<Isa>& all_isas() {
  static const std::vector<Isa> kIsas{Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon};
  return kIsas;
}

inline std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) {
  return std::string(isa_name(info.param));
}

// Test fixture base: runs the test body with GetParam() active, restores the
// previous ISA afterwards, skips where unavailable.
class IsaTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    saved_ = active_isa();
    const Status s = set_active_isa(GetParam());
    if (!s) GTEST_SKIP() << "ISA " << isa_name(GetParam()) << " not available here: " << s.error().message;
  }
  void TearDown() override { (void)set_active_isa(saved_); }

 private:
  Isa saved_ = Isa::kScalar;
};

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint8_t> quantize(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> out(row_size(t, x.size()));
  quantize_row_ref(t, x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

inline std::vector<float> dequantize(DType t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, q.data(), out.data(), n);
  return out;
}

// A weight row of n elements made of random bytes (every code and packed
// scale pattern occurs), with the f16 scale fields replaced by random finite
// values so that results stay in a sane range.
inline std::vector<uint8_t> random_weight_row(DType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  if (!dtype_traits(t).quantized) {
    std::vector<float> f = random_floats(n, seed);
    std::vector<uint8_t> out(row_size(t, static_cast<uint64_t>(n)));
    quantize_row_ref(t, f.data(), out.data(), n);
    return out;
  }
  std::vector<uint8_t> out(row_size(t, static_cast<uint64_t>(n)));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-0.02f, 0.02f);
  const DTypeTraits& tr = dtype_traits(t);
  auto set_f16 = [&](size_t off, float v) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(out.data() + off, &h, 2);
  };
  for (size_t b = 0; b < out.size() / tr.block_bytes; ++b) {
    const size_t base = b * tr.block_bytes;
    switch (t) {
      case DType::kQ4_0: case DType::kQ5_0: case DType::kQ8_0: set_f16(base, scale(rng)); break;
      case DType::kQ4_1: case DType::kQ5_1: set_f16(base, std::fabs(scale(rng))); set_f16(base + 2, scale(rng)); break;
      case DType::kQ4_K: case DType::kQ5_K:
        set_f16(base, std::fabs(scale(rng)) * 0.1f);
        set_f16(base + 2, std::fabs(scale(rng)) * 0.1f);
        break;
      case DType::kQ6_K: set_f16(base + 208, scale(rng) * 0.01f); break;
      default: break;
    }
  }
  return out;
}

// Activations in vec_dot_type(wt), quantized from random floats.
inline std::vector<uint8_t> random_activation_row(DType wt, int64_t n, uint32_t seed) {
  return quantize(vec_dot_type(wt), random_floats(n, seed));
}

// Sum of |w_i x_i| of the dequantized rows: the scale of the rounding error
// of any summation order of the dot product.
inline double abs_dot(DType wt, const std::vector<uint8_t>& w, const std::vector<uint8_t>& x, int64_t n) {
  const std::vector<float> wf = dequantize(wt, w, n);
  const std::vector<float> xf = dequantize(vec_dot_type(wt), x, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(wf[i]) * xf[i]);
  return s;
}

}  // namespace minfer::quant::quant_test
