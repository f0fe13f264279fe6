// resolve_special_tokens (see special_tokens.h). The text lists are
// llama.cpp's (src/llama-vocab.cpp, load()); where llama.cpp takes "the first
// one found" while iterating a hash map, we take the first in list order so
// the result does not depend on hash order.
#include "engine/tokenizer/special_tokens.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string_view>

#include "platform/log.h"

namespace minfer {
namespace {

constexpr uint32_t kNoToken = 0xFFFFFFFF;  // what converters write for "none"

using TextList = std::initializer_list<std::string_view>;
const TextList kEotTexts = {"<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
                            "<|endoftext|>", "<EOT>",      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
const TextList kEomTexts = {"<|eom_id|>"};
// The FIM markers: Qwen2.5-Coder's, Refact's, StarCoder's, DeepSeek-Coder's, CodeLlama's.
const TextList kFimPreTexts = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                               "<PRE>", "\xE2\x96\x81<PRE>"};
const TextList kFimSufTexts = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                               "<SUF>", "\xE2\x96\x81<SUF>"};
const TextList kFimMidTexts = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                               "<MID>", "\xE2\x96\x81<MID>"};
const TextList kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<PAD>"};
const TextList kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>"};
const TextList kFimSepTexts = {"<|file_sep|>"};
const TextList kEogTexts = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>"};

class Resolver {
 public:
  Resolver(const std::vector<std::string>& pieces, std::vector<TokenType> types, const PieceIndex& index)
      : pieces_(pieces), types_(std::move(types)), index_(index) {}

  // A metadata id if present and in range, else `fallback` (llama.cpp keeps
  // its default on an out-of-range id, with a warning).
  std::optional<TokenId> id(const std::optional<uint32_t>& stored, std::optional<TokenId> fallback,
                            std::string_view what) const {
    if (fallback && *fallback >= static_cast<TokenId>(pieces_.size())) fallback.reset();
    if (!stored) return fallback;
    if (*stored < pieces_.size()) return static_cast<TokenId>(*stored);
    if (*stored != kNoToken)
      log::warn("tokenizer: {} token id {} is outside the vocabulary of {} tokens; ignoring it", what, *stored,
                pieces_.size());
    return fallback;
  }

  // The first token whose text is in `texts` (list order), made CONTROL.
  std::optional<TokenId> by_text(TextList texts) {
    for (std::string_view t : texts) {
      const int32_t found = index_.find(t);
      if (found >= 0) {
        make_control(found);
        return found;
      }
    }
    return std::nullopt;
  }
  // An explicit id, else the first token found by text.
  std::optional<TokenId> id_or_text(const std::optional<uint32_t>& stored, TextList texts, std::string_view what) {
    if (auto found = id(stored, std::nullopt, what)) return found;
    return by_text(texts);
  }
  void make_control(TokenId id) {
    TokenType& t = types_[static_cast<size_t>(id)];
    if (t != TokenType::kControl) {
      log::warn("tokenizer: control-looking token {} '{}' was not control-type; treating it as control (as llama.cpp)",
                id, pieces_[static_cast<size_t>(id)]);
      t = TokenType::kControl;
    }
  }
  std::vector<TokenType> take_types() { return std::move(types_); }
  const std::vector<TokenType>& types() const { return types_; }

 private:
  const std::vector<std::string>& pieces_;
  std::vector<TokenType> types_;
  const PieceIndex& index_;
};

bool contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

}  // namespace

