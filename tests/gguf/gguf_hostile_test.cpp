// Hostile and broken GGUF files, each crafted byte by byte: every one must be
// refused with kInvalidFile and a message naming the file, the byte offset
// and the field. None may crash or allocate in proportion to a count it
// claims (the absurd counts below would need exabytes).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <random>
#include <string>

#include "tests/gguf/gguf_builder.h"

namespace minfer::gguf {
namespace {

using testing::ByteBuilder;
using testing::expect_invalid;
using testing::parse_bytes;

constexpr uint32_t kF32 = 0;   // ggml type ids
constexpr uint32_t kQ4_0 = 2;
constexpr uint64_t kHeaderBytes = 24;

// --- header -----------------------------------------------------------------

TEST(GgufHostile, EmptyFileIsTruncatedMagic) {
  expect_invalid({}, 0, "header magic", "truncated: needs 4 bytes but 0 are left");
}

TEST(GgufHostile, BadMagic) {
  ByteBuilder b;
  b.u32(0x4c4d4747).u32(3).u64(0).u64(0);  // "GGML"
  expect_invalid(b.bytes(), 0, "header magic", "found 0x4c4d4747");
}

TEST(GgufHostile, UnsupportedVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    SCOPED_TRACE(v);
    ByteBuilder b;
    b.header(0, 0, v);
    expect_invalid(b.bytes(), 4, "header version", "version " + std::to_string(v) + " is not supported");
  }
  ByteBuilder big_endian;
  big_endian.header(0, 0, 0x03000000u);
  expect_invalid(big_endian.bytes(), 4, "version", "big-endian");
}

TEST(GgufHostile, TruncatedHeader) {
  ByteBuilder b;
  b.u32(kMagic).u32(3).u32(0);  // n_tensors cut after 4 of its 8 bytes
  expect_invalid(b.bytes(), 8, "header n_tensors", "needs 8 bytes but 4 are left");
  ByteBuilder c;
  c.u32(kMagic).u32(3).u64(0).u8(0);
  expect_invalid(c.bytes(), 16, "header n_kv", "needs 8 bytes but 1 are left");
}

TEST(GgufHostile, AbsurdTensorCount) {
  ByteBuilder b;
  b.header(uint64_t{1} << 60, 0).zeros(64);
  expect_invalid(b.bytes(), 8, "header n_tensors", "1152921504606846976 tensor infos");
}

TEST(GgufHostile, AbsurdKvCount) {
  ByteBuilder b;
  b.header(0, uint64_t{1} << 60).zeros(64);
  expect_invalid(b.bytes(), 16, "header n_kv", "1152921504606846976 key-value pairs");
}

// --- metadata ---------------------------------------------------------------

TEST(GgufHostile, AbsurdKeyLength) {
  ByteBuilder b;
  b.header(0, 1).u64(uint64_t{1} << 62).zeros(16);
  expect_invalid(b.bytes(), kHeaderBytes, "kv 0 key", "string length 4611686018427387904 exceeds the 16 bytes left");
}

TEST(GgufHostile, TruncatedKey) {
  ByteBuilder b;
  b.header(0, 1).u64(100).zeros(20);
  expect_invalid(b.bytes(), kHeaderBytes, "kv 0 key", "string length 100 exceeds the 20 bytes left");
}

TEST(GgufHostile, AbsurdStringValueLength) {
  ByteBuilder b;
  b.header(0, 1).key("general.name", ValueType::kString);
  const size_t at = b.size();
  b.u64(uint64_t{1} << 62).zeros(3);
  expect_invalid(b.bytes(), at, "kv 0 'general.name' value", "string length 4611686018427387904");
}

TEST(GgufHostile, TruncatedStringValue) {
  ByteBuilder b;
  b.header(0, 1).key("general.name", ValueType::kString);
  const size_t at = b.size();
  b.u64(50).zeros(5);
  expect_invalid(b.bytes(), at, "kv 0 'general.name' value", "string length 50 exceeds the 5 bytes left");
}

TEST(GgufHostile, TruncatedScalarValue) {
  ByteBuilder b;
  b.header(0, 1).key("llama.block_count", ValueType::kU32);
  const size_t at = b.size();
  b.u8(7);
  expect_invalid(b.bytes(), at, "kv 0 'llama.block_count' value", "truncated: needs 4 bytes but 1 are left");
}

TEST(GgufHostile, HugeArrayCount) {
  ByteBuilder b;
  b.header(0, 1).key("tokenizer.ggml.scores", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kU8));
  const size_t at = b.size();
  b.u64(uint64_t{1} << 60).zeros(10);
  expect_invalid(b.bytes(), at, "kv 0 'tokenizer.ggml.scores' array count",
                 "1152921504606846976 items of type u8 need at least 1 bytes each, but 10 bytes are left");
}

