// Real files: every tensor of the checked-in GGUF models dequantizes to
// finite values, and gemm over a real weight matrix agrees with a double
// precision product of its dequantized rows.
//
// stories260K.gguf (tests/data/PROVENANCE.md): llama2.c's 260K-parameter
// TinyStories model, all F32; dim 64, vocab 512, 5 layers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/quant/quant.h"

namespace minfer::quant {
namespace {

const std::string kStories = std::string(MINFER_TEST_DATA_DIR) + "/models/stories260K.gguf";

TEST(GgufTensors, Stories260KDequantizesToFiniteValues) {
  auto file = gguf::File::open(kStories);
  ASSERT_TRUE(file) << file.error().message;
  const auto& tensors = (*file)->tensors();
  ASSERT_FALSE(tensors.empty());
  uint64_t total = 0;
  for (const gguf::TensorInfo& t : tensors) {
    ASSERT_TRUE(is_weight_type(t.type)) << t.name << ": " << dtype_name(t.type);
    EXPECT_EQ(t.type, DType::kF32) << t.name;  // the file is all F32
    const int64_t n0 = static_cast<int64_t>(t.ne[0]);
    const uint64_t rows = t.n_elements() / t.ne[0];
    std::vector<float> row(static_cast<size_t>(n0));
    double sum_sq = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      dequantize_row(t.type, t.data + r * row_size(t.type, t.ne[0]), row.data(), n0);
      for (float v : row) {
        ASSERT_TRUE(std::isfinite(v)) << t.name << " row " << r;
        sum_sq += static_cast<double>(v) * v;
      }
    }
    EXPECT_GT(sum_sq, 0.0) << t.name << " is all zero";
    total += t.n_elements();
  }
  // token_embd [64, 512] holds 32768 of the ~260K parameters.
  const gguf::TensorInfo* emb = (*file)->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->ne[0], 64u);
  EXPECT_EQ(emb->ne[1], 512u);
  EXPECT_GT(total, 200000u);
  EXPECT_LT(total, 320000u);
}

// The first layer's FFN up-projection times random activations, through the
// active ISA's gemm, against double sums of the same dequantized weights.
TEST(GgufTensors, Stories260KGemmMatchesDoubleProduct) {
  auto file = gguf::File::open(kStories);
  ASSERT_TRUE(file) << file.error().message;
  const gguf::TensorInfo* w = (*file)->find_tensor("blk.0.ffn_up.weight");
  ASSERT_NE(w, nullptr);
  const int64_t k = static_cast<int64_t>(w->ne[0]), n_rows = static_cast<int64_t>(w->ne[1]), n_cols = 5;
  std::vector<float> x(static_cast<size_t>(k * n_cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> y(static_cast<size_t>(n_rows * n_cols));
  const size_t w_stride = row_size(w->type, w->ne[0]);
  gemm(w->type, w->data, w_stride, n_rows, x.data(), k * sizeof(float), n_cols, k, y.data(), n_rows);
  std::vector<float> wr(static_cast<size_t>(k));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(w->type, w->data + r * w_stride, wr.data(), k);
    for (int64_t c = 0; c < n_cols; ++c) {
      double want = 0, mag = 0;
      for (int64_t i = 0; i < k; ++i) {
        want += static_cast<double>(wr[i]) * x[c * k + i];
        mag += std::fabs(static_cast<double>(wr[i]) * x[c * k + i]);
      }
      ASSERT_NEAR(y[c * n_rows + r], want, 1e-5 * mag) << "r=" << r << " c=" << c;
    }
  }
}

}  // namespace
}  // namespace minfer::quant
