// The synthetic SentencePiece vocabulary. Scores follow llama's convention
// (0 for special and byte tokens, then -rank), so common pieces merge first.
#include "engine/synth/spm_vocab.h"

#include <fmt/format.h>

#include <unordered_set>

namespace minfer::synth {
namespace {

constexpr const char* kSpace = "\xe2\x96\x81";  // U+2581 "▁": SentencePiece's space

constexpr int32_t kTypeNormal = 1;
constexpr int32_t kTypeUnknown = 2;
constexpr int32_t kTypeControl = 3;
constexpr int32_t kTypeByte = 6;

// Frequent English words (roughly by frequency), so that ordinary text
// tokenizes into word pieces rather than single letters.
constexpr const char* kWords[] = {
    "the",   "of",    "and",   "to",    "a",     "in",    "is",    "it",    "you",   "that",  "he",    "was",
    "for",   "on",    "are",   "with",  "as",    "I",     "his",   "they",  "be",    "at",    "one",   "have",
    "this",  "from",  "or",    "had",   "by",    "hot",   "but",   "some",  "what",  "there", "we",    "can",
    "out",   "other", "were",  "all",   "your",  "when",  "up",    "use",   "word",  "how",   "said",  "an",
    "each",  "she",   "which", "do",    "their", "time",  "if",    "will",  "way",   "about", "many",  "then",
    "them",  "would", "write", "like",  "so",    "these", "her",   "long",  "make",  "thing", "see",   "him",
    "two",   "has",   "look",  "more",  "day",   "could", "go",    "come",  "did",   "my",    "sound", "no",
    "most",  "number", "who",  "over",  "know",  "water", "than",  "call",  "first", "people", "may",  "down",
    "side",  "been",  "now",   "find",  "any",   "new",   "work",  "part",  "take",  "get",   "place", "made",
    "live",  "where", "after", "back",  "little", "only", "round", "man",   "year",  "came",  "show",  "every",
    "good",  "me",    "give",  "our",   "under", "name",  "very",  "through", "just", "form", "much",  "great",
    "think", "say",   "help",  "low",   "line",  "before", "turn", "cause", "same",  "mean",  "differ", "move",
    "right", "boy",   "old",   "too",   "does",  "tell",  "sentence", "set", "three", "want", "air",   "well",
    "also",  "play",  "small", "end",   "put",   "home",  "read",  "hand",  "port",  "large", "spell", "add",
    "even",  "land",  "here",  "must",  "big",   "high",  "such",  "follow", "act",  "why",   "ask",   "men",
    "change", "went", "light", "kind",  "off",   "need",  "house", "picture", "try", "us",    "again", "animal",
    "point", "mother", "world", "near", "build", "self",  "earth", "father", "Hello", "The",  "Once",  "upon",
    "story", "model", "token", "text",  "hello", "yes",   "once",  "happy", "friend", "school",
};

struct Builder {
  SpmVocab v;
  std::unordered_set<std::string> seen;
  size_t limit;

  bool full() const { return v.tokens.size() >= limit; }
  void add(std::string piece, float score, int32_t type) {
    if (full() || !seen.insert(piece).second) return;
    v.tokens.push_back(std::move(piece));
    v.scores.push_back(score);
    v.types.push_back(type);
  }
  void add_normal(const std::string& piece) {
    add(piece, static_cast<float>(kSpmMinVocab) - static_cast<float>(v.tokens.size()), kTypeNormal);
  }
  void add_with_space(const std::string& piece) {
    add_normal(kSpace + piece);
    add_normal(piece);
  }
};

}  // namespace

Expected<SpmVocab> synthetic_spm_vocab(int vocab_size) {
  if (vocab_size < kSpmMinVocab) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("a synthetic SentencePiece vocabulary needs at least {} tokens (3 special + 256 bytes), "
                             "asked for {}",
                             kSpmMinVocab, vocab_size));
  }
  Builder b;
  b.limit = static_cast<size_t>(vocab_size);
  b.v.tokens.reserve(b.limit);
  b.v.scores.reserve(b.limit);
  b.v.types.reserve(b.limit);
  b.add("<unk>", 0.0f, kTypeUnknown);
  b.add("<s>", 0.0f, kTypeControl);
  b.add("</s>", 0.0f, kTypeControl);
  for (int byte = 0; byte < 256; ++byte) b.add(fmt::format("<0x{:02X}>", byte), 0.0f, kTypeByte);

  b.add_normal(kSpace);
  for (char c = '!'; c <= '~'; ++c) b.add_with_space(std::string(1, c));
  for (const char* word : kWords) {
    const std::string w(word);
    for (size_t n = 2; n <= w.size(); ++n) b.add_with_space(w.substr(0, n));
  }
  // Filler: "aa", "ab", ..., "zz", "aaa", ... (odometer order), each with and
  // without the space mark, until the vocabulary is full. 26^k grows fast
  // enough that the length never passes 5 for any real vocabulary size.
  for (size_t len = 2; !b.full(); ++len) {
    std::string s(len, 'a');
    while (!b.full()) {
      b.add_with_space(s);
      size_t i = len;
      while (i > 0 && s[i - 1] == 'z') s[--i] = 'a';
      if (i == 0) break;
      ++s[i - 1];
    }
  }
  return std::move(b.v);
}

Status write_spm_vocab(const SpmVocab& vocab, gguf::Writer& w) {
  using gguf::Value;
  MINFER_TRY(w.set("tokenizer.ggml.model", Value::string("llama")));
  MINFER_TRY(w.set("tokenizer.ggml.pre", Value::string("default")));
  MINFER_TRY(w.set("tokenizer.ggml.tokens", Value::string_array(vocab.tokens)));
  MINFER_TRY(w.set("tokenizer.ggml.scores", Value::f32_array(vocab.scores)));
  MINFER_TRY(w.set("tokenizer.ggml.token_type", Value::i32_array(vocab.types)));
  MINFER_TRY(w.set("tokenizer.ggml.bos_token_id", Value::u32(1)));
  MINFER_TRY(w.set("tokenizer.ggml.eos_token_id", Value::u32(2)));
  MINFER_TRY(w.set("tokenizer.ggml.unknown_token_id", Value::u32(0)));
  MINFER_TRY(w.set("tokenizer.ggml.add_bos_token", Value::boolean(true)));
  MINFER_TRY(w.set("tokenizer.ggml.add_eos_token", Value::boolean(false)));
  return ok_status();
}

}  // namespace minfer::synth
