// Tensor element types as GGUF numbers them (ggml's `ggml_type`), with their
// block geometry. Only the types minfer implements are named; any other id
// read from a file is rejected by the GGUF reader as an unknown type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace minfer {

// Values are the on-disk ids (ggml.h, enum ggml_type). Do not renumber.
enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,    // activation format for Q4_1 / Q5_1 dot products
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,   // activation format for the K-quant dot products
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kBF16 = 30,
};

struct DTypeTraits {
  std::string_view name;     // as llama.cpp prints it: "q4_K", "f16", ...
  uint32_t block_elems;      // elements per block (1 for plain types)
  uint32_t block_bytes;      // bytes per block
  bool quantized;
};

// nullopt for an id minfer does not implement.
std::optional<DType> dtype_from_id(uint32_t id);
const DTypeTraits& dtype_traits(DType t);
inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
// Parses "q4_k", "Q4_K", "f16", ... (case-insensitive).
std::optional<DType> dtype_from_name(std::string_view name);

// Bytes of one row of `n` elements; n must be a multiple of block_elems
// (check with row_size_ok first when n comes from a file).
inline bool row_size_ok(DType t, uint64_t n) { return n % dtype_traits(t).block_elems == 0; }
inline uint64_t row_size(DType t, uint64_t n) {
  const DTypeTraits& tr = dtype_traits(t);
  return n / tr.block_elems * tr.block_bytes;
}

}  // namespace minfer
