// Hand-written matchers for the two pre-tokenizer regexes on the hot path
// (GPT-2's and Llama-3/Qwen2's), as llama.cpp's
// unicode_regex_split_custom_gpt2/_llama3. They give the same pieces as the
// regexes (a test checks them against SplitRegex on random text) at a
// fraction of the cost.
//
// Same calling convention as SplitRegex::split: code points and their flags
// for the whole text, and the lengths of the pieces to split further.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace minfer {

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<size_t> split_gpt2(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                               const std::vector<size_t>& pieces);

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// max_digits is 3 for Llama-3 and 1 for Qwen2.
std::vector<size_t> split_llama3(const std::vector<uint32_t>& cpts, const std::vector<uint16_t>& flags,
                                 const std::vector<size_t>& pieces, int max_digits);

}  // namespace minfer
