// Writes the fuzz targets' seed corpora from the repository's real files
// (tests/data), small enough to check in: `fuzz_make_seeds OUT_DIR`, run by
// tests/fuzz/make_seeds.sh. Hand-written seeds (HTTP requests, extra chat
// conversations) are in that script.
//   gguf/           real files re-written without tensor data or with a vocabulary
//                   cut to its first tokens, and truncations of the real files
//   tokenizer_*/    the llama.cpp test texts (tests/data/vocab/*.inp), one per seed,
//                   behind an options byte
//   chat_template/  the real templates carried by the vocabularies and the Qwen
//                   tokenizer, each with a conversation
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace fs = std::filesystem;
using namespace minfer;

namespace {

std::string data(const std::string& rel) { return std::string(MINFER_TEST_DATA_DIR) + "/" + rel; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}
void write(const fs::path& path, const std::vector<uint8_t>& bytes) {
  write(path, std::string(bytes.begin(), bytes.end()));
}

// Cuts an array value to its first n items.
gguf::Value cut(const gguf::Value& v, size_t n) {
  const auto* a = std::get_if<gguf::Array>(&v.data);
  if (!a || a->items.size() <= n) return v;
  return gguf::Value::array(a->elem_type, std::vector<gguf::Value>(a->items.begin(), a->items.begin() + n));
}

// `src` re-written: metadata with arrays cut to `max_items` (0: whole),
// tensors whose bytes are at most `max_tensor_bytes` kept.
std::vector<uint8_t> rewrite(const std::string& src, size_t max_items, uint64_t max_tensor_bytes) {
  auto f = gguf::File::open(src);
  if (!f) {
    std::fprintf(stderr, "%s\n", f.error().message.c_str());
    std::exit(1);
  }
  gguf::Writer w;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (key == gguf::kAlignmentKey) continue;
    (void)w.set(key, max_items ? cut(value, max_items) : value);
  }
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (t.size_bytes > max_tensor_bytes) continue;
    std::vector<uint64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    (void)w.add_tensor(t.name, t.type, ne, std::vector<uint8_t>(t.data, t.data + t.size_bytes));
  }
  return w.serialize();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];

  // GGUF: stories260K's metadata (its 512-token SPM vocabulary) with the
  // small tensors only; the same without tensors; vocabularies cut to 300
  // tokens (SPM keeps its byte tokens <0x00>..<0xFF>, ids 3..258); the real
  // file's first bytes.
  write(out / "gguf/stories260K-small-tensors.gguf", rewrite(data("models/stories260K.gguf"), 0, 1024));
  write(out / "gguf/stories260K-no-tensors.gguf", rewrite(data("models/stories260K.gguf"), 0, 0));
  write(out / "gguf/llama-spm-300.gguf", rewrite(data("vocab/ggml-vocab-llama-spm.gguf"), 300, 0));
  write(out / "gguf/gpt-2-300.gguf", rewrite(data("vocab/ggml-vocab-gpt-2.gguf"), 300, 0));
  write(out / "gguf/phi-3-300.gguf", rewrite(data("vocab/ggml-vocab-phi-3.gguf"), 300, 0));
  write(out / "gguf/bert-bge-300.gguf", rewrite(data("vocab/ggml-vocab-bert-bge.gguf"), 300, 0));
  const std::string stories = read(data("models/stories260K.gguf"));
  for (size_t n : {4, 24, 200, 4096}) write(out / ("gguf/stories260K-head-" + std::to_string(n)), stories.substr(0, n));

  // Tokenizers: the llama.cpp test texts, options byte 0x04 (parse_special)
  // and 0x13/0x1b (BPE: the second vocabulary, BOS, EOS, render_special).
  for (const auto& [target, inp, flags] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tokenizer_spm", "ggml-vocab-llama-spm.gguf.inp", "\x04"},
           {"tokenizer_bpe", "ggml-vocab-gpt-2.gguf.inp", "\x04"},
           {"tokenizer_bpe", "ggml-vocab-qwen2.gguf.inp", "\x1b"}}) {
    const std::string text = read(data("vocab/" + inp));
    const std::string sep = "\n__ggml_vocab_test__\n";
    size_t start = 0, i = 0;
    while (start < text.size()) {
      size_t end = text.find(sep, start);
      if (end == std::string::npos) end = text.size();
      write(out / target / (inp + "-" + std::to_string(i++)), flags + text.substr(start, end - start));
      start = end + sep.size();
    }
  }

  // Chat templates: the Qwen tokenizer's and phi-3's, with a conversation
  // (0xFF, role byte, content; see fuzz_chat_template.cpp).
  static const char kConversation[] = "\xFF\x00You are brief.\xFF\x01Hi!\xFF\x02Hello.\xFF\x01What is 2+2?";
  const std::string conversation(kConversation, sizeof kConversation - 1);
  const auto qwen = nlohmann::json::parse(read(data("qwen-tokenizer/tokenizer_config.json")));
  write(out / "chat_template/qwen3", qwen.at("chat_template").get<std::string>() + conversation);
  auto phi3 = gguf::File::open(data("vocab/ggml-vocab-phi-3.gguf"));
  if (phi3) {
    if (auto t = (*phi3)->get_string("tokenizer.chat_template")) write(out / "chat_template/phi-3", *t + conversation);
  }
  return 0;
}
