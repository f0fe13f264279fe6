// fill_tensor: generate f32 rows per stream, then convert (F32/F16/BF16 here,
// bit-exact via engine/common/half.h) or quantize (quant::quantize_row).
#include "engine/synth/tensor_fill.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/common/half.h"
#include "engine/quant/quant.h"
#include "engine/synth/normal_rng.h"

namespace minfer::synth {
namespace {

// Values per stream: big enough that seeding mt19937_64 (312 words) is noise,
// small enough that a 896-wide tensor still splits across threads.
constexpr uint64_t kStreamValues = 1 << 16;

void encode_row(DType type, const float* src, uint8_t* dst, uint64_t n) {
  switch (type) {
    case DType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case DType::kF16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case DType::kBF16:
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    default:
      quant::quantize_row(type, src, dst, static_cast<int64_t>(n));
  }
}

}  // namespace

void fill_tensor(const FillSpec& spec, std::span<uint8_t> out, int n_threads) {
  const uint64_t width = spec.row_width;
  const uint64_t row_bytes = row_size(spec.type, width);
  const uint64_t rows_per_stream = std::max<uint64_t>(1, kStreamValues / width);
  const uint64_t n_streams = (spec.n_rows + rows_per_stream - 1) / rows_per_stream;
  std::atomic<uint64_t> next_stream{0};

  auto worker = [&] {
    std::vector<float> values(rows_per_stream * width);
    for (uint64_t s = next_stream++; s < n_streams; s = next_stream++) {
      const uint64_t row0 = s * rows_per_stream;
      const uint64_t rows = std::min(rows_per_stream, spec.n_rows - row0);
      if (spec.role == TensorRole::kNorm) {
        std::fill(values.begin(), values.end(), 1.0f);
      } else {
        NormalRng(mix64(spec.seed + s)).fill(values.data(), rows * width, kWeightStd);
      }
      for (uint64_t r = 0; r < rows; ++r) {
        encode_row(spec.type, values.data() + r * width, out.data() + (row0 + r) * row_bytes, width);
      }
    }
  };

  const uint64_t threads = std::min<uint64_t>(std::max(1, n_threads), n_streams);
  std::vector<std::thread> pool;
  for (uint64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace minfer::synth
