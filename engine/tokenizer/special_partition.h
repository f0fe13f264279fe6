// Splits input text around the special tokens written in it, before the
// tokenizer proper runs on the plain runs between them (llama.cpp's
// tokenizer_st_partition).
//
// Order of precedence is llama.cpp's: tokens are applied longest first (ties:
// lower id first), each claiming every occurrence left in the plain runs. A
// trie pass first finds which special tokens occur at all, so a vocabulary
// with thousands of user-defined tokens costs one scan of the text rather
// than one search per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace minfer {

class SpecialPartitioner {
 public:
  struct Entry {
    int32_t id = 0;
    std::string text;
    bool control = false;  // control/unknown: recognised only with parse_special
    bool lstrip = false;   // eat the whitespace before it
    bool rstrip = false;   // eat the whitespace after it
  };
  struct Fragment {
    bool is_token = false;
    int32_t id = -1;    // is_token
    size_t offset = 0;  // !is_token: the run of `text`
    size_t length = 0;
  };

  void build(std::vector<Entry> entries);
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 private:
  // Entries (in precedence order) that occur in `text`.
  std::vector<size_t> occurring(std::string_view text, bool parse_special) const;
  void split_runs(std::string_view text, const Entry& e, std::vector<Fragment>& frags) const;

  std::vector<Entry> entries_;
  // Trie over the entries' texts: node 0 is the root.
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) → child
  std::vector<int32_t> terminal_;                // node → entry index, or -1
};

}  // namespace minfer
