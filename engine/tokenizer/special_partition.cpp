// SpecialPartitioner (see special_partition.h).
#include "engine/tokenizer/special_partition.h"

#include <algorithm>

namespace minfer {
namespace {

// llama.cpp strips with isspace() in the C locale.
bool is_c_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

}  // namespace

void SpecialPartitioner::build(std::vector<Entry> entries) {
  std::erase_if(entries, [](const Entry& e) { return e.text.empty(); });
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.text.size() != b.text.size()) return a.text.size() > b.text.size();
    return a.id < b.id;
  });
  entries_ = std::move(entries);
  edges_.clear();
  terminal_.assign(1, -1);
  for (size_t i = 0; i < entries_.size(); ++i) {
    int32_t node = 0;
    for (char c : entries_[i].text) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = edges_.try_emplace(key, static_cast<int32_t>(terminal_.size()));
      if (inserted) terminal_.push_back(-1);
      node = it->second;
    }
    // Same text twice: the entry first in precedence claims every occurrence.
    if (terminal_[static_cast<size_t>(node)] < 0) terminal_[static_cast<size_t>(node)] = static_cast<int32_t>(i);
  }
}

std::vector<size_t> SpecialPartitioner::occurring(std::string_view text, bool parse_special) const {
  std::vector<size_t> found;
  if (entries_.empty()) return found;
  std::vector<bool> seen(entries_.size(), false);
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[j]));
      if (it == edges_.end()) break;
      node = it->second;
      const int32_t e = terminal_[static_cast<size_t>(node)];
      if (e >= 0 && !seen[static_cast<size_t>(e)] && (parse_special || !entries_[static_cast<size_t>(e)].control)) {
        seen[static_cast<size_t>(e)] = true;
        found.push_back(static_cast<size_t>(e));
      }
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

void SpecialPartitioner::split_runs(std::string_view text, const Entry& e, std::vector<Fragment>& frags) const {
  std::vector<Fragment> out;
  out.reserve(frags.size() + 2);
  for (const Fragment& f : frags) {
    if (f.is_token) {
      out.push_back(f);
      continue;
    }
    size_t off = f.offset;
    size_t len = f.length;
    while (len > 0) {
      const size_t m = text.find(e.text, off);
      if (m == std::string_view::npos || m + e.text.size() > off + len) {
        out.push_back({false, -1, off, len});
        break;
      }
      size_t left = m - off;
      if (e.lstrip)
        while (left > 0 && is_c_space(text[off + left - 1])) --left;
      if (left > 0) out.push_back({false, -1, off, left});
      out.push_back({true, e.id, 0, 0});
      size_t right_off = m + e.text.size();
      size_t right_len = off + len - right_off;
      if (e.rstrip)
        while (right_len > 0 && is_c_space(text[right_off])) ++right_off, --right_len;
      off = right_off;
      len = right_len;
    }
  }
  frags = std::move(out);
}

std::vector<SpecialPartitioner::Fragment> SpecialPartitioner::partition(std::string_view text,
                                                                        bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back({false, -1, 0, text.size()});
  for (size_t e : occurring(text, parse_special)) split_runs(text, entries_[e], frags);
  return frags;
}

}  // namespace minfer
