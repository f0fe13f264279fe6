// import_hf_tokenizer: a Hugging Face tokenizer.json (byte-level BPE) into
// GGUF `gpt2` tokenizer keys, following llama.cpp's convert_hf_to_gguf.py
// (get_vocab_base, does_token_look_special) and gguf-py's SpecialVocab.
//
// The pre-tokenizer name is chosen from the split regex itself; llama.cpp
// hashes a tokenization instead, which needs the Python tokenizer at hand.
#include "engine/tokenizer/hf_import.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace minfer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// The split regexes as Hugging Face tokenizer.json files write them.
constexpr std::string_view kQwen2HfRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3HfRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2HfRegex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Expected<json> read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unexpected(ErrorCode::kIo, fmt::format("cannot open '{}'", path.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  json j = json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return unexpected(ErrorCode::kInvalidFile, fmt::format("'{}' is not valid JSON", path.string()));
  return j;
}

// The pre-tokenizer name for the tokenizer.json "pre_tokenizer" object.
Expected<std::string> choose_pre(const json& pre, const std::string& path) {
  std::optional<std::string> regex;
  bool byte_level = false;
  auto visit = [&](const json& p) {
    const std::string type = p.value("type", "");
    if (type == "ByteLevel") {
      byte_level = true;
      if (p.value("use_regex", true)) regex = std::string(kGpt2HfRegex);
    } else if (type == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      regex = p["pattern"]["Regex"].get<std::string>();
    }
  };
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    for (const json& p : pre.value("pretokenizers", json::array())) visit(p);
  } else if (pre.is_object()) {
    visit(pre);
  }
  if (!byte_level)
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: pre_tokenizer has no ByteLevel step; only byte-level BPE is supported", path));
  if (!regex)
    return unexpected(ErrorCode::kUnsupported, fmt::format("{}: pre_tokenizer has no split regex", path));
  if (*regex == kQwen2HfRegex) return std::string("qwen2");
  if (*regex == kLlama3HfRegex) return std::string("llama-bpe");
  if (*regex == kGpt2HfRegex) return std::string("gpt-2");
  return unexpected(ErrorCode::kUnsupported,
                    fmt::format("{}: pre-tokenizer regex '{}' is not one we know (Qwen2, Llama-3 or GPT-2)", path,
                                *regex));
}

// convert_hf_to_gguf.py's does_token_look_special.
bool looks_special(const std::string& t) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return t.size() >= open.size() + close.size() && t.compare(0, open.size(), open) == 0 &&
           t.compare(t.size() - close.size(), close.size(), close) == 0;
  };
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" || wrapped("<|", "|>") ||
         wrapped("<\xEF\xBD\x9C", "\xEF\xBD\x9C>") || wrapped("<unused", ">");
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

// A tokenizer_config.json "*_token" entry: a string or {"content": ...}.
std::optional<std::string> token_text(const json& config, const std::string& key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::optional<std::string> chat_template_of(const json& config, const fs::path& dir) {
  if (config.contains("chat_template")) {
    const json& t = config["chat_template"];
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
      for (const json& e : t)
        if (e.value("name", "") == "default" && e.contains("template")) return e["template"].get<std::string>();
    }
  }
  std::ifstream in(dir / "chat_template.jinja", std::ios::binary);  // newer repositories keep it apart
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

}  // namespace

