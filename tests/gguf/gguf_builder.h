// ByteBuilder: writes GGUF bytes field by field, including wrong ones, so a
// test can craft exactly the hostile file it needs and know the offset of
// the field it broke (`size()` before writing it). Deliberately independent
// of gguf::Writer, which refuses to write bad files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "engine/gguf/gguf.h"

namespace minfer::gguf::testing {

class ByteBuilder {
 public:
  template <class T>
  ByteBuilder& scalar(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof v);
    return *this;
  }
  ByteBuilder& u8(uint8_t v) { return scalar(v); }
  ByteBuilder& u32(uint32_t v) { return scalar(v); }
  ByteBuilder& u64(uint64_t v) { return scalar(v); }
  ByteBuilder& f32(float v) { return scalar(v); }
  ByteBuilder& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  ByteBuilder& zeros(size_t n) {
    bytes_.insert(bytes_.end(), n, 0);
    return *this;
  }
  ByteBuilder& pad_to(size_t alignment) { return zeros((alignment - bytes_.size() % alignment) % alignment); }

  ByteBuilder& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(kMagic).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key and its value type; the caller writes the value.
  ByteBuilder& key(std::string_view k, ValueType t) { return str(k).u32(static_cast<uint32_t>(t)); }
  ByteBuilder& kv_u32(std::string_view k, uint32_t v) { return key(k, ValueType::kU32).u32(v); }
  ByteBuilder& kv_str(std::string_view k, std::string_view v) { return key(k, ValueType::kString).str(v); }
  ByteBuilder& tensor_info(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type_id, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) u64(d);
    return u32(type_id).u64(offset);
  }

  size_t size() const { return bytes_.size(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& mutable_bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

inline constexpr const char* kCraftedName = "crafted.gguf";

inline Expected<std::unique_ptr<File>> parse_bytes(const std::vector<uint8_t>& bytes) {
  return File::parse(std::span<const uint8_t>(bytes), kCraftedName);
}

// Asserts that `bytes` are refused as kInvalidFile with a message that names
// the file, the byte offset, the field and (when given) the problem.
inline void expect_invalid(const std::vector<uint8_t>& bytes, uint64_t offset, std::string_view field,
                           std::string_view problem = {}) {
  auto parsed = parse_bytes(bytes);
  ASSERT_FALSE(parsed.has_value()) << "the crafted file was accepted";
  const Error& e = parsed.error();
  EXPECT_EQ(e.code, ErrorCode::kInvalidFile) << e.message;
  const std::string where = std::string(kCraftedName) + ": byte " + std::to_string(offset) + ": ";
  EXPECT_EQ(e.message.rfind(where, 0), 0u) << "expected the message to start with '" << where << "': " << e.message;
  EXPECT_NE(e.message.find(field), std::string::npos) << "field '" << field << "' not named: " << e.message;
  if (!problem.empty()) {
    EXPECT_NE(e.message.find(problem), std::string::npos) << "problem '" << problem << "' not said: " << e.message;
  }
}

}  // namespace minfer::gguf::testing