TEST(GgufHostile, ArrayCountUsesElementSize) {
  // 10 u64 items need 80 bytes; 40 are there (enough for 40 u8s).
  ByteBuilder b;
  b.header(0, 1).key("k", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kU64));
  const size_t at = b.size();
  b.u64(10).zeros(40);
  expect_invalid(b.bytes(), at, "kv 0 'k' array count", "need at least 8 bytes each, but 40 bytes are left");
}

TEST(GgufHostile, HugeStringArrayCount) {
  // Strings take at least their 8-byte length.
  ByteBuilder b;
  b.header(0, 1).key("tokenizer.ggml.tokens", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kString));
  const size_t at = b.size();
  b.u64(5).zeros(39);
  expect_invalid(b.bytes(), at, "array count", "5 items of type string need at least 8 bytes each, but 39");
}

TEST(GgufHostile, TruncatedInsideArrayOfStrings) {
  ByteBuilder b;
  b.header(0, 1).key("tokenizer.ggml.tokens", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kString));
  b.u64(3).str("a").str("b");
  const size_t at = b.size();
  b.u64(100).zeros(2);
  expect_invalid(b.bytes(), at, "kv 0 'tokenizer.ggml.tokens' item[2]", "string length 100 exceeds the 2 bytes left");
}

TEST(GgufHostile, UnknownValueType) {
  ByteBuilder b;
  b.header(0, 1).str("k");
  const size_t at = b.size();
  b.u32(13).zeros(8);
  expect_invalid(b.bytes(), at, "kv 0 'k' value type", "unknown value type id 13");
}

TEST(GgufHostile, UnknownArrayElementType) {
  ByteBuilder b;
  b.header(0, 1).key("k", ValueType::kArray);
  const size_t at = b.size();
  b.u32(0xffffffffu).u64(0);
  expect_invalid(b.bytes(), at, "kv 0 'k' array type", "unknown value type id 4294967295");
}

TEST(GgufHostile, BoolOtherThanZeroOrOne) {
  ByteBuilder b;
  b.header(0, 1).key("general.flag", ValueType::kBool);
  const size_t at = b.size();
  b.u8(2);
  expect_invalid(b.bytes(), at, "kv 0 'general.flag' value", "bool byte is 2");
}

TEST(GgufHostile, DuplicateKey) {
  ByteBuilder b;
  b.header(0, 2).kv_u32("llama.block_count", 4);
  const size_t at = b.size();
  b.kv_u32("llama.block_count", 5);
  expect_invalid(b.bytes(), at, "kv 1 'llama.block_count' key", "duplicate key (first defined by kv 0)");
}