Expected<HfImportResult> import_hf_tokenizer(const std::string& tokenizer_json_path, int32_t pad_to,
                                             gguf::Writer& writer) {
  MINFER_ASSIGN_OR_RETURN(json tj, read_json(tokenizer_json_path));
  const fs::path dir = fs::path(tokenizer_json_path).parent_path();
  json config = json::object();
  if (fs::exists(dir / "tokenizer_config.json")) {
    MINFER_ASSIGN_OR_RETURN(config, read_json(dir / "tokenizer_config.json"));
  }
  json model_config = json::object();
  if (fs::exists(dir / "config.json")) {
    MINFER_ASSIGN_OR_RETURN(model_config, read_json(dir / "config.json"));
  }

  if (!tj.contains("model") || tj["model"].value("type", "") != "BPE")
    return unexpected(ErrorCode::kUnsupported,
                      fmt::format("{}: model.type is not BPE; only byte-level BPE tokenizers are imported",
                                  tokenizer_json_path));
  const json& model = tj["model"];
  MINFER_ASSIGN_OR_RETURN(std::string pre, choose_pre(tj.value("pre_tokenizer", json()), tokenizer_json_path));

  // id → (text, type)
  std::map<int64_t, std::pair<std::string, TokenType>> by_id;
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: model.vocab is missing", tokenizer_json_path));
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: vocab entry '{}' has a bad id", tokenizer_json_path,
                                                             text));
    by_id[id.get<int64_t>()] = {text, TokenType::kNormal};
  }
  std::map<std::string, int64_t> added_ids;
  for (const json& a : tj.value("added_tokens", json::array())) {
    const int64_t id = a.value("id", int64_t{-1});
    std::string text = a.value("content", "");
    if (id < 0 || text.empty())
      return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: bad added token", tokenizer_json_path));
    added_ids[text] = id;
    if (a.value("special", false) || looks_special(text)) {
      by_id[id] = {text, TokenType::kControl};
    } else {
      by_id[id] = {replace_all(text, "\xE2\x96\x81", " "), TokenType::kUserDefined};  // pre-normalised spaces
    }
  }
  if (by_id.empty()) return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: empty vocabulary", tokenizer_json_path));
  const int64_t needed = by_id.rbegin()->first + 1;
  if (pad_to > 0 && pad_to < needed)
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("{}: the tokenizer has ids up to {} but the model has only {} embedding rows",
                                  tokenizer_json_path, needed - 1, pad_to));
  const int64_t n = std::max<int64_t>(needed, pad_to);

  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(n));
  types.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens.push_back(fmt::format("[PAD{}]", i));
      types.push_back(static_cast<int32_t>(TokenType::kUnused));
    } else {
      tokens.push_back(it->second.first);
      types.push_back(static_cast<int32_t>(it->second.second));
    }
  }

  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      // The pair form exists so that merge halves may hold spaces; GGUF's
      // "left right" strings cannot, so gguf-py writes a space inside a half
      // as U+0120 ('Ġ', the byte-level spelling of a space). Same here.
      merges.push_back(replace_all(m[0].get<std::string>(), " ", "\xC4\xA0") + " " +
                       replace_all(m[1].get<std::string>(), " ", "\xC4\xA0"));
    } else {
      return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: bad merge entry {}", tokenizer_json_path, m.dump()));
    }
  }
  if (merges.empty())
    return unexpected(ErrorCode::kInvalidFile, fmt::format("{}: no merges", tokenizer_json_path));

  MINFER_TRY(writer.set("tokenizer.ggml.model", gguf::Value::string("gpt2")));
  MINFER_TRY(writer.set("tokenizer.ggml.pre", gguf::Value::string(pre)));
  MINFER_TRY(writer.set("tokenizer.ggml.tokens", gguf::Value::string_array(tokens)));
  MINFER_TRY(writer.set("tokenizer.ggml.token_type", gguf::Value::i32_array(types)));
  MINFER_TRY(writer.set("tokenizer.ggml.merges", gguf::Value::string_array(merges)));

  // Special ids: tokenizer_config.json names them by text (looked up among
  // the added tokens, as SpecialVocab does); config.json's *_token_id fills
  // in what is still missing.
  const std::pair<const char*, const char*> specials[] = {
      {"bos", "tokenizer.ggml.bos_token_id"},
      {"eos", "tokenizer.ggml.eos_token_id"},
      {"unk", "tokenizer.ggml.unknown_token_id"},
      {"pad", "tokenizer.ggml.padding_token_id"},
  };
  for (const auto& [name, key] : specials) {
    std::optional<int64_t> id;
    if (auto text = token_text(config, std::string(name) + "_token")) {
      auto it = added_ids.find(*text);
      if (it != added_ids.end()) id = it->second;
    }
    const std::string id_key = std::string(name) + "_token_id";
    if (!id && model_config.contains(id_key) && model_config[id_key].is_number_integer())
      id = model_config[id_key].get<int64_t>();
    if (id && *id >= 0 && *id < n) MINFER_TRY(writer.set(key, gguf::Value::u32(static_cast<uint32_t>(*id))));
  }
  if (config.contains("add_bos_token") && config["add_bos_token"].is_boolean())
    MINFER_TRY(writer.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(config["add_bos_token"].get<bool>())));
  if (config.contains("add_eos_token") && config["add_eos_token"].is_boolean())
    MINFER_TRY(writer.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(config["add_eos_token"].get<bool>())));

  HfImportResult result;
  result.n_tokens = static_cast<int32_t>(n);
  result.pre = pre;
  if (auto tmpl = chat_template_of(config, dir)) {
    MINFER_TRY(writer.set("tokenizer.chat_template", gguf::Value::string(*tmpl)));
    result.has_chat_template = true;
  }
  return result;
}

}  // namespace minfer
