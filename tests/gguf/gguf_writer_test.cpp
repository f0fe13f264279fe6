// Writer: a write -> read round trip keeps every key, value and tensor byte,
// in order; the layout is aligned; bad input is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "tests/gguf/gguf_builder.h"

namespace minfer::gguf {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<std::pair<std::string, Value>> every_kind_of_value() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      {"u8", Value::u8(255)},
      {"i8", Value::i8(-128)},
      {"u16", Value::u16(65535)},
      {"i16", Value::i16(-32768)},
      {"u32", Value::u32(4294967295u)},
      {"i32", Value::i32(-2147483647 - 1)},
      {"u64", Value::u64(~uint64_t{0})},
      {"i64", Value::i64(std::numeric_limits<int64_t>::min())},
      {"f32", Value::f32(1e-6f)},
      {"f32.nan", Value::f32(nan)},
      {"f32.negzero", Value::f32(-0.0f)},
      {"f64", Value::f64(3.141592653589793)},
      {"bool.true", Value::boolean(true)},
      {"bool.false", Value::boolean(false)},
      {"string.empty", Value::string("")},
      {"string.bytes", Value::string(std::string("\xff\x00\xfe tail", 8))},
      {"string.utf8", Value::string("\xe2\x96\x81hello \xe4\xbd\xa0\xe5\xa5\xbd")},
      {"array.empty", Value::array(ValueType::kF32, {})},
      {"array.strings", Value::string_array({"<unk>", "", "\xe2\x96\x81the", std::string("\0", 1)})},
      {"array.f32", Value::f32_array({0.0f, -1.5f, 1e30f})},
      {"array.i32", Value::i32_array({-1, 0, 7})},
      {"array.u64", Value::array(ValueType::kU64, {Value::u64(1), Value::u64(uint64_t{1} << 63)})},
      {"array.bool", Value::array(ValueType::kBool, {Value::boolean(true), Value::boolean(false)})},
      {"array.nested",
       Value::array(ValueType::kArray,
                    {Value::string_array({"a", "b"}), Value::i32_array({}),
                     Value::array(ValueType::kArray, {Value::array(ValueType::kF64, {Value::f64(-2.5)})})})},
      {kAlignmentKey, Value::u32(64)},
  };
}

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<uint64_t> ne;
  std::vector<uint8_t> data;
};

std::vector<TensorSpec> some_tensors() {
  return {
      {"scalar.like", DType::kF32, {3}, random_bytes(12, 1)},
      {"f16.matrix", DType::kF16, {4, 2}, random_bytes(16, 2)},
      {"q8_0.rows", DType::kQ8_0, {64, 3}, random_bytes(3 * 2 * 34, 3)},
      {"q4_K.4d", DType::kQ4_K, {256, 1, 2, 2}, random_bytes(4 * 144, 4)},
      {"bf16.vec", DType::kBF16, {5}, random_bytes(10, 5)},
  };
}

void expect_round_trip(const File& f, const std::vector<std::pair<std::string, Value>>& kv,
                       const std::vector<TensorSpec>& tensors) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  ASSERT_EQ(f.metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    EXPECT_EQ(f.metadata()[i].first, kv[i].first);
    EXPECT_TRUE(f.metadata()[i].second == kv[i].second)
        << kv[i].first << ": wrote " << kv[i].second.to_string() << ", read " << f.metadata()[i].second.to_string();
  }
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    const TensorSpec& s = tensors[i];
    EXPECT_EQ(t.name, s.name);
    EXPECT_EQ(t.type, s.type);
    EXPECT_EQ(t.n_dims, static_cast<int>(s.ne.size()));
    for (size_t d = 0; d < s.ne.size(); ++d) EXPECT_EQ(t.ne[d], s.ne[d]) << s.name << " dim " << d;
    EXPECT_EQ(t.offset % 64, 0u) << s.name;
    ASSERT_EQ(t.size_bytes, s.data.size()) << s.name;
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.size_bytes), s.data) << s.name;
  }
}

