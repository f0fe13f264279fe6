#include "engine/backend/cuda/repack.h"

#include <algorithm>

namespace minfer::cuda {

void repack_rows_parallel(ThreadPool& pool, kernels::WType type, int64_t k, const uint8_t* src, size_t src_row_bytes,
                          int64_t n_rows, uint8_t* q, uint8_t* qh, uint8_t* meta, uint8_t* d) {
  if (n_rows <= 0) return;
  const kernels::PlaneSizes ps = kernels::plane_sizes(type, k);
  // A few ranges a thread, so that a slow thread does not hold up the rest.
  const int64_t n_tasks = std::min<int64_t>(n_rows, 4 * static_cast<int64_t>(pool.size()));
  pool.run(n_tasks, [&](int64_t task, int) {
    const int64_t a = n_rows * task / n_tasks, b = n_rows * (task + 1) / n_tasks;
    const size_t first = static_cast<size_t>(a);
    auto plane = [first](uint8_t* p, size_t row_bytes) { return p != nullptr ? p + first * row_bytes : nullptr; };
    kernels::repack_rows(type, k, src + first * src_row_bytes, src_row_bytes, b - a, plane(q, ps.q_row),
                         plane(qh, ps.qh_row), plane(meta, ps.meta_row), plane(d, ps.d_row));
  });
}

}  // namespace minfer::cuda
