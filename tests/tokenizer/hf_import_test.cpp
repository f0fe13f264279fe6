// import_hf_tokenizer on small hand-written tokenizer.json files: both merge
// spellings, token types of added tokens, the pre-tokenizer choice, the
// tokenizer_config.json forms, and the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/hf_import.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class HfImport : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("minfer-hf-import-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const json& j) { std::ofstream(dir_ / name) << j.dump(); }

  // Imports and reads the keys back through the GGUF reader.
  std::unique_ptr<gguf::File> import(HfImportResult* result, int32_t pad_to = 0) {
    gguf::Writer writer;
    auto r = import_hf_tokenizer((dir_ / "tokenizer.json").string(), pad_to, writer);
    EXPECT_TRUE(r) << r.error().message;
    if (!r) return nullptr;
    *result = *r;
    bytes_ = writer.serialize();
    auto f = gguf::File::parse(bytes_, "import.gguf");
    EXPECT_TRUE(f) << f.error().message;
    return f ? std::move(*f) : nullptr;
  }

  static json base_tokenizer() {
    return json{
        {"model",
         {{"type", "BPE"},
          {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\xC4\xA0", 3}, {"\xC4\xA0" "a", 4}}},
          {"merges", json::array({json::array({"a", "b"}), json::array({"\xC4\xA0", "a"}),
                                  json::array({"c d", "e"})})}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Regex}}}},
                                         {{"type", "ByteLevel"}, {"use_regex", false}}})}}},
        {"added_tokens", json::array({{{"id", 5}, {"content", "<|eot_id|>"}, {"special", true}},
                                      {{"id", 6}, {"content", "<x>"}, {"special", false}},
                                      {{"id", 7}, {"content", "<|looks|>"}, {"special", false}},
                                      {{"id", 8}, {"content", "\xE2\x96\x81y"}, {"special", false}}})}};
  }

  fs::path dir_;
  std::vector<uint8_t> bytes_;
};

TEST_F(HfImport, PairMergesTypesAndLlama3Regex) {
  write("tokenizer.json", base_tokenizer());
  HfImportResult result;
  auto f = import(&result, 12);
  ASSERT_TRUE(f);
  EXPECT_EQ(result.pre, "llama-bpe");
  EXPECT_EQ(result.n_tokens, 12);
  EXPECT_FALSE(result.has_chat_template);
  EXPECT_EQ(*f->get_string_array("tokenizer.ggml.merges"),
            (std::vector<std::string>{"a b", "\xC4\xA0 a", "c\xC4\xA0" "d e"}));  // a space inside a half → Ġ
  EXPECT_EQ(*f->get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "a", "<|eot_id|>", "<x>", "<|looks|>", " y",
                                      "[PAD9]", "[PAD10]", "[PAD11]"}));
  // 1 normal, 3 control (special, or not special but <|...|>), 4 user-defined, 5 unused padding.
  EXPECT_EQ(*f->get_i32_array("tokenizer.ggml.token_type"),
            (std::vector<int32_t>{1, 1, 1, 1, 1, 3, 4, 3, 4, 5, 5, 5}));
  EXPECT_FALSE(f->has("tokenizer.ggml.eos_token_id"));
}

TEST_F(HfImport, StringMergesGpt2ByteLevelAndConfig) {
  json t = base_tokenizer();
  t["model"]["merges"] = json::array({"a b", "\xC4\xA0 a"});
  t["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  write("tokenizer.json", t);
  write("tokenizer_config.json",
        {{"add_bos_token", true},
         {"bos_token", {{"content", "<|eot_id|>"}, {"special", true}}},
         {"eos_token", "<|eot_id|>"},
         {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T1"}},
                                        {{"name", "default"}, {"template", "T0"}}})}});
  write("config.json", {{"pad_token_id", 6}});
  HfImportResult result;
  auto f = import(&result);
  ASSERT_TRUE(f);
  EXPECT_EQ(result.pre, "gpt-2");
  EXPECT_EQ(result.n_tokens, 9);
  EXPECT_TRUE(result.has_chat_template);
  EXPECT_EQ(*f->get_string_array("tokenizer.ggml.merges"), (std::vector<std::string>{"a b", "\xC4\xA0 a"}));
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.bos_token_id"), 5u);
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.eos_token_id"), 5u);
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.padding_token_id"), 6u);  // from config.json
  EXPECT_EQ(*f->get_bool("tokenizer.ggml.add_bos_token"), true);
  EXPECT_EQ(*f->get_string("tokenizer.chat_template"), "T0");
}

TEST_F(HfImport, RefusesWhatItCannotCarry) {
  gguf::Writer writer;
  const std::string path = (dir_ / "tokenizer.json").string();

  json t = base_tokenizer();
  t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
  write("tokenizer.json", t);
  auto r = import_hf_tokenizer(path, 0, writer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("\\p{L}+|\\s+"), std::string::npos) << r.error().message;

  t = base_tokenizer();
  t["model"]["type"] = "WordPiece";
  write("tokenizer.json", t);
  r = import_hf_tokenizer(path, 0, writer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);

  std::ofstream(dir_ / "tokenizer.json") << "{ not json";
  r = import_hf_tokenizer(path, 0, writer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidFile);

  r = import_hf_tokenizer((dir_ / "missing.json").string(), 0, writer);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
}

}  // namespace
}  // namespace minfer
