// StreamDecoder: holds back the bytes of a character that is not complete
// yet, emits everything before it, and replaces bytes that can never start or
// continue a character with U+FFFD so every chunk is valid UTF-8.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode.h"

namespace minfer {

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool render_special) : tok_(tok), render_special_(render_special) {}

void StreamDecoder::follow(std::span<const TokenId> before) {
  for (TokenId id : before) {
    if (!tok_.token_bytes(id, render_special_).empty()) {
      first_ = false;
      return;
    }
  }
}

std::string StreamDecoder::push(TokenId id) {
  std::string bytes = tok_.token_bytes(id, render_special_);
  if (first_ && !bytes.empty()) {
    // Same rule as Tokenizer::decode: the first non-empty piece of the text
    // loses the space the encoder put in front of it.
    if (tok_.strips_leading_space() && bytes[0] == ' ') bytes.erase(0, 1);
    first_ = false;
  }
  pending_ += bytes;
  const size_t ready = pending_.size() - unicode::incomplete_utf8_suffix(pending_);
  std::string out = unicode::sanitize_utf8(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) unicode::append_utf8(out, unicode::kReplacement);  // only a cut-off character is left
  pending_.clear();
  return out;
}

}  // namespace minfer
