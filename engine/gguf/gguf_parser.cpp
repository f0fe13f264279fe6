// Parser: turns a GGUF image into a File, trusting nothing. Every count is
// checked against the bytes left (using the smallest encoding an element can
// have) before anything is allocated; every tensor is checked for shape,
// type, size, alignment, bounds and overlap. Errors come from Cursor, so they
// all read "<file>: byte <offset>: <field>: <problem>".
//
// What is deliberately accepted: invalid UTF-8 in strings (stored as bytes),
// unknown keys, a missing general.alignment (32), and a file with no tensors
// that ends right after its metadata without the alignment padding (the
// vocab-only GGUFs in llama.cpp's models/ folder do).
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_cursor.h"

namespace minfer::gguf {
namespace {

constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kMaxValueTypeId = static_cast<uint64_t>(ValueType::kF64);

// Smallest encodings, for the count checks.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, value type, a u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, one dim, type, offset

// Memory charged per parsed item against kMaxHeaderMemoryBytes (estimates of
// the std::map node and std::string overheads; exact values do not matter).
constexpr uint64_t kIndexNodeBytes = 64;

uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool:
      return 1;
    case ValueType::kU16:
    case ValueType::kI16:
      return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32:
      return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
    case ValueType::kString:  // the length alone
      return 8;
    case ValueType::kArray:  // element type and count
      return 12;
  }
  return 1;
}

uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

}  // namespace

class Parser {
 public:
  // The Cursor names the file by the File's own copy of the name.
  Parser(std::span<const uint8_t> bytes, std::string name)
      : file_(new_file(bytes, std::move(name))), cur_(bytes, file_->path_) {}

  Expected<std::unique_ptr<File>> run() {
    MINFER_TRY(read_header());
    MINFER_TRY(read_metadata());
    MINFER_TRY(read_tensor_infos());
    MINFER_TRY(place_tensor_data());
    return std::move(file_);
  }

 private:
  static std::unique_ptr<File> new_file(std::span<const uint8_t> bytes, std::string name) {
    std::unique_ptr<File> f(new File());
    f->path_ = std::move(name);
    f->bytes_ = bytes;
    return f;
  }

  Status read_header() {
    const Field magic_field{"header", "magic"};
    MINFER_ASSIGN_OR_RETURN(uint32_t magic, cur_.scalar<uint32_t>(magic_field));
    if (magic != kMagic) {
      return cur_.error_at(0, magic_field,
                           fmt::format("expected 0x{:08x} (\"GGUF\"), found 0x{:08x}; not a GGUF file", kMagic, magic));
    }
    const Field version_field{"header", "version"};
    MINFER_ASSIGN_OR_RETURN(file_->version_, cur_.scalar<uint32_t>(version_field));
    const uint32_t v = file_->version_;
    if (v < kMinVersion || v > kMaxVersion) {
      std::string hint;
      if (v == 1) hint = " (v1 used 32-bit counts; convert the file with a current llama.cpp)";
      if (v > 0xffff) hint = " (a big-endian file?)";
      return cur_.error_at(4, version_field,
                           fmt::format("version {} is not supported; supported: {} and {}{}", v, kMinVersion,
                                       kMaxVersion, hint));
    }
    const Field tensors_field{"header", "n_tensors"};
    MINFER_ASSIGN_OR_RETURN(n_tensors_, cur_.scalar<uint64_t>(tensors_field));
    const Field kv_field{"header", "n_kv"};
    MINFER_ASSIGN_OR_RETURN(n_kv_, cur_.scalar<uint64_t>(kv_field));

    const uint64_t left = cur_.remaining();
    if (n_tensors_ > left / kMinTensorInfoBytes) {
      return cur_.error_at(8, tensors_field,
                           fmt::format("{} tensor infos of at least {} bytes each cannot fit in the {} bytes "
                                       "after the header",
                                       n_tensors_, kMinTensorInfoBytes, left));
    }
    const uint64_t left_for_kv = left - n_tensors_ * kMinTensorInfoBytes;
    if (n_kv_ > left_for_kv / kMinKvBytes) {
      return cur_.error_at(16, kv_field,
                           fmt::format("{} key-value pairs of at least {} bytes each cannot fit in the {} bytes "
                                       "left after the header and {} tensor infos",
                                       n_kv_, kMinKvBytes, left_for_kv, n_tensors_));
    }
    return ok_status();
  }

