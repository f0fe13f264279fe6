// File's typed accessors. A missing key and a key of the wrong type are
// kInvalidFile errors that name the file, the key, what was expected and
// what was found, so that a loader can pass them up unchanged.
#include <fmt/format.h>

#include <limits>

#include "engine/gguf/gguf.h"

namespace minfer::gguf {
namespace {

// The value of an integer Value as a signed 128-bit number, so that every
// range check below is one comparison.
__int128 int_of(const Value& v) {
  if (const uint64_t* u = std::get_if<uint64_t>(&v.data)) return static_cast<__int128>(*u);
  return static_cast<__int128>(std::get<int64_t>(v.data));
}

std::string int_text(const Value& v) { return v.to_string() + " (" + value_type_name(v.type) + ")"; }

}  // namespace

Expected<const Value*> File::require(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return Error(ErrorCode::kInvalidFile, fmt::format("{}: key '{}' is missing", path_, key));
  return v;
}

Error File::type_error(std::string_view key, std::string_view expected, const Value& found) const {
  return Error(ErrorCode::kInvalidFile,
               fmt::format("{}: key '{}': expected {}, found {}", path_, key, expected, found.type_string()));
}

namespace {

// Reads an integer key into T, or says why it cannot.
template <class T>
Expected<T> get_int(const File& f, std::string_view key, const Value& v, Error type_err) {
  if (!is_integer_type(v.type)) return type_err;
  const __int128 x = int_of(v);
  if (x < static_cast<__int128>(std::numeric_limits<T>::min()) ||
      x > static_cast<__int128>(std::numeric_limits<T>::max())) {
    return Error(ErrorCode::kInvalidFile,
                 fmt::format("{}: key '{}': value {} does not fit in [{}, {}]", f.path(), key, int_text(v),
                             std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  }
  return static_cast<T>(x);
}

}  // namespace

Expected<uint64_t> File::get_u64(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  return get_int<uint64_t>(*this, key, *v, type_error(key, "an unsigned integer", *v));
}

Expected<uint32_t> File::get_u32(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  return get_int<uint32_t>(*this, key, *v, type_error(key, "an unsigned 32-bit integer", *v));
}

Expected<int64_t> File::get_i64(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  return get_int<int64_t>(*this, key, *v, type_error(key, "an integer", *v));
}

Expected<double> File::get_f64(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  if (v->type != ValueType::kF32 && v->type != ValueType::kF64) return type_error(key, "f32 or f64", *v);
  return std::get<double>(v->data);
}

Expected<float> File::get_f32(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(double d, get_f64(key));
  return static_cast<float>(d);
}

Expected<bool> File::get_bool(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  if (v->type != ValueType::kBool) return type_error(key, "bool", *v);
  return std::get<bool>(v->data);
}

Expected<std::string> File::get_string(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  if (v->type != ValueType::kString) return type_error(key, "string", *v);
  return std::get<std::string>(v->data);
}

Expected<const Array*> File::get_array(std::string_view key, ValueType elem_type) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  const Array* a = std::get_if<Array>(&v->data);
  if (a == nullptr || a->elem_type != elem_type) {
    return type_error(key, fmt::format("array of {}", value_type_name(elem_type)), *v);
  }
  return a;
}

Expected<std::vector<std::string>> File::get_string_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Array* a, get_array(key, ValueType::kString));
  std::vector<std::string> out;
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(std::get<std::string>(item.data));
  return out;
}

Expected<std::vector<float>> File::get_f32_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  const Array* a = std::get_if<Array>(&v->data);
  if (a == nullptr || (a->elem_type != ValueType::kF32 && a->elem_type != ValueType::kF64)) {
    return type_error(key, "array of f32 or f64", *v);
  }
  std::vector<float> out;
  out.reserve(a->items.size());
  for (const Value& item : a->items) out.push_back(static_cast<float>(std::get<double>(item.data)));
  return out;
}

Expected<std::vector<int32_t>> File::get_i32_array(std::string_view key) const {
  MINFER_ASSIGN_OR_RETURN(const Value* v, require(key));
  const Array* a = std::get_if<Array>(&v->data);
  if (a == nullptr || !is_integer_type(a->elem_type)) return type_error(key, "array of integers", *v);
  std::vector<int32_t> out;
  out.reserve(a->items.size());
  for (size_t i = 0; i < a->items.size(); ++i) {
    const __int128 x = int_of(a->items[i]);
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
      return Error(ErrorCode::kInvalidFile, fmt::format("{}: key '{}': item {} = {} does not fit in i32", path_, key,
                                                        i, int_text(a->items[i])));
    }
    out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

Expected<uint32_t> File::get_u32_or(std::string_view key, uint32_t fallback) const {
  return has(key) ? get_u32(key) : Expected<uint32_t>(fallback);
}

Expected<float> File::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : Expected<float>(fallback);
}

Expected<bool> File::get_bool_or(std::string_view key, bool fallback) const {
  return has(key) ? get_bool(key) : Expected<bool>(fallback);
}

Expected<std::string> File::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : Expected<std::string>(std::move(fallback));
}

}  // namespace minfer::gguf
