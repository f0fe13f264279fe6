// Valid oddities the reader must accept, and the typed accessors' values and
// error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "tests/gguf/gguf_builder.h"

namespace minfer::gguf {
namespace {

using testing::ByteBuilder;
using testing::parse_bytes;

constexpr uint32_t kF32 = 0;

TEST(GgufValid, VocabOnlyFileWithoutTrailingPadding) {
  ByteBuilder b;
  b.header(0, 2).kv_str("tokenizer.ggml.model", "llama");
  b.key("tokenizer.ggml.tokens", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kString)).u64(2);
  b.str("<unk>").str("a");
  ASSERT_NE(b.size() % 32, 0u);  // ends off the alignment: no padding, no data
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ((*f)->tensors().size(), 0u);
  EXPECT_EQ((*f)->file_size(), b.size());
  EXPECT_EQ((*f)->data_offset(), (b.size() + 31) / 32 * 32);
  EXPECT_EQ(*(*f)->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<unk>", "a"}));
}

TEST(GgufValid, DefaultAlignmentIs32) {
  ByteBuilder b;
  b.header(1, 1).kv_str("general.architecture", "llama").tensor_info("w", {4}, kF32, 0).pad_to(32);
  const size_t data_at = b.size();
  for (float v : {1.5f, -2.0f, 0.25f, 8.0f}) b.f32(v);
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ((*f)->alignment(), 32u);
  EXPECT_EQ((*f)->data_offset(), data_at);
  const TensorInfo* t = (*f)->find_tensor("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->data, b.bytes().data() + data_at);
  float second;
  std::memcpy(&second, t->data + 4, 4);
  EXPECT_EQ(second, -2.0f);
}

TEST(GgufValid, CustomAlignmentMovesTheDataSection) {
  ByteBuilder b;
  b.header(2, 1).kv_u32(kAlignmentKey, 64).tensor_info("a", {4}, kF32, 0).tensor_info("b", {4}, kF32, 64);
  b.pad_to(64);
  const size_t data_at = b.size();
  b.zeros(128);
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset(), data_at);
  EXPECT_EQ(data_at % 64, 0u);
  EXPECT_EQ((*f)->find_tensor("b")->data, b.bytes().data() + data_at + 64);
}

TEST(GgufValid, Version2AndUnknownKeysLoad) {
  ByteBuilder b;
  b.header(0, 2, /*version=*/2).kv_str("some.future.key", "x").kv_u32("another.unknown", 7);
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ((*f)->version(), 2u);
  EXPECT_EQ(*(*f)->get_string("some.future.key"), "x");
  EXPECT_EQ(*(*f)->get_u32("another.unknown"), 7u);
}

TEST(GgufValid, InvalidUtf8IsKeptAsBytes) {
  const std::string bad("\xff\xfe\xc3(\0z", 6);  // not UTF-8, with a NUL inside
  ByteBuilder b;
  b.header(0, 1).kv_str("general.name", bad);
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(*(*f)->get_string("general.name"), bad);
  EXPECT_EQ((*f)->find("general.name")->to_string(), "\"\xff\xfe\xc3(\\x00z\"");
}

TEST(GgufValid, TensorDataMayComeInAnyOrder) {
  ByteBuilder b;
  b.header(2, 0).tensor_info("late", {8}, kF32, 32).tensor_info("early", {8}, kF32, 0).pad_to(32).zeros(64);
  auto f = parse_bytes(b.bytes());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ((*f)->tensors()[0].name, "late");
  EXPECT_EQ((*f)->tensors()[0].offset, 32u);
  EXPECT_EQ((*f)->tensors()[1].size_bytes, 32u);
}

TEST(GgufValid, OpenMissingFileIsIoError) {
  auto f = File::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.error().code, ErrorCode::kIo);
  EXPECT_NE(f.error().message.find("/nonexistent/dir/model.gguf: cannot open: No such file"), std::string::npos)
      << f.error().message;
  auto d = File::open("/tmp");
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, ErrorCode::kIo);
  EXPECT_NE(d.error().message.find("not a regular file"), std::string::npos) << d.error().message;
}

TEST(GgufValid, OpenEmptyFileIsInvalid) {
  const std::string path = ::testing::TempDir() + "/gguf_empty_test.gguf";
  std::ofstream(path, std::ios::binary).close();
  auto f = File::open(path);
  std::remove(path.c_str());
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.error().code, ErrorCode::kInvalidFile);
  EXPECT_EQ(f.error().message.rfind(path + ": byte 0: header magic: truncated", 0), 0u) << f.error().message;
}

// --- accessors ----------------------------------------------------------------

