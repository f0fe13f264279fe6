// Every SIMD kernel against the scalar reference, on every ISA this CPU and
// build support (the others skip with the reason): vec_dot for random rows
// of many lengths, and gemm element by element for odd shapes and strides.
//
// Tolerance: the integer parts are exact in every kernel; only the order and
// grouping of the float block sums differ (per 32-element block in the
// kernels, per block or super-block in the reference, FMA or not). Each
// float operation errs by at most 2^-24 relative, over at most ~n/32
// accumulations, so |simd - ref| <= 1e-5 * sum|w_i x_i| holds with margin
// up to n = 2^14; F32/F16/BF16 (reference in double) likewise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/quant/quant.h"
#include "tests/quant/quant_test_util.h"

namespace minfer::quant {
namespace {

using quant_test::abs_dot;
using quant_test::random_activation_row;
using quant_test::random_weight_row;

const DType kWeightTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                              DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

constexpr double kRelTol = 1e-5;

class Kernels : public quant_test::IsaTest {};

TEST_P(Kernels, VecDotMatchesReference) {
  for (DType wt : kWeightTypes) {
    const int64_t be = dtype_traits(wt).quantized ? dtype_traits(wt).block_elems : 32;
    // 1 block, odd counts, a Qwen2.5-0.5B row (896 = 28 x 32), large.
    for (int64_t blocks : {1, 3, 7, 28, 151}) {
      const int64_t n = blocks * be;
      if (n > 256 * 64) continue;
      const auto seed = static_cast<uint32_t>(n * 31 + static_cast<int>(wt));
      const std::vector<uint8_t> w = random_weight_row(wt, n, seed);
      const std::vector<uint8_t> x = random_activation_row(wt, n, seed + 1);
      const float want = vec_dot_ref(wt, w.data(), x.data(), n);
      const float got = vec_dot(wt, w.data(), x.data(), n);
      EXPECT_NEAR(got, want, kRelTol * abs_dot(wt, w, x, n) + 1e-30)
          << dtype_name(wt) << " n=" << n << " isa=" << isa_name(GetParam());
    }
  }
}

TEST_P(Kernels, FloatTailsAndOddLengths) {
  // F32/F16/BF16 rows need not be multiples of the vector width.
  for (DType wt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n : {1, 7, 17, 33, 131}) {
      const std::vector<uint8_t> w = random_weight_row(wt, n, static_cast<uint32_t>(n));
      const std::vector<uint8_t> x = random_activation_row(wt, n, static_cast<uint32_t>(n + 5));
      EXPECT_NEAR(vec_dot(wt, w.data(), x.data(), n), vec_dot_ref(wt, w.data(), x.data(), n),
                  kRelTol * abs_dot(wt, w, x, n))
          << dtype_name(wt) << " n=" << n;
    }
  }
}

// gemm equals vec_dot_ref per element for odd n_rows / n_cols (partial
// panels and column tiles), padded row strides and ldy > n_rows; outputs
// outside [0, n_rows) of each column stay untouched.
TEST_P(Kernels, GemmMatchesReferencePerElement) {
  for (DType wt : kWeightTypes) {
    const int64_t k = dtype_traits(wt).block_elems == 256 ? 512 : 96;
    const DType at = vec_dot_type(wt);
    const size_t w_row = row_size(wt, k), x_row = row_size(at, k);
    const size_t w_stride = w_row + 2 * dtype_traits(wt).block_bytes;  // padded rows
    const size_t x_stride = x_row + 4 * ((dtype_traits(at).block_bytes + 3) / 4);
    for (int64_t n_rows : {1, 5, 17, 33}) {
      for (int64_t n_cols : {1, 2, 3, 9, 13}) {
        std::vector<uint8_t> w(w_stride * n_rows), x(x_stride * n_cols);
        std::vector<std::vector<uint8_t>> w_rows, x_rows;
        for (int64_t r = 0; r < n_rows; ++r) {
          w_rows.push_back(random_weight_row(wt, k, static_cast<uint32_t>(1000 + r)));
          std::memcpy(w.data() + r * w_stride, w_rows.back().data(), w_row);
        }
        for (int64_t c = 0; c < n_cols; ++c) {
          x_rows.push_back(random_activation_row(wt, k, static_cast<uint32_t>(2000 + c)));
          std::memcpy(x.data() + c * x_stride, x_rows.back().data(), x_row);
        }
        const int64_t ldy = n_rows + 3;
        const float kSentinel = -12345.0f;
        std::vector<float> y(static_cast<size_t>(ldy * n_cols), kSentinel);
        gemm(wt, w.data(), w_stride, n_rows, x.data(), x_stride, n_cols, k, y.data(), ldy);
        for (int64_t c = 0; c < n_cols; ++c) {
          for (int64_t r = 0; r < ldy; ++r) {
            const float got = y[c * ldy + r];
            if (r >= n_rows) {
              ASSERT_EQ(got, kSentinel) << "gemm wrote outside its rows: r=" << r << " c=" << c;
              continue;
            }
            const float want = vec_dot_ref(wt, w_rows[r].data(), x_rows[c].data(), k);
            ASSERT_NEAR(got, want, kRelTol * abs_dot(wt, w_rows[r], x_rows[c], k))
                << dtype_name(wt) << " r=" << r << " c=" << c << " n_rows=" << n_rows << " n_cols=" << n_cols
                << " isa=" << isa_name(GetParam());
          }
        }
      }
    }
  }
}

// A larger gemm with many column tiles and several panels, spot-checked.
TEST_P(Kernels, GemmLargeSpotChecks) {
  for (DType wt : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kF16}) {
    const int64_t k = 1024, n_rows = 70, n_cols = 67;
    const DType at = vec_dot_type(wt);
    const size_t w_row = row_size(wt, k), x_row = row_size(at, k);
    std::vector<uint8_t> w(w_row * n_rows), x(x_row * n_cols);
    for (int64_t r = 0; r < n_rows; ++r) {
      const auto row = random_weight_row(wt, k, static_cast<uint32_t>(r));
      std::memcpy(w.data() + r * w_row, row.data(), w_row);
    }
    for (int64_t c = 0; c < n_cols; ++c) {
      const auto row = random_activation_row(wt, k, static_cast<uint32_t>(500 + c));
      std::memcpy(x.data() + c * x_row, row.data(), x_row);
    }
    std::vector<float> y(static_cast<size_t>(n_rows * n_cols));
    gemm(wt, w.data(), w_row, n_rows, x.data(), x_row, n_cols, k, y.data(), n_rows);
    for (int64_t c = 0; c < n_cols; c += 11) {
      for (int64_t r = 0; r < n_rows; r += 3) {
        const std::vector<uint8_t> wr(w.begin() + r * w_row, w.begin() + (r + 1) * w_row);
        const std::vector<uint8_t> xc(x.begin() + c * x_row, x.begin() + (c + 1) * x_row);
        ASSERT_NEAR(y[c * n_rows + r], vec_dot_ref(wt, wr.data(), xc.data(), k), kRelTol * abs_dot(wt, wr, xc, k))
            << dtype_name(wt) << " r=" << r << " c=" << c;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, Kernels, ::testing::ValuesIn(quant_test::all_isas()), quant_test::isa_param_name);

TEST(Isa, DetectedIsActiveByDefaultAndScalarAlwaysWorks) {
  // MINFER_CPU_ISA may cap it; without it the detected ISA is active.
  if (std::getenv("MINFER_CPU_ISA") == nullptr) {
    EXPECT_EQ(active_isa(), detected_isa());
  }
  const Isa saved = active_isa();
  EXPECT_TRUE(set_active_isa(Isa::kScalar));
  EXPECT_EQ(active_isa(), Isa::kScalar);
  EXPECT_TRUE(set_active_isa(saved));
}

// MINFER_CPU_ISA is read once, at the first use of the ISA state, so each
// case runs in a fresh process (threadsafe death tests re-execute the binary).
void exit_with_active_isa(const char* env) {
  setenv("MINFER_CPU_ISA", env, 1);
  std::fprintf(stderr, "active=%s\n", std::string(isa_name(active_isa())).c_str());
  std::exit(0);
}

TEST(IsaEnv, CapsTheActiveIsa) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_with_active_isa("scalar"), ::testing::ExitedWithCode(0), "active=scalar");
  // Unknown names and ISAs the CPU lacks fall back to the detected one (with a warning).
  const std::string detected = "active=" + std::string(isa_name(detected_isa()));
  EXPECT_EXIT(exit_with_active_isa("sse9"), ::testing::ExitedWithCode(0), detected);
  const char* missing = detected_isa() == Isa::kNeon ? "avx512" : "neon";
  EXPECT_EXIT(exit_with_active_isa(missing), ::testing::ExitedWithCode(0), detected);
}

TEST(Isa, UnsupportedIsaIsAnErrorNamingIt) {
  const Isa other = detected_isa() == Isa::kNeon ? Isa::kAvx2 : Isa::kNeon;
  const Status s = set_active_isa(other);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message.find(std::string(isa_name(other))), std::string::npos) << s.error().message;
}

}  // namespace
}  // namespace minfer::quant
