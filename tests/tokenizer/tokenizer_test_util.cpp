// Helpers of the tokenizer tests (see tokenizer_test_util.h).
#include "tests/tokenizer/tokenizer_test_util.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/common/read_file.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/hf_import.h"

namespace minfer::test {

std::string data_path(const std::string& relative) { return std::string(MINFER_TEST_DATA_DIR) + "/" + relative; }

std::string read_file(const std::string& path) {
  auto bytes = minfer::read_file(path);
  EXPECT_TRUE(bytes.has_value()) << bytes.error().message;
  return bytes ? std::move(*bytes) : std::string();
}

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  const std::string path = data_path("vocab/ggml-vocab-" + name + ".gguf");
  auto file = gguf::File::open(path);
  if (!file) {
    ADD_FAILURE() << "open " << path << ": " << file.error().message;
    return nullptr;
  }
  auto tok = Tokenizer::from_gguf(**file);
  if (!tok) {
    ADD_FAILURE() << "tokenizer of " << path << ": " << tok.error().message;
    return nullptr;
  }
  return std::move(*tok);
}

std::vector<VocabVector> load_vectors(const std::string& name) {
  const std::string base = data_path("vocab/ggml-vocab-" + name + ".gguf");
  const std::string inp = read_file(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0;;) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      if (pos < inp.size()) texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(read_file(base + ".out"));
  std::vector<VocabVector> vectors;
  std::string line;
  for (const std::string& text : texts) {
    if (!std::getline(out, line)) {
      ADD_FAILURE() << base << ".out has fewer lines than .inp has strings";
      break;
    }
    VocabVector v{text, {}};
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) v.ids.push_back(id);
    vectors.push_back(std::move(v));
  }
  return vectors;
}

std::vector<VocabVector> load_qwen_reference_vectors() {
  const auto json = nlohmann::json::parse(read_file(data_path("qwen-tokenizer/reference-vectors.json")));
  std::vector<VocabVector> vectors;
  for (const auto& v : json.at("vectors"))
    vectors.push_back({v.at("text").get<std::string>(), v.at("ids").get<std::vector<TokenId>>()});
  return vectors;
}

void expect_vectors(const Tokenizer& tok, const std::vector<VocabVector>& vectors, bool parse_special,
                    bool check_decode, const std::string& what) {
  for (size_t i = 0; i < vectors.size(); ++i) {
    const auto got = tok.encode(vectors[i].text, {.add_bos = false, .parse_special = parse_special});
    EXPECT_EQ(got, vectors[i].ids) << what << " string " << i << " '" << vectors[i].text
                                   << "'\n  expected:" << ids_to_string(vectors[i].ids)
                                   << "\n  got:     " << ids_to_string(got);
    if (check_decode) {
      EXPECT_EQ(tok.decode(got, /*render_special=*/parse_special), vectors[i].text) << what << " string " << i;
    }
  }
}

const Tokenizer& qwen_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    gguf::Writer writer;
    auto imported = import_hf_tokenizer(data_path("qwen-tokenizer/tokenizer.json"), 0, writer);
    if (!imported) {
      ADD_FAILURE() << "import: " << imported.error().message;
      return std::unique_ptr<Tokenizer>();
    }
    static const std::vector<uint8_t> bytes = writer.serialize();
    static auto file = gguf::File::parse(bytes, "qwen-tokenizer.gguf");
    if (!file) {
      ADD_FAILURE() << "parse: " << file.error().message;
      return std::unique_ptr<Tokenizer>();
    }
    auto t = Tokenizer::from_gguf(**file);
    if (!t) {
      ADD_FAILURE() << "tokenizer: " << t.error().message;
      return std::unique_ptr<Tokenizer>();
    }
    return std::move(*t);
  }();
  if (!tok) throw std::runtime_error("the Qwen tokenizer could not be built (see the failures above)");
  return *tok;
}

std::string ids_to_string(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s.append(" ").append(std::to_string(id));
  return s;
}

}  // namespace minfer::test
