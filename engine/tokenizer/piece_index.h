// Text → token id lookup over a vocabulary, without copying the strings: an
// open-addressing table of ids, compared against the pieces they name.
// Lookups take string_views, so tokenizers probe substrings of their input
// with no allocation (SPM probes every candidate bigram).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class PieceIndex {
 public:
  // Indexes `pieces`, which must outlive this object and not change. When a
  // text occurs twice the later id wins, as in llama.cpp's token_to_id map.
  void build(const std::vector<std::string>& pieces);
  // The id of `text`, or -1.
  int32_t find(std::string_view text) const;

 private:
  const std::vector<std::string>* pieces_ = nullptr;
  std::vector<int32_t> slots_;  // -1 = empty; size is a power of two
  size_t mask_ = 0;
};

}  // namespace minfer