  Status read_metadata() {
    MINFER_TRY(charge(n_kv_ * (sizeof(std::pair<std::string, Value>) + kIndexNodeBytes), 16, Field{"header", "n_kv"}));
    file_->kv_.reserve(static_cast<size_t>(n_kv_));
    for (uint64_t i = 0; i < n_kv_; ++i) {
      std::string context = fmt::format("kv {}", i);
      const uint64_t key_at = cur_.offset();
      MINFER_ASSIGN_OR_RETURN(std::string key, cur_.string(Field{context, "key"}));
      MINFER_TRY(charge(key.size() * 2, key_at, Field{context, "key"}));  // the key and its index copy
      context = fmt::format("kv {} '{}'", i, key);
      if (auto it = file_->kv_index_.find(key); it != file_->kv_index_.end()) {
        return cur_.error_at(key_at, Field{context, "key"},
                             fmt::format("duplicate key (first defined by kv {})", it->second));
      }
      MINFER_ASSIGN_OR_RETURN(ValueType type, read_type(Field{context, "value type"}));
      const uint64_t value_at = cur_.offset();
      MINFER_ASSIGN_OR_RETURN(Value value, read_value(type, Field{context, "value"}, 0));
      if (key == kAlignmentKey) MINFER_TRY(apply_alignment(value, value_at, Field{context, "value"}));
      file_->kv_index_.emplace(key, file_->kv_.size());
      file_->kv_.emplace_back(std::move(key), std::move(value));
    }
    return ok_status();
  }

  Status apply_alignment(const Value& value, uint64_t at, const Field& field) {
    if (value.type != ValueType::kU32) {
      return cur_.error_at(at, field, fmt::format("{} must be a u32, found {}", kAlignmentKey, value.type_string()));
    }
    const uint64_t a = std::get<uint64_t>(value.data);
    if (a == 0 || (a & (a - 1)) != 0) {
      return cur_.error_at(at, field, fmt::format("{} is {}; it must be a nonzero power of two", kAlignmentKey, a));
    }
    file_->alignment_ = static_cast<uint32_t>(a);
    return ok_status();
  }

  Expected<ValueType> read_type(const Field& field) {
    const uint64_t at = cur_.offset();
    MINFER_ASSIGN_OR_RETURN(uint32_t id, cur_.scalar<uint32_t>(field));
    if (id > kMaxValueTypeId) {
      return cur_.error_at(at, field, fmt::format("unknown value type id {} (known: 0 to {})", id, kMaxValueTypeId));
    }
    return static_cast<ValueType>(id);
  }

  Expected<Value> read_value(ValueType type, const Field& field, int depth) {
    switch (type) {
      case ValueType::kU8: return int_value<uint8_t>(type, field);
      case ValueType::kI8: return int_value<int8_t>(type, field);
      case ValueType::kU16: return int_value<uint16_t>(type, field);
      case ValueType::kI16: return int_value<int16_t>(type, field);
      case ValueType::kU32: return int_value<uint32_t>(type, field);
      case ValueType::kI32: return int_value<int32_t>(type, field);
      case ValueType::kU64: return int_value<uint64_t>(type, field);
      case ValueType::kI64: return int_value<int64_t>(type, field);
      case ValueType::kF32: {
        MINFER_ASSIGN_OR_RETURN(float f, cur_.scalar<float>(field));
        return Value::f32(f);
      }
      case ValueType::kF64: {
        MINFER_ASSIGN_OR_RETURN(double d, cur_.scalar<double>(field));
        return Value::f64(d);
      }
      case ValueType::kBool: {
        const uint64_t at = cur_.offset();
        MINFER_ASSIGN_OR_RETURN(uint8_t b, cur_.scalar<uint8_t>(field));
        // The spec: "Anything else is invalid".
        if (b > 1) return cur_.error_at(at, field, fmt::format("bool byte is {}; must be 0 or 1", b));
        return Value::boolean(b == 1);
      }
      case ValueType::kString: {
        const uint64_t at = cur_.offset();
        MINFER_ASSIGN_OR_RETURN(std::string s, cur_.string(field));
        MINFER_TRY(charge(s.size(), at, field));
        return Value::string(std::move(s));
      }
      case ValueType::kArray:
        return read_array(field, depth + 1);
    }
    return cur_.error_here(field, "unknown value type");  // read_type rules this out
  }

