// GOPS of quant::gemm per weight type and ISA, single thread, at the shapes
// of a Qwen2.5-0.5B layer: k = 896, n_rows = 4864 (ffn_gate/up) for the
// 32-element formats and the float types; the K formats need k % 256 == 0,
// so they run the transposed ffn_down shape k = 4864, n_rows = 896 (the same
// number of operations). n_cols = 1 is decode (GEMV), 64 and 512 prefill.
// One op is one multiply or one add: GOPS = 2 k n_rows n_cols / time.
//
// Run: build-bench/bench/quant_bench [--benchmark_filter=q8_0]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/quant/quant.h"

namespace minfer::quant {
namespace {

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0,
                        DType::kQ5_1, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

// A quantized matrix of n rows x k (each row quantized separately).
std::vector<uint8_t> matrix(DType t, int64_t rows, int64_t k, uint32_t seed) {
  const size_t rb = row_size(t, k);
  std::vector<uint8_t> m(rb * rows);
  const std::vector<float> f = random_floats(k, seed);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(t, f.data(), m.data() + r * rb, k);  // same values per row: speed does not care
  }
  return m;
}

void bm_gemm(benchmark::State& state, DType wt, Isa isa) {
  const bool k_quant = dtype_traits(wt).block_elems == 256;
  const int64_t k = k_quant ? 4864 : 896, n_rows = k_quant ? 896 : 4864, n_cols = state.range(0);
  const Isa saved = active_isa();
  if (!set_active_isa(isa)) {
    state.SkipWithError("ISA not available on this CPU/build");
    return;
  }
  const DType at = vec_dot_type(wt);
  const std::vector<uint8_t> w = matrix(wt, n_rows, k, 1);
  const std::vector<uint8_t> x = matrix(at, n_cols, k, 2);
  std::vector<float> y(static_cast<size_t>(n_rows * n_cols));
  for (auto _ : state) {
    gemm(wt, w.data(), row_size(wt, k), n_rows, x.data(), row_size(at, k), n_cols, k, y.data(), n_rows);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * static_cast<double>(k) * n_rows * n_cols;
  state.counters["GOPS"] = benchmark::Counter(ops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(w.size()) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  (void)set_active_isa(saved);
}

// The same product cut into tiles of tile_rows x 64 columns, one gemm call
// each, as a multi-threaded backend does: per-call costs (activation
// summaries, panel repacking) against tile size.
void bm_gemm_tiled(benchmark::State& state, DType wt) {
  const bool k_quant = dtype_traits(wt).block_elems == 256;
  const int64_t k = k_quant ? 4864 : 896, n_rows = k_quant ? 896 : 4864, n_cols = 512;
  const int64_t tile_rows = state.range(0), tile_cols = 64;
  const DType at = vec_dot_type(wt);
  const std::vector<uint8_t> w = matrix(wt, n_rows, k, 1);
  const std::vector<uint8_t> x = matrix(at, n_cols, k, 2);
  std::vector<float> y(static_cast<size_t>(n_rows * n_cols));
  const size_t wb = row_size(wt, k), xb = row_size(at, k);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < n_rows; r0 += tile_rows) {
      for (int64_t c0 = 0; c0 < n_cols; c0 += tile_cols) {
        const int64_t nr = n_rows - r0 < tile_rows ? n_rows - r0 : tile_rows;
        gemm(wt, w.data() + r0 * wb, wb, nr, x.data() + c0 * xb, xb, tile_cols, k, y.data() + c0 * n_rows + r0,
             n_rows);
      }
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GOPS"] = benchmark::Counter(2.0 * k * n_rows * n_cols * state.iterations() / 1e9,
                                              benchmark::Counter::kIsRate);
}

void bm_quantize(benchmark::State& state, DType t, Isa isa) {
  const int64_t n = 4864;
  const Isa saved = active_isa();
  if (!set_active_isa(isa)) {
    state.SkipWithError("ISA not available on this CPU/build");
    return;
  }
  const std::vector<float> f = random_floats(n, 3);
  std::vector<uint8_t> q(row_size(t, n));
  for (auto _ : state) {
    quantize_row(t, f.data(), q.data(), n);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  (void)set_active_isa(saved);
}

int register_all() {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!set_active_isa(isa)) continue;
    for (DType t : kTypes) {
      const std::string name = "gemm/" + std::string(dtype_name(t)) + "/" + std::string(isa_name(isa));
      auto* b = benchmark::RegisterBenchmark(name.c_str(), bm_gemm, t, isa)->Arg(1)->Arg(64);
      if (isa != Isa::kScalar) b->Arg(512);  // scalar at 512 columns takes seconds per call
      // CPU time, not wall time: the build machines are shared, and a
      // single-threaded kernel descheduled half the time is not half as fast.
      b->Unit(benchmark::kMillisecond);
    }
    for (DType t : {DType::kQ8_0, DType::kQ8_1, DType::kQ8_K}) {
      const std::string name = "quantize/" + std::string(dtype_name(t)) + "/" + std::string(isa_name(isa));
      benchmark::RegisterBenchmark(name.c_str(), bm_quantize, t, isa);
    }
  }
  (void)set_active_isa(detected_isa());
  for (DType t : {DType::kQ8_0, DType::kQ4_K}) {
    const std::string name = "gemm_tiles/" + std::string(dtype_name(t)) + "/" + std::string(isa_name(detected_isa()));
    benchmark::RegisterBenchmark(name.c_str(), bm_gemm_tiled, t)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
  }
  return 0;
}

const int kRegistered = register_all();

}  // namespace
}  // namespace minfer::quant

BENCHMARK_MAIN();