TEST(GgufWriter, RoundTripKeepsEverything) {
  const auto kv = every_kind_of_value();
  const auto tensors = some_tensors();
  Writer w;
  for (const auto& [k, v] : kv) ASSERT_TRUE(w.set(k, v)) << k;
  EXPECT_EQ(w.alignment(), 64u);
  // The last tensor comes from a fill function; the rest are buffers.
  for (size_t i = 0; i + 1 < tensors.size(); ++i) {
    ASSERT_TRUE(w.add_tensor(tensors[i].name, tensors[i].type, tensors[i].ne, tensors[i].data));
  }
  const TensorSpec& last = tensors.back();
  ASSERT_TRUE(w.add_tensor_fill(last.name, last.type, last.ne, [&](std::span<uint8_t> out) {
    ASSERT_EQ(out.size(), last.data.size());
    std::copy(last.data.begin(), last.data.end(), out.begin());
  }));

  const std::vector<uint8_t> bytes = w.serialize();
  EXPECT_EQ(bytes.size(), w.file_size());
  EXPECT_EQ(bytes.size() % 64, 0u);  // every tensor is padded, the last one too
  auto parsed = File::parse(std::span<const uint8_t>(bytes), "memory.gguf");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  expect_round_trip(**parsed, kv, tensors);

  // The same through a real file and mmap.
  const std::string path = ::testing::TempDir() + "/gguf_writer_round_trip.gguf";
  ASSERT_TRUE(w.write(path));
  auto opened = File::open(path);
  ASSERT_TRUE(opened.has_value()) << opened.error().message;
  EXPECT_EQ((*opened)->file_size(), bytes.size());
  expect_round_trip(**opened, kv, tensors);
  opened->reset();
  std::remove(path.c_str());
}

TEST(GgufWriter, EmptyFileIsValid) {
  Writer w;
  const std::vector<uint8_t> bytes = w.serialize();
  EXPECT_EQ(bytes.size(), 32u);  // 24-byte header padded to 32
  auto parsed = File::parse(std::span<const uint8_t>(bytes), "empty.gguf");
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  EXPECT_EQ((*parsed)->metadata().size(), 0u);
  EXPECT_EQ((*parsed)->data_offset(), 32u);
}

void expect_refused(const Status& st, const std::string& text) {
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(st.error().message.find(text), std::string::npos) << st.error().message;
}

TEST(GgufWriter, RefusesWhatTheReaderWouldRefuse) {
  Writer w;
  ASSERT_TRUE(w.set("k", Value::u32(1)));
  expect_refused(w.set("k", Value::u32(2)), "duplicate key 'k'");
  expect_refused(w.set(kAlignmentKey, Value::u32(48)), "must be a u32 nonzero power of two");
  expect_refused(w.set(kAlignmentKey, Value::u64(64)), "must be a u32 nonzero power of two");
  expect_refused(w.set("mixed", Value::array(ValueType::kI32, {Value::i32(1), Value::u32(2)})),
                 "key 'mixed': value does not match its type");
  expect_refused(w.set("overflow", Value{ValueType::kU8, uint64_t{256}}), "value does not match its type");
  expect_refused(w.set("wrong.payload", Value{ValueType::kString, uint64_t{1}}), "value does not match its type");

  ASSERT_TRUE(w.add_tensor("t", DType::kF32, {4}, std::vector<uint8_t>(16)));
  expect_refused(w.add_tensor("t", DType::kF32, {4}, std::vector<uint8_t>(16)), "duplicate tensor 't'");
  expect_refused(w.add_tensor("short", DType::kF32, {4}, std::vector<uint8_t>(15)),
                 "tensor 'short' (f32 4): data has 15 bytes, the shape needs 16");
  expect_refused(w.add_tensor("q", DType::kQ4_0, {33}, std::vector<uint8_t>(18)),
                 "row width 33 is not a multiple of q4_0's block size 32");
  expect_refused(w.add_tensor("zero", DType::kF32, {4, 0}, {}), "bad shape");
  expect_refused(w.add_tensor("five", DType::kF32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), "has 5 dims");
  expect_refused(w.add_tensor_fill("nofill", DType::kF32, {1}, nullptr), "has no fill function");
}

TEST(GgufWriter, WriteFailureLeavesNoFile) {
  Writer w;
  ASSERT_TRUE(w.set("k", Value::u32(1)));
  const Status st = w.write("/nonexistent/dir/out.gguf");
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().code, ErrorCode::kIo);
  EXPECT_NE(st.error().message.find("/nonexistent/dir/out.gguf.tmp-"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace minfer::gguf