  template <class T>
  Expected<Value> int_value(ValueType type, const Field& field) {
    MINFER_ASSIGN_OR_RETURN(T v, cur_.scalar<T>(field));
    if constexpr (std::is_signed_v<T>) {
      return Value{type, static_cast<int64_t>(v)};
    } else {
      return Value{type, static_cast<uint64_t>(v)};
    }
  }

  Expected<Value> read_array(const Field& field, int depth) {
    const std::string_view ctx = field.context;
    if (depth > kMaxArrayDepth) {
      return cur_.error_here(Field{ctx, "array type"},
                             fmt::format("arrays nested {} deep; the limit is {}", depth, kMaxArrayDepth));
    }
    MINFER_ASSIGN_OR_RETURN(ValueType elem_type, read_type(Field{ctx, "array type"}));
    const uint64_t count_at = cur_.offset();
    const Field count_field{ctx, "array count"};
    MINFER_ASSIGN_OR_RETURN(uint64_t count, cur_.scalar<uint64_t>(count_field));
    const uint64_t min_size = min_encoded_size(elem_type);
    if (count > cur_.remaining() / min_size) {
      return cur_.error_at(count_at, count_field,
                           fmt::format("{} items of type {} need at least {} bytes each, but {} bytes are left",
                                       count, value_type_name(elem_type), min_size, cur_.remaining()));
    }
    MINFER_TRY(charge(count * sizeof(Value), count_at, count_field));
    Array array;
    array.elem_type = elem_type;
    array.items.reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      MINFER_ASSIGN_OR_RETURN(Value item, read_value(elem_type, Field{ctx, "item", static_cast<int64_t>(i)}, depth));
      array.items.push_back(std::move(item));
    }
    return Value{ValueType::kArray, std::move(array)};
  }

  Status read_tensor_infos() {
    MINFER_TRY(charge(n_tensors_ * (sizeof(TensorInfo) + kIndexNodeBytes), 8, Field{"header", "n_tensors"}));
    file_->tensors_.reserve(static_cast<size_t>(n_tensors_));
    offset_field_at_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      std::string context = fmt::format("tensor {}", i);
      TensorInfo t;
      const uint64_t name_at = cur_.offset();
      MINFER_ASSIGN_OR_RETURN(t.name, cur_.string(Field{context, "name"}));
      MINFER_TRY(charge(t.name.size() * 2, name_at, Field{context, "name"}));
      context = fmt::format("tensor {} '{}'", i, t.name);
      if (auto it = file_->tensor_index_.find(t.name); it != file_->tensor_index_.end()) {
        return cur_.error_at(name_at, Field{context, "name"},
                             fmt::format("duplicate tensor name (first used by tensor {})", it->second));
      }
      MINFER_TRY(read_shape(t, context));
      MINFER_TRY(read_type_and_size(t, context));
      offset_field_at_.push_back(cur_.offset());
      MINFER_ASSIGN_OR_RETURN(t.offset, cur_.scalar<uint64_t>(Field{context, "offset"}));
      file_->tensor_index_.emplace(t.name, file_->tensors_.size());
      file_->tensors_.push_back(std::move(t));
    }
    return ok_status();
  }

  Status read_shape(TensorInfo& t, const std::string& context) {
    const uint64_t n_dims_at = cur_.offset();
    const Field n_dims_field{context, "n_dims"};
    MINFER_ASSIGN_OR_RETURN(uint32_t n_dims, cur_.scalar<uint32_t>(n_dims_field));
    if (n_dims == 0 || n_dims > static_cast<uint32_t>(kMaxDims)) {
      return cur_.error_at(n_dims_at, n_dims_field, fmt::format("n_dims is {}; must be 1 to {}", n_dims, kMaxDims));
    }
    t.n_dims = static_cast<int>(n_dims);
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = cur_.offset();
      const Field dim_field{context, "ne", static_cast<int64_t>(d)};
      MINFER_ASSIGN_OR_RETURN(uint64_t ne, cur_.scalar<uint64_t>(dim_field));
      const int64_t signed_ne = static_cast<int64_t>(ne);
      if (signed_ne <= 0) {
        return cur_.error_at(dim_at, dim_field,
                             fmt::format("dimension is {} (read as int64); must be positive", signed_ne));
      }
      // ggml counts elements in int64_t: the product must stay below 2^63.
      if (n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / ne) {
        return cur_.error_at(dim_at, dim_field,
                             fmt::format("element count {} x {} overflows int64", n_elements, ne));
      }
      n_elements *= ne;
      t.ne[d] = ne;
    }
    return ok_status();
  }

  Status read_type_and_size(TensorInfo& t, const std::string& context) {
    const uint64_t type_at = cur_.offset();
    const Field type_field{context, "type"};
    MINFER_ASSIGN_OR_RETURN(uint32_t type_id, cur_.scalar<uint32_t>(type_field));
    const std::optional<DType> type = dtype_from_id(type_id);
    if (!type) return cur_.error_at(type_at, type_field, fmt::format("unknown tensor type id {}", type_id));
    t.type = *type;
    const DTypeTraits& tr = dtype_traits(t.type);
    if (!row_size_ok(t.type, t.ne[0])) {
      return cur_.error_at(type_at, type_field,
                           fmt::format("row width ne[0] = {} is not a multiple of {}'s block size {}", t.ne[0],
                                       tr.name, tr.block_elems));
    }
    uint64_t size = row_size(t.type, t.ne[0]);
    for (int d = 1; d < kMaxDims; ++d) {
      if (__builtin_mul_overflow(size, t.ne[static_cast<size_t>(d)], &size)) {
        return cur_.error_at(type_at, type_field,
                             fmt::format("data size of shape {} as {} overflows 64 bits", t.shape_string(), tr.name));
      }
    }
    t.size_bytes = size;
    return ok_status();
  }

  // Places each tensor in the data section: aligned, inside the file, and
  // not overlapping another tensor.
  Status place_tensor_data() {
    File& f = *file_;
    f.data_offset_ = align_up(cur_.offset(), f.alignment_);
    const uint64_t file_size = cur_.size();
    const uint64_t available = file_size > f.data_offset_ ? file_size - f.data_offset_ : 0;
    for (size_t i = 0; i < f.tensors_.size(); ++i) {
      TensorInfo& t = f.tensors_[i];
      const std::string context = fmt::format("tensor {} '{}'", i, t.name);
      const Field offset_field{context, "offset"};
      if (t.offset % f.alignment_ != 0) {
        return cur_.error_at(offset_field_at_[i], offset_field,
                             fmt::format("data offset {} is not a multiple of the alignment {}", t.offset,
                                         f.alignment_));
      }
      if (t.offset > available || t.size_bytes > available - t.offset) {
        return cur_.error_at(
            offset_field_at_[i], offset_field,
            fmt::format("data at file bytes [{}, {}) ({} {} bytes) runs past the end of the file (size {}): "
                        "truncated file or bad offset",
                        f.data_offset_ + t.offset, f.data_offset_ + t.offset + t.size_bytes,
                        dtype_name(t.type), t.size_bytes, file_size));
      }
      t.data = f.bytes_.data() + f.data_offset_ + t.offset;
    }
    std::vector<size_t> order(f.tensors_.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors_[a].offset < f.tensors_[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& prev = f.tensors_[order[k - 1]];
      const TensorInfo& cur = f.tensors_[order[k]];
      if (prev.offset + prev.size_bytes > cur.offset) {
        const std::string context = fmt::format("tensor {} '{}'", order[k], cur.name);
        return cur_.error_at(offset_field_at_[order[k]], Field{context, "offset"},
                             fmt::format("data [{}, {}) overlaps tensor {} '{}' at [{}, {}) (offsets in the data "
                                         "section)",
                                         cur.offset, cur.offset + cur.size_bytes, order[k - 1], prev.name,
                                         prev.offset, prev.offset + prev.size_bytes));
      }
    }
    return ok_status();
  }

  // Adds `bytes` to the header's memory; `at` and `field` name what asked.
  Status charge(uint64_t bytes, uint64_t at, const Field& field) {
    // `bytes` is at most ~100x the file's size, far from overflowing.
    header_memory_ += bytes;
    if (header_memory_ > kMaxHeaderMemoryBytes) {
      return cur_.error_at(at, field, fmt::format("the parsed header would take more than {} MiB of memory "
                                                "(kMaxHeaderMemoryBytes); no real model needs that much",
                                                kMaxHeaderMemoryBytes >> 20));
    }
    return ok_status();
  }

  std::unique_ptr<File> file_;
  Cursor cur_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t header_memory_ = 0;
  std::vector<uint64_t> offset_field_at_;  // where each tensor's offset field is, for data errors
};

Expected<std::unique_ptr<File>> File::parse(std::span<const uint8_t> bytes, std::string name) {
  return Parser(bytes, std::move(name)).run();
}

}  // namespace minfer::gguf
