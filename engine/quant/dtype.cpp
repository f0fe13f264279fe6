// The DType table: names and block geometry, from ggml's type_traits
// (ggml/src/ggml.c) so that sizes agree with the files people download.
#include "engine/quant/dtype.h"

#include <array>
#include <cctype>
#include <string>

namespace minfer {
namespace {

struct Entry {
  DType type;
  DTypeTraits traits;
};

// block_bytes: ggml-common.h block structs (e.g. block_q4_K = 2*f16 + 12 + 128 = 144).
constexpr std::array<Entry, 16> kTable{{
    {DType::kF32, {"f32", 1, 4, false}},
    {DType::kF16, {"f16", 1, 2, false}},
    {DType::kQ4_0, {"q4_0", 32, 18, true}},
    {DType::kQ4_1, {"q4_1", 32, 20, true}},
    {DType::kQ5_0, {"q5_0", 32, 22, true}},
    {DType::kQ5_1, {"q5_1", 32, 24, true}},
    {DType::kQ8_0, {"q8_0", 32, 34, true}},
    {DType::kQ8_1, {"q8_1", 32, 36, true}},
    {DType::kQ4_K, {"q4_K", 256, 144, true}},
    {DType::kQ5_K, {"q5_K", 256, 176, true}},
    {DType::kQ6_K, {"q6_K", 256, 210, true}},
    {DType::kQ8_K, {"q8_K", 256, 292, true}},
    {DType::kI8, {"i8", 1, 1, false}},
    {DType::kI16, {"i16", 1, 2, false}},
    {DType::kI32, {"i32", 1, 4, false}},
    {DType::kBF16, {"bf16", 1, 2, false}},
}};

}  // namespace

std::optional<DType> dtype_from_id(uint32_t id) {
  for (const Entry& e : kTable) {
    if (static_cast<uint32_t>(e.type) == id) return e.type;
  }
  return std::nullopt;
}

const DTypeTraits& dtype_traits(DType t) {
  for (const Entry& e : kTable) {
    if (e.type == t) return e.traits;
  }
  // Every enumerator is in the table; reaching here means a cast from an
  // unchecked integer, which is a bug.
  static constexpr DTypeTraits kInvalid{"invalid", 1, 0, false};
  return kInvalid;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const Entry& e : kTable) {
    std::string n(e.traits.name);
    for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == lower) return e.type;
  }
  return std::nullopt;
}

}  // namespace minfer
