// Matrix products on the CPU: activations are quantized once to the weight
// type's dot format, then the output [n_rows][n_out] is cut into tiles that
// the pool's threads take one at a time; quant::gemm computes each tile with
// register blocking.
#include <algorithm>

#include "engine/backend/cpu/cpu_kernels.h"
#include "engine/quant/quant.h"

namespace minfer::cpu {
namespace {

// Tile sizes. A tile's weight rows (64 × row bytes) and token rows stay in the
// core's L2 (≥ 512 KiB on the targets) for the widest rows seen (d_ff 18944
// Q8_0: 64 × 20 KB = 1.3 MB is the exception; it still streams well).
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileCols = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

void quantize_rows(ThreadPool& pool, DType type, const float* x, int64_t x_stride, int n_rows, int64_t k,
                   uint8_t* dst, size_t dst_stride) {
  pool.run(n_rows, [&](int64_t r, int) {
    quant::quantize_row(type, x + r * x_stride, dst + static_cast<size_t>(r) * dst_stride, k);
  });
}

void matmul(ThreadPool& pool, const Weight& w, const Weight* bias, const void* xq, size_t xq_stride, int n_rows,
            float* y, int64_t y_stride) {
  const int64_t n_out = w.n_out;
  // Decode (few tokens): split the weight rows only, in chunks small enough to
  // give every thread several (balance), large enough to amortise a task.
  int64_t rows_per_task = kTileRows;
  int64_t cols_per_task = kTileCols;
  if (n_rows <= 4) {
    cols_per_task = n_rows;
    const int64_t target_tasks = static_cast<int64_t>(pool.size()) * 8;
    rows_per_task = std::clamp<int64_t>(ceil_div(n_out, target_tasks), 16, 256);
    rows_per_task = ceil_div(rows_per_task, 16) * 16;
  }
  const int64_t n_row_tasks = ceil_div(n_out, rows_per_task);
  const int64_t n_col_tasks = ceil_div(n_rows, cols_per_task);
  const auto* xb = static_cast<const uint8_t*>(xq);
  pool.run(n_row_tasks * n_col_tasks, [&](int64_t task, int) {
    const int64_t r0 = (task / n_col_tasks) * rows_per_task;
    const int64_t c0 = (task % n_col_tasks) * cols_per_task;
    const int64_t nr = std::min(rows_per_task, n_out - r0);
    const int64_t nc = std::min<int64_t>(cols_per_task, n_rows - c0);
    float* yt = y + c0 * y_stride + r0;
    quant::gemm(w.type, w.data + static_cast<size_t>(r0) * w.row_bytes, w.row_bytes, nr,
                xb + static_cast<size_t>(c0) * xq_stride, xq_stride, nc, w.n_in, yt, y_stride);
    if (bias != nullptr) {
      const float* b = bias->f32() + r0;
      for (int64_t c = 0; c < nc; ++c) {
        float* row = yt + c * y_stride;
        for (int64_t r = 0; r < nr; ++r) row[r] += b[r];
      }
    }
  });
}

}  // namespace minfer::cpu
