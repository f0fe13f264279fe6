// Type choice. The Q4_K_M rules are llama.cpp's src/llama-quant.cpp
// (llama_tensor_get_type), reduced to what applies to llama / qwen2 / qwen3
// without experts or an importance matrix:
//
//   default                      Q4_K
//   output.weight, or token_embd.weight when there is no output.weight:
//                                Q6_K, or Q8_0 if ne[0] % 256 != 0
//   attn_v.weight, ffn_down:     Q6_K where use_more_bits(layer, n_layers)
//   then, if ne[0] is not a multiple of the chosen type's block (the
//   "convert_incompatible_tensor" fallback): Q4_K -> Q5_0, Q5_K -> Q5_1,
//   Q6_K -> Q8_0, and F16 if even that block does not divide ne[0].
//
// use_more_bits: the first and last eighth of the layers and every third
// layer in between. llama.cpp counts attn_v/ffn_down tensors in name order
// with layer-numeric sorting (weight_name_comparer), so the count equals the
// block index used here.
#include "engine/synth/recipe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace minfer::synth {
namespace {

constexpr DType kUniformTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                   DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                   DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool fits(DType t, uint64_t ne0) { return row_size_ok(t, ne0); }

DType q4_k_m_type(const PlannedTensor& t, int n_layers, bool has_output) {
  const uint64_t ne0 = t.ne[0];
  DType type = DType::kQ4_K;
  if (t.name == "output.weight" || (!has_output && t.name == "token_embd.weight")) {
    type = fits(DType::kQ4_K, ne0) ? DType::kQ6_K : DType::kQ8_0;
  } else if (ends_with(t.name, "attn_v.weight") || t.name.find("ffn_down") != std::string::npos) {
    if (use_more_bits(t.layer, n_layers)) type = DType::kQ6_K;
  }
  if (!fits(type, ne0)) {
    switch (type) {
      case DType::kQ4_K: type = DType::kQ5_0; break;
      case DType::kQ5_K: type = DType::kQ5_1; break;
      case DType::kQ6_K: type = DType::kQ8_0; break;
      default: break;
    }
    if (!fits(type, ne0)) type = DType::kF16;
  }
  return type;
}

}  // namespace

Expected<TypeSpec> parse_type_spec(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "q4_k_m") return TypeSpec{TypeSpec::Kind::kQ4KM, DType::kQ4_K};
  if (const std::optional<DType> t = dtype_from_name(lower)) {
    if (std::find(std::begin(kUniformTypes), std::end(kUniformTypes), *t) != std::end(kUniformTypes)) {
      return TypeSpec{TypeSpec::Kind::kUniform, *t};
    }
  }
  std::string known;
  for (DType t : kUniformTypes) known += std::string(dtype_name(t)) + ", ";
  return Error(ErrorCode::kInvalidArgument, fmt::format("unknown type '{}'; known: {}q4_k_m", name, known));
}

uint32_t llama_file_type(const TypeSpec& spec) {
  if (spec.kind == TypeSpec::Kind::kQ4KM) return 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
  switch (spec.uniform) {
    case DType::kF32: return 0;    // LLAMA_FTYPE_ALL_F32
    case DType::kF16: return 1;    // MOSTLY_F16
    case DType::kQ4_0: return 2;   // MOSTLY_Q4_0
    case DType::kQ4_1: return 3;   // MOSTLY_Q4_1
    case DType::kQ8_0: return 7;   // MOSTLY_Q8_0
    case DType::kQ5_0: return 8;   // MOSTLY_Q5_0
    case DType::kQ5_1: return 9;   // MOSTLY_Q5_1
    // No "all Q4_K" ftype exists; these are what llama.cpp's loader guesses
    // for a file whose most common type is Q4_K / Q5_K / Q6_K
    // (llama-model-loader.cpp: Q4_K -> Q4_K_M, Q5_K -> Q5_K_M, Q6_K -> Q6_K).
    case DType::kQ4_K: return 15;  // MOSTLY_Q4_K_M
    case DType::kQ5_K: return 17;  // MOSTLY_Q5_K_M
    case DType::kQ6_K: return 18;  // MOSTLY_Q6_K
    case DType::kBF16: return 32;  // MOSTLY_BF16
    default: return 0;             // parse_type_spec admits no other type
  }
}

Status assign_types(const TypeSpec& spec, int n_layers, std::vector<PlannedTensor>& tensors) {
  const bool has_output =
      std::any_of(tensors.begin(), tensors.end(), [](const PlannedTensor& t) { return t.name == "output.weight"; });
  for (PlannedTensor& t : tensors) {
    if (t.role != TensorRole::kWeight) {
      t.type = DType::kF32;
      continue;
    }
    if (spec.kind == TypeSpec::Kind::kQ4KM) {
      t.type = q4_k_m_type(t, n_layers, has_output);
      continue;
    }
    if (!fits(spec.uniform, t.ne[0])) {
      const DTypeTraits& tr = dtype_traits(spec.uniform);
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("type {}: tensor '{}' has rows of {} values, not a multiple of {}'s block of {}; "
                               "choose a type with 32-value blocks (q8_0, q4_0, ...) or q4_k_m, which falls back "
                               "per tensor as llama.cpp does",
                               tr.name, t.name, t.ne[0], tr.name, tr.block_elems));
    }
    t.type = spec.uniform;
  }
  return ok_status();
}

}  // namespace minfer::synth
