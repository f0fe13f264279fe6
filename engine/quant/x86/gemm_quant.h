// x86: gemm for the quantized weight formats: summarise the activation
// columns once, then n_cols == 1 goes to the GEMV and anything wider to the
// repacked panels (see panel.h for the layout and why).
#pragma once

#include <cstdint>

#include "engine/quant/kernels.h"
#include "engine/quant/x86/gemv.h"
#include "engine/quant/x86/panel.h"
#include "engine/quant/x86/summary.h"

namespace minfer::quant::x86 {
namespace {

// Columns per pass over the panels: their codes and summaries should stay in
// L2 while every panel of the matrix streams past them (512 KiB: half of a
// Zen 4/5 L2, a quarter of Sapphire Rapids').
constexpr int64_t kColumnBytesBudget = 512 * 1024;

template <class V, class F>
void gemm_quant(const void* w_, size_t w_stride, int64_t n_rows, const void* x_, size_t x_stride, int64_t n_cols,
                int64_t k, float* y, int64_t ldy) {
  using P = Panel<V, F>;
  const auto* w = static_cast<const uint8_t*>(w_);
  const auto* x = static_cast<const uint8_t*>(x_);
  const int64_t n_sb = k / ActGeometry<F>::kScaleElems;
  auto* sums = static_cast<Summary*>(scratch(kScratchActivations, sizeof(Summary) * n_cols * n_sb));
  for (int64_t c = 0; c < n_cols; ++c) summarize<F>(x + c * x_stride, k, sums + c * n_sb);
  if (n_cols == 1) {
    gemv<V, F>(w, w_stride, n_rows, x, sums, k, y);
    return;
  }
  const int64_t col_bytes = k + n_sb * static_cast<int64_t>(sizeof(Summary));
  int64_t chunk = kColumnBytesBudget / col_bytes / V::kCols * V::kCols;
  if (chunk < V::kCols) chunk = V::kCols;
  P panel(scratch(kScratchPanel, P::bytes(k)), k);
  for (int64_t c0 = 0; c0 < n_cols; c0 += chunk) {
    const int64_t nc = n_cols - c0 < chunk ? n_cols - c0 : chunk;
    for (int64_t r0 = 0; r0 < n_rows; r0 += P::kRows) {
      const int rows = static_cast<int>(n_rows - r0 < P::kRows ? n_rows - r0 : P::kRows);
      panel.repack(w + r0 * w_stride, w_stride, rows);
      panel_columns<V, F, V::kCols>(panel, x + c0 * x_stride, x_stride, sums + c0 * n_sb, nc, y + c0 * ldy + r0,
                                    ldy, rows);
    }
  }
}

}  // namespace
}  // namespace minfer::quant::x86
