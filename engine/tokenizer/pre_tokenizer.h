// The byte-level BPE pre-tokenizer: splits text into the words that BPE
// merges within, by the pipeline of regexes that `tokenizer.ggml.pre` names
// (llama.cpp's llm_tokenizer_bpe constructor is the list of record). Each
// regex of a pipeline splits every piece the previous one produced.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"
#include "engine/tokenizer/split_regex.h"

namespace minfer {

// The regexes with hand-written matchers (split_custom.h), as llama.cpp
// writes them (std::regex has no (?i:...), hence the [sS] spelling).
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
inline constexpr std::string_view kLlama3SplitRegex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2SplitRegex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class PreTokenizer {
 public:
  // Known names: default, gpt-2, mpt, llama-bpe (llama3, llama-v3, falcon3),
  // qwen2, deepseek-llm, deepseek-coder, falcon, starcoder, refact and the
  // aliases llama.cpp maps to the same pipelines. Others: kUnsupported.
  static Expected<PreTokenizer> for_name(std::string_view pre);

  // The words of `text`, as raw bytes. Bytes that are not UTF-8 become
  // U+FFFD first, as in llama.cpp.
  std::vector<std::string> split(std::string_view text) const;

  // True for the Llama-3 family: a word that is a whole vocabulary entry is
  // taken as is, without merges (llama.cpp's ignore_merges).
  bool ignore_merges() const { return ignore_merges_; }
  // llama.cpp turns add_bos_token on by default for these pre-tokenizers.
  bool adds_bos_by_default() const { return adds_bos_; }

 private:
  enum class StepKind { kGpt2, kLlama3, kRegex };
  struct Step {
    StepKind kind;
    int max_digits = 0;   // kLlama3
    SplitRegex regex;     // kRegex
  };
  static Expected<PreTokenizer> from_regexes(const std::vector<std::string_view>& patterns);

  std::vector<Step> steps_;
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace minfer