class GgufAccessors : public ::testing::Test {
 protected:
  void SetUp() override {
    ByteBuilder b;
    b.header(0, 9);
    b.kv_u32("u32", 4096);
    b.key("u64.big", ValueType::kU64).u64(uint64_t{1} << 40);
    b.key("i32.neg", ValueType::kI32).u32(static_cast<uint32_t>(-5));
    b.key("f32", ValueType::kF32).f32(1e-5f);
    b.key("f64", ValueType::kF64).scalar<double>(0.125);
    b.key("flag", ValueType::kBool).u8(1);
    b.kv_str("name", "Qwen2.5");
    b.key("types", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kU32)).u64(3).u32(1).u32(3).u32(6);
    b.key("big.types", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kU32)).u64(2).u32(1).u32(0x80000000u);
    bytes_ = b.bytes();
    auto f = parse_bytes(bytes_);
    ASSERT_TRUE(f.has_value()) << f.error().message;
    file_ = std::move(*f);
  }

  void expect_error(const Error& e, const std::string& text) {
    EXPECT_EQ(e.code, ErrorCode::kInvalidFile);
    EXPECT_EQ(e.message, std::string(testing::kCraftedName) + ": " + text);
  }

  std::vector<uint8_t> bytes_;
  std::unique_ptr<File> file_;
};

TEST_F(GgufAccessors, Values) {
  EXPECT_EQ(*file_->get_u32("u32"), 4096u);
  EXPECT_EQ(*file_->get_u64("u32"), 4096u);
  EXPECT_EQ(*file_->get_i64("i32.neg"), -5);
  EXPECT_EQ(*file_->get_u64("u64.big"), uint64_t{1} << 40);
  EXPECT_EQ(*file_->get_f32("f32"), 1e-5f);
  EXPECT_EQ(*file_->get_f64("f64"), 0.125);
  EXPECT_EQ(*file_->get_f32("f64"), 0.125f);
  EXPECT_TRUE(*file_->get_bool("flag"));
  EXPECT_EQ(*file_->get_string("name"), "Qwen2.5");
  EXPECT_EQ(*file_->get_i32_array("types"), (std::vector<int32_t>{1, 3, 6}));
  EXPECT_EQ((*file_->get_array("types", ValueType::kU32))->items.size(), 3u);
  EXPECT_EQ(*file_->get_u32_or("absent", 7), 7u);
  EXPECT_EQ(*file_->get_u32_or("u32", 7), 4096u);
  EXPECT_EQ(*file_->get_f32_or("absent", 1e6f), 1e6f);
  EXPECT_FALSE(*file_->get_bool_or("absent", false));
  EXPECT_EQ(*file_->get_string_or("absent", "dflt"), "dflt");
}

TEST_F(GgufAccessors, ErrorsSayWhatWasExpectedAndFound) {
  expect_error(file_->get_u32("name").error(), "key 'name': expected an unsigned 32-bit integer, found string");
  expect_error(file_->get_u32("u64.big").error(), "key 'u64.big': value 1099511627776 (u64) does not fit in [0, 4294967295]");
  expect_error(file_->get_u64("i32.neg").error(), "key 'i32.neg': value -5 (i32) does not fit in [0, 18446744073709551615]");
  expect_error(file_->get_f32("u32").error(), "key 'u32': expected f32 or f64, found u32");
  expect_error(file_->get_bool("u32").error(), "key 'u32': expected bool, found u32");
  expect_error(file_->get_string("flag").error(), "key 'flag': expected string, found bool");
  expect_error(file_->get_string("missing.key").error(), "key 'missing.key' is missing");
  expect_error(file_->get_string_array("types").error(), "key 'types': expected array of string, found array of u32 (3 items)");
  expect_error(file_->get_f32_array("name").error(), "key 'name': expected array of f32 or f64, found string");
  expect_error(file_->get_i32_array("big.types").error(), "key 'big.types': item 1 = 2147483648 (u32) does not fit in i32");
  // The _or variants fail only on a wrong type, never on absence.
  expect_error(file_->get_u32_or("name", 1).error(), "key 'name': expected an unsigned 32-bit integer, found string");
}

TEST(GgufValue, RenderingAbbreviatesLongArrays) {
  std::vector<int32_t> v(20);
  for (int i = 0; i < 20; ++i) v[static_cast<size_t>(i)] = i;
  EXPECT_EQ(Value::i32_array(v).to_string(), "[0, 1, 2, 3, 4, 5, 6, 7, ..., 17, 18, 19] (20 items)");
  EXPECT_EQ(Value::i32_array({1, 2, 3}).to_string(), "[1, 2, 3]");
  EXPECT_EQ(Value::string_array({"a\n", "\"b\""}).to_string(), "[\"a\\n\", \"\\\"b\\\"\"]");
  EXPECT_EQ(Value::f32(1e-5f).to_string(), "1e-05");
  EXPECT_EQ(Value::string("abcdef").to_string(8, 3), "\"abc\"... (6 bytes)");
  EXPECT_EQ(Value::f32_array({0.5f}).type_string(), "array of f32 (1 items)");
}

}  // namespace
}  // namespace minfer::gguf
