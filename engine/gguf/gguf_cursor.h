// Cursor: bounded little-endian reads over a GGUF image, and the one place
// that formats reader errors, so that every error names the file, the byte
// offset and the field in the same words:
//
//   "model.gguf: byte 24: kv 0 key length: 4611686018427387904 bytes exceed the 3 bytes left"
//
// Internal to engine/gguf.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "engine/common/expected.h"

namespace minfer::gguf {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader reads little-endian integers in place; add byte swaps for big-endian hosts");

// Names the field being read without building a string per read: a context
// ("kv 3 'tokenizer.ggml.tokens'"), a part ("item") and, for array items, an
// index. Rendered only when an error is reported.
struct Field {
  std::string_view context;
  std::string_view part;
  int64_t index = -1;

  std::string render() const {
    std::string s(context);
    if (!part.empty()) {
      if (!s.empty()) s += ' ';
      s += part;
    }
    if (index >= 0) s += fmt::format("[{}]", index);
    return s;
  }
};

class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, std::string_view file) : bytes_(bytes), file_(file) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  uint64_t size() const { return bytes_.size(); }

  // The error for `field` at byte `at`; code kInvalidFile.
  Error error_at(uint64_t at, const Field& field, std::string_view message) const {
    return Error(ErrorCode::kInvalidFile, fmt::format("{}: byte {}: {}: {}", file_, at, field.render(), message));
  }
  Error error_here(const Field& field, std::string_view message) const { return error_at(pos_, field, message); }

  // Checks that `n` bytes remain, without consuming them.
  Status need(uint64_t n, const Field& field) const {
    if (n > remaining()) {
      return error_here(field, fmt::format("truncated: needs {} bytes but {} are left (file size {})", n,
                                           remaining(), bytes_.size()));
    }
    return ok_status();
  }

  template <class T>
  Expected<T> scalar(const Field& field) {
    MINFER_TRY(need(sizeof(T), field));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A GGUF string: u64 length, then that many bytes (any bytes: invalid
  // UTF-8 is kept as it is). Errors point at the length field.
  Expected<std::string> string(const Field& field) {
    const uint64_t at = pos_;
    if (remaining() < sizeof(uint64_t)) {
      return error_here(field, fmt::format("truncated: the string length needs 8 bytes but {} are left (file size {})",
                                           remaining(), bytes_.size()));
    }
    uint64_t len;
    std::memcpy(&len, bytes_.data() + pos_, sizeof len);
    pos_ += sizeof len;
    if (len > remaining()) {
      return error_at(at, field,
                      fmt::format("string length {} exceeds the {} bytes left in the file (size {})", len,
                                  remaining(), bytes_.size()));
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view file_;
  uint64_t pos_ = 0;
};

}  // namespace minfer::gguf
