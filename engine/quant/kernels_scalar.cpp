// The `scalar` ISA: every gemm is the reference dot per output element, and
// the activation quantizers are the reference ones. Slow, obviously right,
// and what the SIMD kernels are tested against.
#include <utility>

#include "engine/quant/kernels.h"
#include "engine/quant/reference.h"

namespace minfer::quant {
namespace {

template <DType kType>
void gemm_ref(const void* w, size_t w_stride, int64_t n_rows, const void* x, size_t x_stride, int64_t n_cols,
              int64_t k, float* y, int64_t ldy) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* xb = static_cast<const uint8_t*>(x);
  for (int64_t c = 0; c < n_cols; ++c) {
    for (int64_t r = 0; r < n_rows; ++r) {
      y[c * ldy + r] = ref::vec_dot(kType, wb + r * w_stride, xb + c * x_stride, k);
    }
  }
}

template <DType kType>
void quantize_ref(const float* src, void* dst, int64_t n) {
  ref::quantize_row(kType, src, dst, n);
}

template <size_t... I>
constexpr KernelTable make_table(std::index_sequence<I...>) {
  return KernelTable{{&gemm_ref<kWeightTypes[I]>...},
                     &quantize_ref<DType::kQ8_0>,
                     &quantize_ref<DType::kQ8_1>,
                     &quantize_ref<DType::kQ8_K>};
}

}  // namespace

const KernelTable& kernels_scalar() {
  static constexpr KernelTable kTable = make_table(std::make_index_sequence<kNumWeightTypes>{});
  return kTable;
}

}  // namespace minfer::quant