TEST(GgufHostile, NestingDepthLimit) {
  // depth arrays, each holding the next; the innermost holds nothing.
  auto nested = [](int depth) {
    ByteBuilder b;
    b.header(0, 1).key("deep", ValueType::kArray);
    for (int i = 1; i < depth; ++i) b.u32(static_cast<uint32_t>(ValueType::kArray)).u64(1);
    b.u32(static_cast<uint32_t>(ValueType::kU8)).u64(0);
    return b;
  };
  auto ok = parse_bytes(nested(kMaxArrayDepth).bytes());
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  const Value* v = (*ok)->find("deep");
  ASSERT_NE(v, nullptr);
  int depth = 0;
  while (const Array* a = std::get_if<Array>(&v->data)) {
    ++depth;
    if (a->items.empty()) break;
    v = &a->items[0];
  }
  EXPECT_EQ(depth, kMaxArrayDepth);

  ByteBuilder too_deep = nested(kMaxArrayDepth + 1);
  // The 65th array's element type follows the key (8 + 4 bytes), the value
  // type (4) and 64 (element type, count) pairs of 12 bytes.
  const uint64_t at = kHeaderBytes + 8 + 4 + 4 + 12 * static_cast<uint64_t>(kMaxArrayDepth);
  expect_invalid(too_deep.bytes(), at, "kv 0 'deep' array type", "arrays nested 65 deep; the limit is 64");
}

TEST(GgufHostile, HeaderMemoryBudget) {
  // 6M u8 items are 6 MB on disk but ~290 MB as Values: refused before
  // anything is allocated.
  const uint64_t count = 6'000'000;
  ByteBuilder b;
  b.header(0, 1).key("blob", ValueType::kArray).u32(static_cast<uint32_t>(ValueType::kU8));
  const size_t at = b.size();
  b.u64(count).zeros(count);
  expect_invalid(b.bytes(), at, "kv 0 'blob' array count", "more than 256 MiB");
}

TEST(GgufHostile, AlignmentMustBeNonzeroPowerOfTwo) {
  for (uint32_t a : {0u, 3u, 48u}) {
    SCOPED_TRACE(a);
    ByteBuilder b;
    b.header(0, 1).key(kAlignmentKey, ValueType::kU32);
    const size_t at = b.size();
    b.u32(a);
    expect_invalid(b.bytes(), at, "kv 0 'general.alignment' value",
                   "general.alignment is " + std::to_string(a) + "; it must be a nonzero power of two");
  }
}

TEST(GgufHostile, AlignmentMustBeU32) {
  ByteBuilder b;
  b.header(0, 1).key(kAlignmentKey, ValueType::kU64);
  const size_t at = b.size();
  b.u64(32);
  expect_invalid(b.bytes(), at, "kv 0 'general.alignment' value", "must be a u32, found u64");
}

// --- tensor infos -------------------------------------------------------------

TEST(GgufHostile, AbsurdTensorNameLength) {
  ByteBuilder b;
  b.header(1, 0).u64(uint64_t{1} << 62).zeros(40);
  expect_invalid(b.bytes(), kHeaderBytes, "tensor 0 name", "string length 4611686018427387904");
}

TEST(GgufHostile, TruncatedTensorInfo) {
  // Name, n_dims and dims are there (29 bytes), 3 bytes of the type.
  ByteBuilder b;
  b.header(1, 0).str("t").u32(2).u64(4).u64(4);
  const size_t at = b.size();
  b.zeros(3);
  expect_invalid(b.bytes(), at, "tensor 0 't' type", "truncated: needs 4 bytes but 3 are left");
}

TEST(GgufHostile, NDimsZeroOrAboveFour) {
  for (uint32_t n : {0u, 5u}) {
    SCOPED_TRACE(n);
    ByteBuilder b;
    b.header(1, 0).str("blk.0.attn_q.weight");
    const size_t at = b.size();
    b.u32(n).zeros(60);
    expect_invalid(b.bytes(), at, "tensor 0 'blk.0.attn_q.weight' n_dims",
                   "n_dims is " + std::to_string(n) + "; must be 1 to 4");
  }
}

TEST(GgufHostile, ZeroDimension) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(2).u64(8);
  const size_t at = b.size();
  b.u64(0).u32(kF32).u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' ne[1]", "dimension is 0 (read as int64); must be positive");
}

TEST(GgufHostile, NegativeDimension) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(1);
  const size_t at = b.size();
  b.u64(~uint64_t{0}).u32(kF32).u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' ne[0]", "dimension is -1 (read as int64)");
}

