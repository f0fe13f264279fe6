// GPT-2 byte ↔ code point tables, built once.
#include "engine/tokenizer/byte_level.h"

#include <array>

#include "engine/tokenizer/unicode.h"

namespace minfer::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cpt{};
  std::array<int16_t, 512> to_byte{};  // every code point of the alphabet is below U+0144
};

const Tables& tables() {
  static const Tables t = [] {
    Tables tb;
    tb.to_byte.fill(-1);
    auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cpt = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + next++);
      tb.to_cpt[static_cast<size_t>(b)] = cpt;
      tb.to_byte[cpt] = static_cast<int16_t>(b);
    }
    return tb;
  }();
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t byte) { return tables().to_cpt[byte]; }

int codepoint_to_byte(uint32_t cpt) { return cpt < 512 ? tables().to_byte[cpt] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(out, byte_to_codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t start = offset;
    const uint32_t cpt = unicode::decode_one_lenient(text, &offset);
    const int byte = codepoint_to_byte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(start, offset - start));
    }
  }
  return out;
}

}  // namespace minfer::byte_level
