// Writer: validates what it is given (so that what it writes is a file the
// reader accepts) and lays the file out as llama.cpp's gguf_write does:
// header, metadata, tensor infos, padding to the alignment, then each
// tensor's data padded to the alignment.
//
// Tensor data is emitted one tensor at a time; a fill tensor's bytes exist
// only while that tensor is being written.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "engine/gguf/gguf.h"

namespace minfer::gguf {

class Writer::Sink {
 public:
  virtual ~Sink() = default;
  virtual Status put(const void* data, size_t n) = 0;
};

namespace {

constexpr uint32_t kVersion = 3;

class MemorySink final : public Writer::Sink {
 public:
  Status put(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
    return ok_status();
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class FileSink final : public Writer::Sink {
 public:
  FileSink(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  Status put(const void* data, size_t n) override {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) {
      return Error(ErrorCode::kIo, fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    }
    return ok_status();
  }

 private:
  std::FILE* f_;
  const std::string& path_;
};

// Little-endian encoding helpers over a Sink; each returns the sink's status.
template <class T>
Status put_scalar(Writer::Sink& s, T v) {
  return s.put(&v, sizeof v);
}

Status put_string(Writer::Sink& s, const std::string& str) {
  MINFER_TRY(put_scalar<uint64_t>(s, str.size()));
  return s.put(str.data(), str.size());
}

Status put_payload(Writer::Sink& s, const Value& v) {
  switch (v.type) {
    case ValueType::kU8: return put_scalar(s, static_cast<uint8_t>(std::get<uint64_t>(v.data)));
    case ValueType::kI8: return put_scalar(s, static_cast<int8_t>(std::get<int64_t>(v.data)));
    case ValueType::kU16: return put_scalar(s, static_cast<uint16_t>(std::get<uint64_t>(v.data)));
    case ValueType::kI16: return put_scalar(s, static_cast<int16_t>(std::get<int64_t>(v.data)));
    case ValueType::kU32: return put_scalar(s, static_cast<uint32_t>(std::get<uint64_t>(v.data)));
    case ValueType::kI32: return put_scalar(s, static_cast<int32_t>(std::get<int64_t>(v.data)));
    case ValueType::kU64: return put_scalar(s, std::get<uint64_t>(v.data));
    case ValueType::kI64: return put_scalar(s, std::get<int64_t>(v.data));
    case ValueType::kF32: return put_scalar(s, static_cast<float>(std::get<double>(v.data)));
    case ValueType::kF64: return put_scalar(s, std::get<double>(v.data));
    case ValueType::kBool: return put_scalar<uint8_t>(s, std::get<bool>(v.data) ? 1 : 0);
    case ValueType::kString: return put_string(s, std::get<std::string>(v.data));
    case ValueType::kArray: {
      const Array& a = std::get<Array>(v.data);
      MINFER_TRY(put_scalar(s, static_cast<uint32_t>(a.elem_type)));
      MINFER_TRY(put_scalar<uint64_t>(s, a.items.size()));
      for (const Value& item : a.items) MINFER_TRY(put_payload(s, item));
      return ok_status();
    }
  }
  return Error(ErrorCode::kInternal, "gguf writer: value of unknown type");
}

Status put_zeros(Writer::Sink& s, uint64_t n) {
  static constexpr uint8_t kZeros[64] = {};
  while (n > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
    MINFER_TRY(s.put(kZeros, chunk));
    n -= chunk;
  }
  return ok_status();
}

uint64_t padding(uint64_t size, uint64_t alignment) { return (alignment - size % alignment) % alignment; }

int integer_bits(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8: return 8;
    case ValueType::kU16:
    case ValueType::kI16: return 16;
    case ValueType::kU32:
    case ValueType::kI32: return 32;
    default: return 64;
  }
}

// Checks that a Value's payload matches its type tag, recursively, so that
// what is written is exactly what the reader will decode. `depth` is the
// number of arrays around `v`.
bool well_formed(const Value& v, int depth) {
  switch (v.type) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64: {
      const uint64_t* u = std::get_if<uint64_t>(&v.data);
      const int bits = integer_bits(v.type);
      return u != nullptr && (bits == 64 || *u < (uint64_t{1} << bits));
    }
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64: {
      const int64_t* i = std::get_if<int64_t>(&v.data);
      const int bits = integer_bits(v.type);
      return i != nullptr && (bits == 64 || (*i >= -(int64_t{1} << (bits - 1)) && *i < (int64_t{1} << (bits - 1))));
    }
    case ValueType::kF32:
    case ValueType::kF64: return std::holds_alternative<double>(v.data);
    case ValueType::kBool: return std::holds_alternative<bool>(v.data);
    case ValueType::kString: return std::holds_alternative<std::string>(v.data);
    case ValueType::kArray: {
      const Array* a = std::get_if<Array>(&v.data);
      if (a == nullptr || depth + 1 > kMaxArrayDepth) return false;  // the reader's limit
      for (const Value& item : a->items) {
        if (item.type != a->elem_type || !well_formed(item, depth + 1)) return false;
      }
      return true;
    }
  }
  return false;
}

std::string shape_text(const std::vector<uint64_t>& ne) {
  std::string s;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (i > 0) s += 'x';
    s += std::to_string(ne[i]);
  }
  return s;
}

uint64_t payload_size(const Value& v) {
  switch (v.type) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool: return 1;
    case ValueType::kU16:
    case ValueType::kI16: return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32: return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64: return 8;
    case ValueType::kString: return 8 + std::get<std::string>(v.data).size();
    case ValueType::kArray: {
      uint64_t n = 12;
      for (const Value& item : std::get<Array>(v.data).items) n += payload_size(item);
      return n;
    }
  }
  return 0;
}

}  // namespace

