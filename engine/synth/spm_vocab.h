// A synthetic SentencePiece ("llama") vocabulary of any size >= 259, usable to
// tokenize ASCII text: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>
// (byte fallback: any text encodes), then pieces with decreasing scores:
// "▁", every printable ASCII character alone and after "▁", common English
// words with all their prefixes (so SentencePiece's pairwise merges can
// reach the whole word), then lowercase letter strings of growing length as
// deterministic filler.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace minfer::synth {

inline constexpr int kSpmSpecialTokens = 3;                       // <unk>, <s>, </s>
inline constexpr int kSpmMinVocab = kSpmSpecialTokens + 256;       // and the byte tokens

struct SpmVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // GGUF token types: 1 normal, 2 unknown, 3 control, 6 byte
};

// vocab_size must be at least kSpmMinVocab.
Expected<SpmVocab> synthetic_spm_vocab(int vocab_size);

// Sets the tokenizer.ggml.* keys as convert_hf_to_gguf.py's
// _set_vocab_sentencepiece does (model "llama", pre "default", BOS 1, EOS 2,
// UNK 0, add BOS, no EOS).
Status write_spm_vocab(const SpmVocab& vocab, gguf::Writer& w);

}  // namespace minfer::synth
