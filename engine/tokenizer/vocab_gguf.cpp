// read_vocab: the `tokenizer.ggml.*` keys of a GGUF file into a Vocab.
// Only reading and type checks here; what the values mean (defaults, ranges,
// end-of-generation set) is decided in special_tokens.cpp.
#include <fmt/format.h>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/vocab.h"

namespace minfer {
namespace {

Status read_optional_id(const gguf::File& file, std::string_view key, std::optional<uint32_t>* out) {
  if (!file.has(key)) return ok_status();
  MINFER_ASSIGN_OR_RETURN(uint32_t id, file.get_u32(key));
  *out = id;
  return ok_status();
}

Status read_optional_bool(const gguf::File& file, std::string_view key, std::optional<bool>* out) {
  if (!file.has(key)) return ok_status();
  MINFER_ASSIGN_OR_RETURN(bool v, file.get_bool(key));
  *out = v;
  return ok_status();
}

}  // namespace

Expected<Vocab> read_vocab(const gguf::File& file) {
  Vocab v;
  MINFER_ASSIGN_OR_RETURN(v.model, file.get_string("tokenizer.ggml.model"));
  MINFER_ASSIGN_OR_RETURN(v.pre, file.get_string_or("tokenizer.ggml.pre", ""));
  MINFER_ASSIGN_OR_RETURN(v.name, file.get_string_or("general.name", ""));
  MINFER_ASSIGN_OR_RETURN(v.tokens, file.get_string_array("tokenizer.ggml.tokens"));
  const size_t n = v.tokens.size();

  if (file.has("tokenizer.ggml.scores")) {
    MINFER_ASSIGN_OR_RETURN(v.scores, file.get_f32_array("tokenizer.ggml.scores"));
    if (v.scores.size() != n)
      return unexpected(ErrorCode::kInvalidFile,
                        fmt::format("{}: tokenizer.ggml.scores has {} entries but tokenizer.ggml.tokens has {}",
                                    file.path(), v.scores.size(), n));
  }
  if (file.has("tokenizer.ggml.token_type")) {
    MINFER_ASSIGN_OR_RETURN(std::vector<int32_t> types, file.get_i32_array("tokenizer.ggml.token_type"));
    if (types.size() != n)
      return unexpected(ErrorCode::kInvalidFile,
                        fmt::format("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}",
                                    file.path(), types.size(), n));
    v.types.reserve(n);
    for (int32_t t : types) v.types.push_back(static_cast<TokenType>(t));
  }
  if (file.has("tokenizer.ggml.merges")) {
    MINFER_ASSIGN_OR_RETURN(v.merges, file.get_string_array("tokenizer.ggml.merges"));
  }

  const std::pair<std::string_view, std::optional<uint32_t>*> ids[] = {
      {"tokenizer.ggml.bos_token_id", &v.bos_id},
      {"tokenizer.ggml.eos_token_id", &v.eos_id},
      {"tokenizer.ggml.eot_token_id", &v.eot_id},
      {"tokenizer.ggml.eom_token_id", &v.eom_id},
      {"tokenizer.ggml.unknown_token_id", &v.unk_id},
      {"tokenizer.ggml.seperator_token_id", &v.sep_id},  // sic: the GGUF key is misspelt
      {"tokenizer.ggml.padding_token_id", &v.pad_id},
      {"tokenizer.ggml.cls_token_id", &v.cls_id},
      {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre_id},
      {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf_id},
      {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid_id},
      {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad_id},
      {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep_id},
      {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep_id},
  };
  for (const auto& [key, out] : ids) MINFER_TRY(read_optional_id(file, key, out));
  // The fill-in-the-middle markers' older keys (llama.cpp reads them too).
  const std::pair<std::string_view, std::optional<uint32_t>*> legacy[] = {
      {"tokenizer.ggml.prefix_token_id", &v.fim_pre_id},
      {"tokenizer.ggml.suffix_token_id", &v.fim_suf_id},
      {"tokenizer.ggml.middle_token_id", &v.fim_mid_id},
  };
  for (const auto& [key, out] : legacy) {
    if (!*out) MINFER_TRY(read_optional_id(file, key, out));
  }
  MINFER_TRY(read_optional_bool(file, "tokenizer.ggml.add_bos_token", &v.add_bos));
  MINFER_TRY(read_optional_bool(file, "tokenizer.ggml.add_eos_token", &v.add_eos));
  MINFER_TRY(read_optional_bool(file, "tokenizer.ggml.add_space_prefix", &v.add_space_prefix));
  return v;
}

}  // namespace minfer