Writer::Writer(uint32_t alignment) : alignment_(alignment) {}

Status Writer::set(std::string key, Value value) {
  if (find(key) != nullptr) {
    return Error(ErrorCode::kInvalidArgument, fmt::format("gguf writer: duplicate key '{}'", key));
  }
  if (!well_formed(value, 0)) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("gguf writer: key '{}': value does not match its type {} (payload of another type, an "
                             "out-of-range integer, array items of another type, or arrays nested over {} deep)",
                             key, value.type_string(), kMaxArrayDepth));
  }
  if (key == kAlignmentKey) {
    const uint64_t* a = std::get_if<uint64_t>(&value.data);
    if (value.type != ValueType::kU32 || *a == 0 || (*a & (*a - 1)) != 0) {
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("gguf writer: {} must be a u32 nonzero power of two, got {} {}", kAlignmentKey,
                               value.type_string(), value.to_string()));
    }
    alignment_ = static_cast<uint32_t>(*a);
  }
  kv_.emplace_back(std::move(key), std::move(value));
  return ok_status();
}

const Value* Writer::find(std::string_view key) const {
  for (const auto& [k, v] : kv_) {
    if (k == key) return &v;
  }
  return nullptr;
}

Status Writer::check_tensor(const std::string& name, DType type, const std::vector<uint64_t>& ne,
                            uint64_t* size_bytes) const {
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) return Error(ErrorCode::kInvalidArgument, fmt::format("gguf writer: duplicate tensor '{}'", name));
  }
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("gguf writer: tensor '{}' has {} dims; must be 1 to {}", name, ne.size(), kMaxDims));
  }
  uint64_t n_elements = 1;
  for (uint64_t d : ne) {
    if (d == 0 || d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(n_elements, d, &n_elements) ||
        n_elements > static_cast<uint64_t>(INT64_MAX)) {
      return Error(ErrorCode::kInvalidArgument,
                   fmt::format("gguf writer: tensor '{}': bad shape (a zero dim or an element count over 2^63)", name));
    }
  }
  if (!row_size_ok(type, ne[0])) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("gguf writer: tensor '{}': row width {} is not a multiple of {}'s block size {}", name,
                             ne[0], dtype_name(type), dtype_traits(type).block_elems));
  }
  uint64_t size = row_size(type, ne[0]);
  for (size_t d = 1; d < ne.size(); ++d) size *= ne[d];  // <= 4.5 bytes per element: no overflow below 2^63 elements
  *size_bytes = size;
  return ok_status();
}