SpecialSetup resolve_special_tokens(TokenizerKind kind, const Vocab& vocab, const std::vector<std::string>& pieces,
                                    std::vector<TokenType> types, const PieceIndex& index, bool pre_adds_bos) {
  SpecialSetup out;
  Resolver r(pieces, std::move(types), index);
  SpecialTokens& s = out.special;

  // Defaults by kind (llama.cpp). BPE has none: llama.cpp's 11/11 is a
  // leftover from Falcon's vocabulary and would make ',' the BOS of a Qwen
  // file without the key.
  std::optional<TokenId> bos, eos, unk, sep, pad;
  switch (kind) {
    case TokenizerKind::kSpm:
      bos = 1, eos = 2, unk = 0;
      s.add_bos = true;
      break;
    case TokenizerKind::kWordPiece:
      bos = 101, unk = 100, sep = 102, pad = 0;
      s.add_bos = true;
      s.add_eos = true;  // BERT input ends with [SEP]
      break;
    case TokenizerKind::kBpe:
      s.add_bos = pre_adds_bos;
      break;
  }
  s.bos = r.id(vocab.bos_id ? vocab.bos_id : vocab.cls_id, bos, "BOS");
  s.eos = r.id(vocab.eos_id, eos, "EOS");
  s.unk = r.id(vocab.unk_id, unk, "UNK");
  s.sep = r.id(vocab.sep_id, sep, "SEP");
  s.pad = r.id(vocab.pad_id, pad, "PAD");
  if (vocab.add_bos) s.add_bos = *vocab.add_bos;
  // WordPiece always closes with [SEP] in llama.cpp, whatever add_eos_token says.
  if (vocab.add_eos && kind != TokenizerKind::kWordPiece) s.add_eos = *vocab.add_eos;

  s.eot = r.id_or_text(vocab.eot_id, kEotTexts, "EOT");
  const std::optional<TokenId> eom = r.id_or_text(vocab.eom_id, kEomTexts, "EOM");
  s.fim_pre = r.id_or_text(vocab.fim_pre_id, kFimPreTexts, "FIM prefix");
  s.fim_suf = r.id_or_text(vocab.fim_suf_id, kFimSufTexts, "FIM suffix");
  s.fim_mid = r.id_or_text(vocab.fim_mid_id, kFimMidTexts, "FIM middle");
  const std::optional<TokenId> fim_pad = r.id_or_text(vocab.fim_pad_id, kFimPadTexts, "FIM pad");
  s.fim_rep = r.id_or_text(vocab.fim_rep_id, kFimRepTexts, "FIM repo");
  s.fim_sep = r.id_or_text(vocab.fim_sep_id, kFimSepTexts, "FIM separator");

  std::vector<TokenId>& eog = out.end_of_generation;
  for (const auto& id : {fim_pad, s.fim_rep, s.fim_sep, s.eos, s.eot, eom})
    if (id) eog.push_back(*id);
  for (std::string_view t : kEogTexts) {
    const int32_t found = index.find(t);
    if (found >= 0) {
      r.make_control(found);
      eog.push_back(found);
    }
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  if (s.add_bos && !s.bos) {
    log::warn("tokenizer: the vocabulary asks for BOS but has no BOS token; none will be added");
    s.add_bos = false;
  }
  const std::optional<TokenId>& end_token = kind == TokenizerKind::kWordPiece ? s.sep : s.eos;
  if (s.add_eos && !end_token) {
    log::warn("tokenizer: the vocabulary asks for an end token but has none; none will be added");
    s.add_eos = false;
  }

  // Strip attributes: llama.cpp sets them by model name, since GGUF files do
  // not carry them.
  std::string name = vocab.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const bool phi3 = contains(name, "phi-3") || contains(name, "phi3");
  const bool jina_v2 = contains(vocab.pre, "jina-v2-de") || contains(vocab.pre, "jina-v2-es") ||
                       contains(vocab.pre, "jina-v2-code");

  const std::vector<TokenType>& final_types = r.types();
  for (size_t id = 0; id < pieces.size(); ++id) {
    const TokenType t = final_types[id];
    const bool user = t == TokenType::kUserDefined;
    if (t != TokenType::kControl && t != TokenType::kUnknown && !user) continue;
    SpecialPartitioner::Entry e;
    e.id = static_cast<int32_t>(id);
    e.text = pieces[id];
    e.control = !user;
    if (phi3) {
      // Phi-3 eats the whitespace after its markers, except after these.
      e.rstrip = !(e.text == "<unk>" || e.text == "<s>" || e.text == "<|endoftext|>");
    }
    if (jina_v2 && e.text == "<mask>") e.lstrip = true;
    out.partition.push_back(std::move(e));
  }
  out.types = r.take_types();
  return out;
}

}  // namespace minfer
