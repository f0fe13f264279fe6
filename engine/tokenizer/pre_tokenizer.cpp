// Pre-tokenizer pipelines by `tokenizer.ggml.pre` name, as llama.cpp's
// llm_tokenizer_bpe lists them (src/llama-vocab.cpp). The regex strings are
// data from there; the hand-written matchers replace the two hot ones.
#include "engine/tokenizer/pre_tokenizer.h"

#include <fmt/format.h>

#include <array>

#include "engine/tokenizer/split_custom.h"
#include "engine/tokenizer/unicode.h"

namespace minfer {
namespace {

// DeepSeek-LLM's letter class: the cased letters (Lu/Ll/Lt) of its
// tokenizer.json, written as escapes because several of them (U+2126 OHM,
// U+212A KELVIN, U+1FBE, ...) are canonical singletons that text tools
// silently normalise away.
constexpr std::string_view kDeepseekLlmLetters =
    "\\s?["
    "A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF"
    "\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1"
    "\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5"
    "\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A"
    "\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D"
    "\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3"
    "\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115"
    "\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149"
    "\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D"
    "\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06"
    "\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943"
    "]+";
constexpr std::string_view kDeepseekLlmPunct = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr std::string_view kCjkRuns = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";

bool is_one_of(std::string_view name, std::initializer_list<std::string_view> names) {
  for (std::string_view n : names)
    if (name == n) return true;
  return false;
}

}  // namespace

Expected<PreTokenizer> PreTokenizer::from_regexes(const std::vector<std::string_view>& patterns) {
  PreTokenizer pre;
  for (std::string_view pattern : patterns) {
    if (pattern == kGpt2SplitRegex) {
      pre.steps_.push_back({StepKind::kGpt2});
    } else if (pattern == kLlama3SplitRegex) {
      pre.steps_.push_back({StepKind::kLlama3, 3});
    } else if (pattern == kQwen2SplitRegex) {
      pre.steps_.push_back({StepKind::kLlama3, 1});
    } else {
      MINFER_ASSIGN_OR_RETURN(SplitRegex re, SplitRegex::compile(pattern));
      pre.steps_.push_back({StepKind::kRegex, 0, std::move(re)});
    }
  }
  return pre;
}

Expected<PreTokenizer> PreTokenizer::for_name(std::string_view name) {
  Expected<PreTokenizer> pre = unexpected(ErrorCode::kInternal, "unset");
  bool llama3_family = false;
  if (name.empty() || name == "default") {
    pre = from_regexes({"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2SplitRegex, "\\p{N}+", "[0-9][0-9][0-9]"});
  } else if (is_one_of(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe"})) {
    pre = from_regexes({kLlama3SplitRegex});
    llama3_family = !is_one_of(name, {"dbrx", "smaug-bpe", "chatglm-bpe"});
  } else if (is_one_of(name, {"qwen2", "stablelm2", "megrez"})) {
    pre = from_regexes({kQwen2SplitRegex});
  } else if (name == "deepseek-llm") {
    pre = from_regexes({"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, "\\s+$", kCjkRuns, "\\p{N}+"});
  } else if (name == "deepseek-coder") {
    pre = from_regexes({"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjkRuns, "\\p{N}"});
  } else if (name == "falcon") {
    pre = from_regexes({"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2SplitRegex, "[0-9][0-9][0-9]"});
  } else if (is_one_of(name, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    pre = from_regexes({"\\p{N}", kGpt2SplitRegex});
  } else if (is_one_of(name, {"gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en",
                              "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe"})) {
    pre = from_regexes({kGpt2SplitRegex});
  } else {
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("unknown pre-tokenizer '{}' (tokenizer.ggml.pre); supported: default, gpt-2, mpt, "
                                  "llama-bpe, qwen2, deepseek-llm, deepseek-coder, falcon, starcoder, refact and "
                                  "their llama.cpp aliases",
                                  name));
  }
  if (pre) {
    pre->ignore_merges_ = llama3_family;
    pre->adds_bos_ = llama3_family;
  }
  return pre;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string> words;
  if (text.empty()) return words;
  const std::vector<uint32_t> cpts = unicode::decode_lenient(text);
  std::vector<uint16_t> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) flags[i] = unicode::flags(cpts[i]);

  std::vector<size_t> pieces{cpts.size()};
  for (const Step& step : steps_) {
    switch (step.kind) {
      case StepKind::kGpt2:
        pieces = split_gpt2(cpts, flags, pieces);
        break;
      case StepKind::kLlama3:
        pieces = split_llama3(cpts, flags, pieces, step.max_digits);
        break;
      case StepKind::kRegex:
        pieces = step.regex.split(cpts, flags, pieces);
        break;
    }
  }

  words.reserve(pieces.size());
  size_t begin = 0;
  for (size_t len : pieces) {
    std::string& word = words.emplace_back();
    for (size_t i = begin; i < begin + len; ++i) unicode::append_utf8(word, cpts[i]);
    begin += len;
  }
  return words;
}

}  // namespace minfer