Status Writer::add_tensor(std::string name, DType type, std::vector<uint64_t> ne, std::vector<uint8_t> data) {
  uint64_t size = 0;
  MINFER_TRY(check_tensor(name, type, ne, &size));
  if (data.size() != size) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("gguf writer: tensor '{}' ({} {}): data has {} bytes, the shape needs {}", name,
                             dtype_name(type), shape_text(ne), data.size(), size));
  }
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(ne), size, std::move(data), nullptr});
  return ok_status();
}

Status Writer::add_tensor_fill(std::string name, DType type, std::vector<uint64_t> ne, FillFn fill) {
  uint64_t size = 0;
  MINFER_TRY(check_tensor(name, type, ne, &size));
  if (!fill) return Error(ErrorCode::kInvalidArgument, fmt::format("gguf writer: tensor '{}' has no fill function", name));
  tensors_.push_back(PendingTensor{std::move(name), type, std::move(ne), size, {}, std::move(fill)});
  return ok_status();
}

uint64_t Writer::file_size() const {
  uint64_t n = 4 + 4 + 8 + 8;
  for (const auto& [key, value] : kv_) n += 8 + key.size() + 4 + payload_size(value);
  for (const PendingTensor& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  n += padding(n, alignment_);
  for (const PendingTensor& t : tensors_) n += t.size_bytes + padding(t.size_bytes, alignment_);
  return n;
}

Status Writer::emit(Sink& s) const {
  MINFER_TRY(put_scalar(s, kMagic));
  MINFER_TRY(put_scalar(s, kVersion));
  MINFER_TRY(put_scalar<uint64_t>(s, tensors_.size()));
  MINFER_TRY(put_scalar<uint64_t>(s, kv_.size()));
  uint64_t pos = 24;
  for (const auto& [key, value] : kv_) {
    MINFER_TRY(put_string(s, key));
    MINFER_TRY(put_scalar(s, static_cast<uint32_t>(value.type)));
    MINFER_TRY(put_payload(s, value));
    pos += 8 + key.size() + 4 + payload_size(value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    MINFER_TRY(put_string(s, t.name));
    MINFER_TRY(put_scalar(s, static_cast<uint32_t>(t.ne.size())));
    for (uint64_t d : t.ne) MINFER_TRY(put_scalar(s, d));
    MINFER_TRY(put_scalar(s, static_cast<uint32_t>(t.type)));
    MINFER_TRY(put_scalar(s, offset));
    pos += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
    offset += t.size_bytes + padding(t.size_bytes, alignment_);
  }
  MINFER_TRY(put_zeros(s, padding(pos, alignment_)));
  std::vector<uint8_t> scratch;
  for (const PendingTensor& t : tensors_) {
    if (t.fill) {
      scratch.assign(static_cast<size_t>(t.size_bytes), 0);
      t.fill(std::span<uint8_t>(scratch));
      MINFER_TRY(s.put(scratch.data(), scratch.size()));
    } else {
      MINFER_TRY(s.put(t.data.data(), t.data.size()));
    }
    MINFER_TRY(put_zeros(s, padding(t.size_bytes, alignment_)));
  }
  return ok_status();
}

std::vector<uint8_t> Writer::serialize() const {
  MemorySink sink;
  sink.bytes().reserve(static_cast<size_t>(file_size()));
  // A memory sink cannot fail; a failure here would be a bug in emit().
  const Status st = emit(sink);
  if (!st) fail_unchecked_expected(st.error());
  return std::move(sink.bytes());
}

Status Writer::write(const std::string& path) const {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return Error(ErrorCode::kIo, fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  }
  // Metadata is written in many small pieces (one per token string).
  std::setvbuf(f, nullptr, _IOFBF, 1 << 20);
  FileSink sink(f, tmp);
  Status st = emit(sink);
  const bool closed = std::fclose(f) == 0;
  if (st && !closed) st = Error(ErrorCode::kIo, fmt::format("{}: close failed: {}", tmp, std::strerror(errno)));
  if (st && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Error(ErrorCode::kIo, fmt::format("cannot rename {} to {}: {}", tmp, path, std::strerror(errno)));
  }
  if (!st) std::remove(tmp.c_str());
  return st;
}

}  // namespace minfer::gguf
