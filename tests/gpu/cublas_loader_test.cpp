// cuBLAS is loaded on demand by the CUDA backend; this needs no GPU, only the
// library of the toolkit this build used.
#include <gtest/gtest.h>

#include "engine/backend/cuda/cublas_loader.h"

namespace minfer {
namespace {

TEST(CublasLoader, ResolvesTheFourCallsOfThePrefillGemm) {
  auto api = cuda::cublas_api();
  ASSERT_TRUE(api.has_value()) << api.error().message;
  EXPECT_NE((*api)->create, nullptr);
  EXPECT_NE((*api)->destroy, nullptr);
  EXPECT_NE((*api)->set_stream, nullptr);
  EXPECT_NE((*api)->gemm_ex, nullptr);
  // Loaded once: the same table on every call.
  EXPECT_EQ(*cuda::cublas_api(), *api);
}

}  // namespace
}  // namespace minfer
