#include "engine/chat/tojson.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace minfer {
namespace {

using Json = nlohmann::ordered_json;  // keys in the text's order

// nlohmann's scalar forms are Python's: the same escapes (\" \\ \b \f \n \r
// \t, other controls as lowercase \u00xx, nothing else when ensure_ascii is
// off) and the shortest float that reads back, as repr() writes it.
std::string scalar(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

void dump(const Json& v, int indent, int depth, std::string& out) {
  const bool object = v.is_object();
  if (!object && !v.is_array()) {
    out += scalar(v);
    return;
  }
  if (v.empty()) {
    out += object ? "{}" : "[]";
    return;
  }
  out += object ? '{' : '[';
  const std::string inner = indent < 0 ? std::string() : "\n" + std::string(static_cast<size_t>(indent * (depth + 1)), ' ');
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first) out += indent < 0 ? ", " : ",";
    first = false;
    out += inner;
    if (object) {
      out += scalar(Json(it.key()));
      out += ": ";
    }
    dump(*it, indent, depth + 1, out);
  }
  if (indent >= 0) out += "\n" + std::string(static_cast<size_t>(indent * depth), ' ');
  out += object ? '}' : ']';
}

}  // namespace

Expected<std::string> python_json_dumps(std::string_view json_text, int indent) {
  Json v = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return unexpected(ErrorCode::kInvalidArgument, "not a JSON text");
  std::string out;
  dump(v, indent, 0, out);
  return out;
}

std::string python_json_string(std::string_view text) { return scalar(Json(std::string(text))); }

}  // namespace minfer
