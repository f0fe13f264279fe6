// The bytes of one synthetic tensor: values from NormalRng (or constants for
// norms), converted or quantized to the tensor's type, on several threads.
//
// Determinism: a tensor's rows are cut into streams of a fixed number of
// rows (a function of the row width only); stream i draws from its own
// generator seeded with mix64(tensor_seed + i). Which thread runs a stream
// does not matter, so the bytes do not depend on the thread count.
#pragma once

#include <cstdint>
#include <span>

#include "engine/quant/dtype.h"
#include "engine/synth/synth.h"

namespace minfer::synth {

inline constexpr float kWeightStd = 0.02f;

struct FillSpec {
  DType type = DType::kF32;
  TensorRole role = TensorRole::kWeight;  // kWeight or kBias: random; kNorm: 1.0
  uint64_t row_width = 0;                 // ne[0]
  uint64_t n_rows = 0;                    // ne[1] * ne[2] * ne[3]
  uint64_t seed = 0;                      // per tensor: mix64(model seed ^ hash_name(name))
};

// Fills `out` (exactly row_size(type, row_width) * n_rows bytes).
void fill_tensor(const FillSpec& spec, std::span<uint8_t> out, int n_threads);

}  // namespace minfer::synth
