// GB/s of the CUDA upload's host-side repack (cuda::repack_rows_parallel:
// GGUF rows into the device's planes, row ranges on a ThreadPool's threads)
// at the shape of a 7B ffn_down (3,584 rows of 18,944), by thread count.
// Bytes are the GGUF bytes read. No GPU needed.
//
// Run: build-bench/bench/repack_bench [--benchmark_filter=q4_k]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "engine/backend/cpu/thread_pool.h"
#include "engine/backend/cuda/repack.h"
#include "engine/quant/quant.h"

namespace minfer {
namespace {

constexpr int64_t kRows = 3584, kK = 18944;

void BM_Repack(benchmark::State& state, DType type) {
  const int threads = static_cast<int>(state.range(0));
  const auto wt = static_cast<kernels::WType>(static_cast<uint32_t>(type));
  const kernels::PlaneSizes ps = kernels::plane_sizes(wt, kK);
  const size_t row_bytes = row_size(type, kK);
  std::vector<uint8_t> src(row_bytes * kRows);
  std::mt19937 rng(7);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  std::vector<uint8_t> q(ps.q_row * kRows), qh(ps.qh_row * kRows), meta(ps.meta_row * kRows), d(ps.d_row * kRows);
  ThreadPool pool(threads);
  auto plane = [](std::vector<uint8_t>& p) { return p.empty() ? nullptr : p.data(); };
  for (auto _ : state) {
    cuda::repack_rows_parallel(pool, wt, kK, src.data(), row_bytes, kRows, plane(q), plane(qh), plane(meta), plane(d));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(src.size()));
}

void threads_args(benchmark::internal::Benchmark* b) {
  for (int t = 1; t <= 16; t *= 2) b->Arg(t);
  b->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Repack, q8_0, DType::kQ8_0)->Apply(threads_args);
BENCHMARK_CAPTURE(BM_Repack, q4_k, DType::kQ4_K)->Apply(threads_args);
BENCHMARK_CAPTURE(BM_Repack, q6_k, DType::kQ6_K)->Apply(threads_args);

}  // namespace
}  // namespace minfer

BENCHMARK_MAIN();
