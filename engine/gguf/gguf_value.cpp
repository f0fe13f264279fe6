// Metadata values: type names, array factories, equality and rendering (used
// by error messages and `minfer gguf info`). No parsing here.
#include <fmt/format.h>

#include <cstring>

#include "engine/gguf/gguf.h"

namespace minfer::gguf {
namespace {

// Items shown after the "..." of an abbreviated array.
constexpr size_t kTailItems = 3;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void append_quoted(std::string& out, const std::string& s, size_t max_bytes) {
  out += '"';
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        // Bytes >= 0x80 pass through: names and tokens are mostly UTF-8, and
        // a terminal shows them better than escapes.
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (n < s.size()) out += fmt::format("... ({} bytes)", s.size());
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "unknown";
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kU16:
    case ValueType::kI16:
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kU64:
    case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

Value Value::string_array(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const std::string& s : items) v.push_back(Value::string(s));
  return Value::array(ValueType::kString, std::move(v));
}

Value Value::f32_array(const std::vector<float>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float f : items) v.push_back(Value::f32(f));
  return Value::array(ValueType::kF32, std::move(v));
}

Value Value::i32_array(const std::vector<int32_t>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t i : items) v.push_back(Value::i32(i));
  return Value::array(ValueType::kI32, std::move(v));
}

bool Value::operator==(const Value& other) const {
  if (type != other.type || data.index() != other.data.index()) return false;
  if (const double* d = std::get_if<double>(&data)) return same_bits(*d, std::get<double>(other.data));
  if (const Array* a = std::get_if<Array>(&data)) {
    const Array& b = std::get<Array>(other.data);
    return a->elem_type == b.elem_type && a->items == b.items;
  }
  if (const uint64_t* u = std::get_if<uint64_t>(&data)) return *u == std::get<uint64_t>(other.data);
  if (const int64_t* i = std::get_if<int64_t>(&data)) return *i == std::get<int64_t>(other.data);
  if (const bool* b = std::get_if<bool>(&data)) return *b == std::get<bool>(other.data);
  return std::get<std::string>(data) == std::get<std::string>(other.data);
}

std::string Value::type_string() const {
  if (const Array* a = std::get_if<Array>(&data)) {
    return fmt::format("array of {} ({} items)", value_type_name(a->elem_type), a->items.size());
  }
  return value_type_name(type);
}

std::string Value::to_string(size_t max_items, size_t max_string_bytes) const {
  std::string out;
  if (const uint64_t* u = std::get_if<uint64_t>(&data)) {
    out = fmt::format("{}", *u);
  } else if (const int64_t* i = std::get_if<int64_t>(&data)) {
    out = fmt::format("{}", *i);
  } else if (const double* d = std::get_if<double>(&data)) {
    // Shortest text that reads back to the stored precision.
    out = type == ValueType::kF32 ? fmt::format("{}", static_cast<float>(*d)) : fmt::format("{}", *d);
  } else if (const bool* b = std::get_if<bool>(&data)) {
    out = *b ? "true" : "false";
  } else if (const std::string* s = std::get_if<std::string>(&data)) {
    append_quoted(out, *s, max_string_bytes);
  } else {
    const Array& a = std::get<Array>(data);
    const size_t n = a.items.size();
    const bool abbreviated = n > max_items + kTailItems;
    out += '[';
    for (size_t i = 0; i < n; ++i) {
      if (abbreviated && i == max_items) {
        out += "..., ";
        i = n - kTailItems;
      }
      out += a.items[i].to_string(max_items, max_string_bytes);
      if (i + 1 < n) out += ", ";
    }
    out += ']';
    if (abbreviated) out += fmt::format(" ({} items)", n);
  }
  return out;
}

std::string TensorInfo::shape_string() const {
  std::string out = "[";
  for (int d = 0; d < n_dims; ++d) {
    if (d > 0) out += ", ";
    out += std::to_string(ne[static_cast<size_t>(d)]);
  }
  return out + "]";
}

}  // namespace minfer::gguf
