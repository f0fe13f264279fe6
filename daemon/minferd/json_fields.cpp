#include "daemon/minferd/json_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace minfer::daemon {
namespace {

ApiError wrong_type(const std::string& name, const char* expected, const Json& got) {
  return invalid_request(name, "invalid_type",
                         fmt::format("'{}' must be {}, got {}", name, expected, json_type_phrase(got)));
}

const Json* find(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

const char* json_type_phrase(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number with a fraction";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "invalid JSON";
  }
  return "an unknown type";
}

std::optional<ApiError> parse_json_object(std::string_view body, Json* out) {
  // allow_exceptions=false: malformed input yields a `discarded` value. The
  // parser and the destructor are iterative, so deep nesting cannot overflow
  // the stack (a test sends 100k nested arrays).
  Json j = Json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) {
    ApiError e = invalid_request("", "invalid_json", "the request body is not valid JSON");
    if (body.empty()) e.message = "the request body is empty; expected a JSON object";
    return e;
  }
  if (!j.is_object()) {
    return invalid_request("", "invalid_json",
                           fmt::format("the request body must be a JSON object, got {}", json_type_phrase(j)));
  }
  *out = std::move(j);
  return std::nullopt;
}

std::optional<ApiError> read_number(const Json& obj, const char* name, std::optional<double>* out) {
  const Json* v = find(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) {
    return invalid_request(name, "invalid_value", fmt::format("'{}' must be a finite number", name));
  }
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> read_integer(const Json& obj, const char* name, std::optional<int64_t>* out) {
  const Json* v = find(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) return wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = std::numeric_limits<int64_t>::max();  // out of every range we accept; the caller reports it
  } else {
    *out = v->get<int64_t>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_bool(const Json& obj, const char* name, std::optional<bool>* out) {
  const Json* v = find(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return wrong_type(name, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> read_string(const Json& obj, const char* name, std::optional<std::string>* out) {
  const Json* v = find(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return wrong_type(name, "a string", *v);
  *out = v->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> read_token_ids(const Json& value, const std::string& param, int vocab_size,
                                       std::vector<int32_t>* out) {
  if (!value.is_array()) return wrong_type(param, "an array of token ids", value);
  out->clear();
  out->reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    const Json& t = value[i];
    if (!t.is_number_integer()) {
      return invalid_request(param, "invalid_type",
                             fmt::format("'{}'[{}] must be an integer token id, got {}", param, i, json_type_phrase(t)));
    }
    const bool negative = t.is_number_integer() && !t.is_number_unsigned() && t.get<int64_t>() < 0;
    if (negative || t.get<uint64_t>() >= static_cast<uint64_t>(vocab_size)) {
      return invalid_request(param, "invalid_value",
                             fmt::format("'{}'[{}] is {}, outside the vocabulary [0, {})", param, i, t.dump(),
                                         vocab_size));
    }
    out->push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

}  // namespace minfer::daemon
