// Unicode helpers over the generated tables (unicode_data.cpp).
//
// Lookups are binary searches over a few thousand ranges, with a table for
// ASCII in front: tokenizer input is mostly ASCII, and a 2,000-token prompt
// costs a few thousand lookups at most.
#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "engine/tokenizer/unicode_data.h"

namespace minfer::unicode {
namespace {

using unicode_data::kFlagRangeCount;
using unicode_data::kFlagRanges;

uint16_t flags_slow(uint32_t cpt) {
  const auto* end = kFlagRanges + kFlagRangeCount;
  const auto* it = std::upper_bound(kFlagRanges, end, cpt,
                                    [](uint32_t c, const unicode_data::FlagRange& r) { return c < r.first; });
  return (it - 1)->flags;  // kFlagRanges[0].first == 0, so it > begin
}

const std::array<uint16_t, 128>& ascii_flags() {
  static const std::array<uint16_t, 128> table = [] {
    std::array<uint16_t, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = flags_slow(c);
    return t;
  }();
  return table;
}

// Length of the well-formed sequence at `pos` (1..4); 0 when malformed;
// -(bytes present) when it is a well-formed prefix cut short by the end.
int well_formed_at(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return 1;
  int need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (int i = 1; i <= need; ++i) {
    if (pos + static_cast<size_t>(i) >= s.size()) return -i;
    const auto b = static_cast<uint8_t>(s[pos + static_cast<size_t>(i)]);
    const uint8_t min = i == 1 ? lo : 0x80;
    const uint8_t max = i == 1 ? hi : 0xBF;
    if (b < min || b > max) return 0;
  }
  return need + 1;
}

}  // namespace

uint16_t flags(uint32_t cpt) {
  if (cpt < 128) return ascii_flags()[cpt];
  if (cpt > kMaxCodepoint) return 0;
  return flags_slow(cpt);
}

uint32_t to_lower(uint32_t cpt) {
  if (cpt < 128) return (cpt >= 'A' && cpt <= 'Z') ? cpt + 32 : cpt;
  const auto* begin = unicode_data::kLowercase;
  const auto* end = begin + unicode_data::kLowercaseCount;
  const auto* it =
      std::lower_bound(begin, end, cpt, [](const unicode_data::CodepointPair& p, uint32_t c) { return p.from < c; });
  return (it != end && it->from == cpt) ? it->to : cpt;
}

uint32_t nfd_first(uint32_t cpt) {
  if (cpt < 0xC0) return cpt;  // nothing below U+00C0 decomposes
  const auto* begin = unicode_data::kNfdFirst;
  const auto* end = begin + unicode_data::kNfdFirstCount;
  const auto* it =
      std::upper_bound(begin, end, cpt, [](uint32_t c, const unicode_data::NfdRange& r) { return c < r.first; });
  if (it == begin) return cpt;
  --it;
  return cpt <= it->last ? it->nfd : cpt;
}

const char* version() { return unicode_data::kUnicodeVersion; }

uint32_t decode_one_lenient(std::string_view s, size_t* offset) {
  const size_t i = *offset;
  const auto b0 = static_cast<uint8_t>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80; };
  auto bits = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k]) & 0x3F); };
  if (!(b0 & 0x80)) {
    *offset = i + 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0 && cont(1)) {
    *offset = i + 2;
    return (static_cast<uint32_t>(b0 & 0x1F) << 6) | bits(1);
  }
  if ((b0 & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    *offset = i + 3;
    return (static_cast<uint32_t>(b0 & 0x0F) << 12) | (bits(1) << 6) | bits(2);
  }
  if ((b0 & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    *offset = i + 4;
    return (static_cast<uint32_t>(b0 & 0x07) << 18) | (bits(1) << 12) | (bits(2) << 6) | bits(3);
  }
  *offset = i + 1;
  return kReplacement;
}

std::vector<uint32_t> decode_lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) out.push_back(decode_one_lenient(text, &offset));
  return out;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt > kMaxCodepoint) cpt = kReplacement;
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

size_t valid_utf8_prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int n = well_formed_at(bytes, pos);
    if (n <= 0) break;
    pos += static_cast<size_t>(n);
  }
  return pos;
}

size_t incomplete_utf8_suffix(std::string_view bytes) {
  const size_t max_back = std::min<size_t>(3, bytes.size());
  for (size_t back = 1; back <= max_back; ++back) {
    const size_t pos = bytes.size() - back;
    const auto b = static_cast<uint8_t>(bytes[pos]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: the lead is further back
    return well_formed_at(bytes, pos) < 0 ? back : 0;
  }
  return 0;
}

bool is_valid_utf8(std::string_view bytes) { return valid_utf8_prefix(bytes) == bytes.size(); }

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int n = well_formed_at(bytes, pos);
    if (n > 0) {
      out.append(bytes.substr(pos, static_cast<size_t>(n)));
      pos += static_cast<size_t>(n);
    } else {
      append_utf8(out, kReplacement);
      ++pos;
    }
  }
  return out;
}

}  // namespace minfer::unicode
