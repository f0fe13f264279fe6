// The tokenizer's data as a GGUF file stores it (`tokenizer.ggml.*`), read
// into plain vectors. Tokenizer::from_vocab builds a tokenizer from it, so
// tests and converters need no GGUF file; read_vocab fills it from one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/common/expected.h"

namespace minfer::gguf {
class File;
}

namespace minfer {

enum class TokenType : int32_t;

struct Vocab {
  std::string model;   // tokenizer.ggml.model: "llama" | "gpt2" | "bert"
  std::string pre;     // tokenizer.ggml.pre; empty when absent
  std::string name;    // general.name (llama.cpp keys Phi-3's token attributes on it)
  std::vector<std::string> tokens;
  std::vector<float> scores;      // empty: all 0
  std::vector<TokenType> types;   // empty: all normal
  std::vector<std::string> merges;  // "left right", rank = index

  // Special token ids exactly as stored (absent: nullopt; out-of-range values
  // such as 0xFFFFFFFF are kept here and judged when the tokenizer is built).
  std::optional<uint32_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, cls_id;
  std::optional<uint32_t> fim_pre_id, fim_suf_id, fim_mid_id, fim_pad_id, fim_rep_id, fim_sep_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Reads the tokenizer keys; errors name the key and what was wrong with it.
Expected<Vocab> read_vocab(const gguf::File& file);

}  // namespace minfer