TEST(GgufHostile, DimensionProductOverflows) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(3).u64(uint64_t{1} << 32);
  const size_t at = b.size();  // 2^32 * 2^32 = 2^64: overflows at ne[1]
  b.u64(uint64_t{1} << 32).u64(1).u32(kF32).u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' ne[1]", "overflows int64");

  ByteBuilder c;  // 2^62 * 2 = 2^63 > INT64_MAX, below 2^64
  c.header(1, 0).str("w").u32(2).u64(uint64_t{1} << 62);
  const size_t at_c = c.size();
  c.u64(2).u32(kF32).u64(0);
  expect_invalid(c.bytes(), at_c, "tensor 0 'w' ne[1]", "overflows int64");
}

TEST(GgufHostile, DataSizeOverflows) {
  // 2^62 f32 elements are a valid count (below 2^63), but 2^64 bytes.
  ByteBuilder b;
  b.header(1, 0).str("w").u32(2).u64(uint64_t{1} << 60).u64(4);
  const size_t at = b.size();
  b.u32(kF32).u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' type", "overflows 64 bits");
}

TEST(GgufHostile, UnknownTensorType) {
  for (uint32_t id : {4u, 99u}) {  // 4 was Q4_2, removed from ggml
    SCOPED_TRACE(id);
    ByteBuilder b;
    b.header(1, 0).str("w").u32(1).u64(32);
    const size_t at = b.size();
    b.u32(id).u64(0);
    expect_invalid(b.bytes(), at, "tensor 0 'w' type", "unknown tensor type id " + std::to_string(id));
  }
}

TEST(GgufHostile, RowWidthNotMultipleOfBlock) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(2).u64(33).u64(2);
  const size_t at = b.size();
  b.u32(kQ4_0).u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' type", "row width ne[0] = 33 is not a multiple of q4_0's block size 32");
}

TEST(GgufHostile, DuplicateTensorName) {
  ByteBuilder b;
  b.header(2, 0).tensor_info("w", {8}, kF32, 0);
  const size_t at = b.size();
  b.tensor_info("w", {8}, kF32, 32).pad_to(32).zeros(64);
  expect_invalid(b.bytes(), at, "tensor 1 'w' name", "duplicate tensor name (first used by tensor 0)");
}

// --- tensor data ----------------------------------------------------------------

TEST(GgufHostile, TensorDataPastEndOfFile) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(2).u64(16).u64(4).u32(kF32);
  const size_t at = b.size();
  b.u64(0).pad_to(32);
  const size_t data_offset = b.size();
  b.zeros(255);  // 256 bytes needed
  expect_invalid(b.bytes(), at, "tensor 0 'w' offset",
                 "data at file bytes [" + std::to_string(data_offset) + ", " + std::to_string(data_offset + 256) +
                     ") (f32 256 bytes) runs past the end of the file");
}

TEST(GgufHostile, TensorsButNoDataSection) {
  // The file ends right after the tensor infos: no padding, no data.
  ByteBuilder b;
  b.header(1, 0).str("w").u32(1).u64(8).u32(kF32);
  const size_t at = b.size();
  b.u64(0);
  expect_invalid(b.bytes(), at, "tensor 0 'w' offset", "runs past the end of the file");
}

TEST(GgufHostile, TensorOffsetHugeDoesNotWrap) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(1).u64(8).u32(kF32);
  const size_t at = b.size();
  b.u64(~uint64_t{0} - 31).pad_to(32).zeros(32);  // aligned, and offset + size wraps past 2^64
  expect_invalid(b.bytes(), at, "tensor 0 'w' offset", "runs past the end of the file");
}

TEST(GgufHostile, MisalignedTensorOffset) {
  ByteBuilder b;
  b.header(1, 0).str("w").u32(1).u64(8).u32(kF32);
  const size_t at = b.size();
  b.u64(8).pad_to(32).zeros(64);
  expect_invalid(b.bytes(), at, "tensor 0 'w' offset", "data offset 8 is not a multiple of the alignment 32");
}

TEST(GgufHostile, OverlappingTensorData) {
  ByteBuilder b;
  b.header(2, 0).tensor_info("a", {16}, kF32, 0);  // [0, 64)
  b.str("b").u32(1).u64(16).u32(kF32);
  const size_t at = b.size();
  b.u64(32).pad_to(32).zeros(128);  // [32, 96)
  expect_invalid(b.bytes(), at, "tensor 1 'b' offset", "data [32, 96) overlaps tensor 0 'a' at [0, 64)");
}

