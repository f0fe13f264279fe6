// The upload's host-side repack on several threads: GGUF rows into the
// device's planes (kernels::repack_rows), a pool's threads taking row ranges.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/backend/cpu/thread_pool.h"
#include "kernels/weight_layout.h"

namespace minfer::cuda {

// The bytes of kernels::repack_rows over all n_rows (rows are independent:
// each row's planes lie at fixed strides), the ranges on pool's threads.
void repack_rows_parallel(ThreadPool& pool, kernels::WType type, int64_t k, const uint8_t* src, size_t src_row_bytes,
                          int64_t n_rows, uint8_t* q, uint8_t* qh, uint8_t* meta, uint8_t* d);

}  // namespace minfer::cuda