// --- sweeps -----------------------------------------------------------------------

// A small valid file with every kind of field, whose last byte is the last
// byte of tensor data (so every shorter prefix is a truncated file).
std::vector<uint8_t> valid_file() {
  Writer w;
  EXPECT_TRUE(w.set("general.architecture", Value::string("llama")));
  EXPECT_TRUE(w.set("llama.block_count", Value::u32(2)));
  EXPECT_TRUE(w.set("tokenizer.ggml.tokens", Value::string_array({"<unk>", "a", "bc"})));
  EXPECT_TRUE(w.set("nested", Value::array(ValueType::kArray, {Value::i32_array({1, 2}), Value::i32_array({})})));
  EXPECT_TRUE(w.set("flag", Value::boolean(true)));
  EXPECT_TRUE(w.add_tensor("a", DType::kF32, {8}, std::vector<uint8_t>(32, 1)));
  EXPECT_TRUE(w.add_tensor("b", DType::kQ8_0, {64}, std::vector<uint8_t>(68, 2)));
  EXPECT_TRUE(w.add_tensor("c", DType::kF16, {16}, std::vector<uint8_t>(32, 3)));
  return w.serialize();
}

TEST(GgufHostile, EveryTruncationIsAnError) {
  const std::vector<uint8_t> full = valid_file();
  auto parsed = parse_bytes(full);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
  const TensorInfo& last = (*parsed)->tensors().back();
  ASSERT_EQ((*parsed)->data_offset() + last.offset + last.size_bytes, full.size());
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    auto r = parse_bytes(prefix);
    ASSERT_FALSE(r.has_value()) << "prefix of " << n << " bytes was accepted";
    ASSERT_EQ(r.error().code, ErrorCode::kInvalidFile) << r.error().message;
    ASSERT_EQ(r.error().message.rfind("crafted.gguf: byte ", 0), 0u) << r.error().message;
  }
}

TEST(GgufHostile, RandomByteFlipsNeverCrash) {
  const std::vector<uint8_t> full = valid_file();
  std::mt19937_64 rng(12345);
  int refused = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> bytes = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    auto r = parse_bytes(bytes);
    if (r.has_value()) continue;  // a flip inside tensor data or a string is harmless
    ++refused;
    ASSERT_EQ(r.error().code, ErrorCode::kInvalidFile) << r.error().message;
    ASSERT_EQ(r.error().message.rfind("crafted.gguf: byte ", 0), 0u) << r.error().message;
  }
  // Most of the file is header: most mutations must be caught.
  EXPECT_GT(refused, 1000);
}

// --- paths that are not model files ---------------------------------------------

// A FIFO given as the model path (found by tests/reliability): open() used to
// wait for a writer forever, so minferd hung at start-up instead of failing.
TEST(GgufHostile, AFifoIsRefusedWithoutWaitingForAWriter) {
  char dir[] = "/tmp/gguf-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/model.gguf";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto opened = std::async(std::launch::async, [&] { return File::open(path); });
  const bool answered = opened.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!answered) {
    // Unblock the reader so the test can end, then fail.
    const int w = ::open(path.c_str(), O_WRONLY);
    if (w >= 0) ::close(w);
  }
  auto r = opened.get();
  ::unlink(path.c_str());
  ::rmdir(dir);
  ASSERT_TRUE(answered) << "File::open waited on a FIFO";
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_EQ(r.error().message, path + ": not a regular file");
}

TEST(GgufHostile, ADirectoryOrADeviceIsNotARegularFile) {
  for (const std::string path : {"/tmp", "/dev/null", "/dev/full"}) {
    auto r = File::open(path);
    ASSERT_FALSE(r.has_value()) << path;
    EXPECT_EQ(r.error().message, path + ": not a regular file");
  }
}

}  // namespace
}  // namespace minfer::gguf
