#include "engine/sampling/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/sampling/string_pattern.h"

namespace minfer {

struct SchemaNode {
  enum class Kind : uint8_t { kAnyOf, kObject, kArray, kString, kNumber, kInteger, kLiterals };
  Kind kind = Kind::kString;
  std::vector<std::string> keys;      // object: each key's JSON text, quotes included
  std::vector<bool> required;         // object: per key
  std::vector<int32_t> children;      // object: each key's value; array: {items, prefixItems...}; anyOf: the alternatives
  int32_t min_items = 0, max_items = INT32_MAX;  // array: items; map (free_keys): keys
  // Array with uniqueItems (its items one literals node): each literal's
  // bit among the distinct values (1 and 1.0 share one); the array frame's
  // c holds the bits of the values written.
  std::vector<int32_t> unique_bits;
  std::vector<std::string> literals;  // kLiterals: each allowed value's JSON text
  // Object: any keys (children {value, key string}) instead of `keys`: a map.
  bool free_keys = false;
  // String: how many characters (minLength, maxLength), and what they spell
  // (pattern or format; null: anything).
  int32_t min_length = 0, max_length = INT32_MAX;
  std::shared_ptr<const StringPattern> pattern;
  // Integer or number held to bounds or a multiple (minimum, maximum, their
  // exclusive forms, multipleOf): its values counted in units of
  // 10^-scale (an integer's scale is 0; a number's the multiple's
  // decimals, else kMaxScale), [min_units, max_units] (unbounded:
  // ±kUnbounded), multiples of `step` units (0: any). Such a number is
  // written without an exponent and with at most `scale` decimals.
  bool held = false;
  int32_t scale = 0;
  int64_t min_units = -kUnbounded, max_units = kUnbounded, step = 0;
  static constexpr int64_t kUnbounded = int64_t{1} << 62;
  static constexpr int32_t kMaxScale = 9;
};

namespace {

using Json = nlohmann::ordered_json;  // keys in the schema's order: the order they are written in
using Kind = SchemaNode::Kind;

Error refuse(const std::string& where, const std::string& what) {
  return Error(ErrorCode::kInvalidArgument, fmt::format("JSON schema at {}: {}", where.empty() ? "the root" : where, what));
}

// Keywords read as comments, and the definitions that references name:
// what may stand beside "$ref" and a one-schema "allOf".
bool is_annotation(const std::string& key) {
  static const std::set<std::string> kAnnotations = {"title", "description", "default", "$schema", "$defs", "definitions"};
  return kAnnotations.count(key) > 0;
}

// 10^e, e in [0, 18].
int64_t pow10(int e) {
  int64_t p = 1;
  while (e-- > 0) p *= 10;
  return p;
}

// x × 10^e (x ≥ 0), at most SchemaNode::kUnbounded: beyond every bound.
int64_t scaled(int64_t x, int e) {
  for (; e > 0; --e) x = x > SchemaNode::kUnbounded / 10 ? SchemaNode::kUnbounded : 10 * x;
  return x;
}

// Whether [lo, hi] holds a multiple of `step` (0: any value).
bool multiple_within(int64_t lo, int64_t hi, int64_t step) {
  if (lo > hi) return false;
  if (step == 0) return true;
  const int64_t least = (lo / step + (lo % step > 0 ? 1 : 0)) * step;  // the least multiple from lo
  return least <= hi;
}

// A JSON number exactly as it is written (its shortest text): ± mantissa ×
// 10^-decimals, no trailing zeros among the decimals.
struct Decimal {
  bool negative = false;
  int64_t mantissa = 0;
  int decimals = 0;
  // The value in units of 10^-scale, rounded up or down to one.
  int64_t units(int scale, bool up) const {
    const int e = scale - decimals;
    int64_t whole = e >= 0 ? scaled(mantissa, e) : e < -18 ? 0 : mantissa / pow10(-e);
    const bool rest = e < 0 && (e < -18 ? mantissa != 0 : mantissa % pow10(-e) != 0);
    if (negative) return -whole - (rest && !up ? 1 : 0);
    return whole + (rest && up ? 1 : 0);
  }
};
Decimal decimal(const Json& v) {
  const std::string text = v.dump();
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') d.negative = true, ++i;
  bool point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.') {
      point = true;
    } else if (c == 'e' || c == 'E') {
      d.decimals -= static_cast<int>(std::strtol(text.c_str() + i + 1, nullptr, 10));
      break;
    } else if (d.mantissa < int64_t{1} << 58) {  // (17 significant digits at most: always)
      d.mantissa = 10 * d.mantissa + (c - '0');
      d.decimals += point ? 1 : 0;
    } else if (!point) {
      --d.decimals;
    }
  }
  while (d.decimals > 0 && d.mantissa % 10 == 0) d.mantissa /= 10, --d.decimals;
  if (d.decimals < 0) d.mantissa = scaled(d.mantissa, -d.decimals), d.decimals = 0;
  return d;
}

class Compiler {
 public:
  // The whole document, which local references ("#/$defs/Name") point into;
  // its root's node is the caller's node 0 ("#").
  explicit Compiler(const Json& document) : document_(document) {
    refs_["#"] = 0;
    unguarded_.insert("#");
  }

  std::vector<SchemaNode> nodes;

  Expected<int32_t> node(const Json& s, const std::string& where, int depth) {
    if (depth > 32) return unexpected(refuse(where, "nested more than 32 levels"));
    if (!s.is_object()) return unexpected(refuse(where, "a schema must be an object"));
    static const std::set<std::string> kKnown = {"type",    "properties", "required", "additionalProperties",
                                                 "items",   "minItems",   "maxItems", "enum",
                                                 "const",   "anyOf",      "allOf",    "$ref",
                                                 "minimum", "maximum",    "exclusiveMinimum", "exclusiveMaximum",
                                                 "multipleOf", "minLength", "maxLength", "pattern", "format",
                                                 "oneOf",   "discriminator", "propertyNames", "minProperties", "maxProperties",
                                                 "prefixItems", "uniqueItems"};
    for (const auto& [key, value] : s.items()) {
      if (!kKnown.count(key) && !is_annotation(key)) {
        return unexpected(refuse(where, fmt::format("'{}' is not supported", key)));
      }
    }
    for (const char* only : {"$ref", "allOf"}) {
      if (!s.contains(only)) continue;
      for (const auto& [key, value] : s.items()) {
        if (key != only && !is_annotation(key)) {
          return unexpected(refuse(where, fmt::format("'{}' beside '{}' is not supported", key, only)));
        }
      }
    }
    for (const char* bound : kNumeric) {
      if (s.contains(bound) && !typed_as(s, "integer") && !typed_as(s, "number")) {
        return unexpected(refuse(where, fmt::format("'{}' is supported with \"type\": \"integer\" or \"number\" only", bound)));
      }
    }
    for (const char* bound : {"minLength", "maxLength", "pattern", "format"}) {
      if (s.contains(bound) && !typed_as(s, "string")) {
        return unexpected(refuse(where, fmt::format("'{}' is supported with \"type\": \"string\" only", bound)));
      }
    }
    if (s.contains("$ref")) return ref(s["$ref"], where);
    if (s.contains("allOf")) {  // as Pydantic writes a described reference: one schema
      const Json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return unexpected(refuse(where, "'allOf' is supported with one schema only"));
      }
      return node(all[0], where + ".allOf[0]", depth + 1);
    }
    if (s.contains("enum") || s.contains("const")) {
      SchemaNode n;
      n.kind = Kind::kLiterals;
      const Json values = s.contains("const") ? Json::array({s["const"]}) : s["enum"];
      if (!values.is_array() || values.empty()) return unexpected(refuse(where, "'enum' must be a non-empty array"));
      for (const Json& v : values) {
        if (v.is_structured()) return unexpected(refuse(where, "'enum' and 'const' values must be strings, numbers, booleans or null"));
        n.literals.push_back(v.dump());
      }
      return add(std::move(n));
    }
    if (s.contains("anyOf") && s.contains("oneOf")) {
      return unexpected(refuse(where, "'anyOf' and 'oneOf' together are not supported"));
    }
    if (s.contains("discriminator") && !s.contains("oneOf") && !s.contains("anyOf")) {
      return unexpected(refuse(where, "'discriminator' belongs beside 'oneOf' or 'anyOf'"));
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const Json& alts = s[key];
      if (!alts.is_array() || alts.empty()) return unexpected(refuse(where, fmt::format("'{}' must be a non-empty array", key)));
      SchemaNode n;
      n.kind = Kind::kAnyOf;
      for (size_t i = 0; i < alts.size(); ++i) {
        MINFER_ASSIGN_OR_RETURN(int32_t child, node(alts[i], fmt::format("{}.{}[{}]", where, key, i), depth + 1));
        n.children.push_back(child);
      }
      // Exactly one alternative: held as anyOf where no value can be two.
      if (std::string_view(key) == "oneOf" && !told_apart(n.children)) {
        return unexpected(refuse(where, "'oneOf' is supported where no value can match two alternatives: each of "
                                        "another JSON type, or objects told apart by a required property of "
                                        "distinct constant values (a discriminator, as Pydantic writes unions)"));
      }
      return add(std::move(n));
    }
    if (!s.contains("type")) return any();  // {} (or comments only): any value
    const Json& type = s["type"];
    if (type.is_array()) {
      if (type.empty()) return unexpected(refuse(where, "'type' is an empty list"));
      SchemaNode n;
      n.kind = Kind::kAnyOf;
      for (const Json& t : type) {
        if (!t.is_string()) return unexpected(refuse(where, "'type' lists strings"));
        MINFER_ASSIGN_OR_RETURN(int32_t child, typed(s, t.get<std::string>(), where, depth));
        n.children.push_back(child);
      }
      return add(std::move(n));
    }
    if (!type.is_string()) return unexpected(refuse(where, "'type' must be a string or a list of strings"));
    return typed(s, type.get<std::string>(), where, depth);
  }

 private:
  int32_t add(SchemaNode n) {
    nodes.push_back(std::move(n));
    return static_cast<int32_t>(nodes.size() - 1);
  }

  // Any JSON value: an object of any keys, an array, a string, a number,
  // true, false or null — one node, made once, that its containers refer to.
  int32_t any() {
    if (any_ >= 0) return any_;
    any_ = add(SchemaNode{});
    nodes[static_cast<size_t>(any_)].kind = Kind::kAnyOf;
    const int32_t key = add(SchemaNode{});  // kString
    SchemaNode object;
    object.kind = Kind::kObject;
    object.free_keys = true;
    object.children = {any_, key};
    SchemaNode array;
    array.kind = Kind::kArray;
    array.children = {any_};
    SchemaNode number;
    number.kind = Kind::kNumber;
    SchemaNode literals;
    literals.kind = Kind::kLiterals;
    literals.literals = {"true", "false", "null"};
    std::vector<int32_t> alternatives = {add(std::move(object)), add(std::move(array)), key, add(std::move(number)),
                                         add(std::move(literals))};
    nodes[static_cast<size_t>(any_)].children = std::move(alternatives);
    return any_;
  }
  // uniqueItems: true where the items are one set of literals (a set of an
  // enum, of booleans): each value at most once, so at most as many items
  // as distinct values. Other items would need every earlier item kept.
  Status unique_items(const Json& s, const std::string& where, SchemaNode* n) {
    if (!s.contains("uniqueItems")) return ok_status();
    if (!s["uniqueItems"].is_boolean()) return unexpected(refuse(where, "'uniqueItems' must be a boolean"));
    if (s["uniqueItems"] == false) return ok_status();
    const int32_t items = resolved(n->children[0]);
    if (n->children.size() != 1 || items < 0 || nodes[static_cast<size_t>(items)].kind != Kind::kLiterals ||
        nodes[static_cast<size_t>(items)].literals.size() > 31) {
      return unexpected(refuse(where, "'uniqueItems' is supported where the items are at most 31 enumerated values "
                                      "(a set of an enum or of booleans), not other items"));
    }
    std::vector<Json> values;
    for (const std::string& l : nodes[static_cast<size_t>(items)].literals) {
      const Json v = Json::parse(l);
      const auto same = std::find(values.begin(), values.end(), v);
      n->unique_bits.push_back(static_cast<int32_t>(same - values.begin()));
      if (same == values.end()) values.push_back(v);
    }
    const auto distinct = static_cast<int32_t>(values.size());
    if (n->min_items > distinct) {
      return unexpected(refuse(where, fmt::format("'minItems' is above the {} distinct values of unique items", distinct)));
    }
    n->max_items = std::min(n->max_items, distinct);
    return ok_status();
  }

  // The node a reference stands for (an alternative of one), or -1 while
  // it is still being compiled.
  int32_t resolved(int32_t id) const {
    for (int hops = 0; hops < 64; ++hops) {
      const SchemaNode& n = nodes[static_cast<size_t>(id)];
      if (n.kind == Kind::kAnyOf && n.children.empty()) return -1;  // a reference still being compiled
      if (n.kind != Kind::kAnyOf || n.children.size() != 1) return id;
      id = n.children[0];
    }
    return -1;
  }
  // The JSON types a node's values can have (bits: object, array, string,
  // integer, fraction, true/false, null; 1.0 is an integer, as JSON Schema
  // counts them); all of them where unknown.
  uint32_t types_of(int32_t id, int depth = 0) const {
    enum : uint32_t { kObj = 1, kArr = 2, kStr = 4, kInt = 8, kFrac = 16, kBool = 32, kNull = 64, kAll = 127 };
    id = resolved(id);
    if (id < 0 || depth > 16) return kAll;
    const SchemaNode& n = nodes[static_cast<size_t>(id)];
    switch (n.kind) {
      case Kind::kObject: return kObj;
      case Kind::kArray: return kArr;
      case Kind::kString: return kStr;
      case Kind::kInteger: return kInt;
      case Kind::kNumber: return kInt | kFrac;
      case Kind::kAnyOf: {
        uint32_t t = 0;
        for (const int32_t c : n.children) t |= types_of(c, depth + 1);
        return t;
      }
      case Kind::kLiterals: {
        uint32_t t = 0;
        for (const std::string& l : n.literals) {
          const Json v = Json::parse(l);
          const bool fraction = v.is_number_float() && std::trunc(v.get<double>()) != v.get<double>();
          t |= v.is_string() ? kStr : v.is_boolean() ? kBool : v.is_null() ? kNull : fraction ? kFrac : kInt;
        }
        return t;
      }
    }
    return kAll;
  }
  // A required key of object node `id` whose value is literals: their values.
  std::vector<Json> constants(int32_t id, const std::string& key) const {
    const SchemaNode& n = nodes[static_cast<size_t>(id)];
    for (size_t i = 0; i < n.keys.size(); ++i) {
      if (n.keys[i] != key || !n.required[i]) continue;
      const int32_t value = resolved(n.children[i]);
      if (value < 0 || nodes[static_cast<size_t>(value)].kind != Kind::kLiterals) return {};
      std::vector<Json> out;
      for (const std::string& l : nodes[static_cast<size_t>(value)].literals) out.push_back(Json::parse(l));
      return out;
    }
    return {};
  }
  // Whether no value can match two of the alternatives: their JSON types
  // are apart, or they are objects with a required key whose constants are
  // apart (1 and 1.0 are one value).
  bool told_apart(const std::vector<int32_t>& alternatives) const {
    uint32_t seen = 0;
    bool typed_apart = true;
    for (const int32_t a : alternatives) {
      const uint32_t t = types_of(a);
      typed_apart = typed_apart && (t & seen) == 0;
      seen |= t;
    }
    if (typed_apart) return true;
    std::vector<int32_t> objects;
    for (const int32_t a : alternatives) {
      const int32_t id = resolved(a);
      if (id < 0 || nodes[static_cast<size_t>(id)].kind != Kind::kObject || nodes[static_cast<size_t>(id)].free_keys) {
        return false;
      }
      objects.push_back(id);
    }
    for (const std::string& key : nodes[static_cast<size_t>(objects[0])].keys) {
      std::vector<Json> all;
      bool apart = true;
      for (const int32_t id : objects) {
        const std::vector<Json> values = constants(id, key);
        apart = apart && !values.empty();
        for (const Json& v : values) {
          apart = apart && std::find(all.begin(), all.end(), v) == all.end();
          all.push_back(v);
        }
      }
      if (apart) return true;
    }
    return false;
  }

  // An object of any keys, each value of node `value`: a map. Its keys are
  // any string, or strings of propertyNames (its length, pattern or
  // format); minProperties and maxProperties bound their number.
  Expected<int32_t> map_of(const Json& s, int32_t value, const std::string& where, int depth) {
    SchemaNode object;
    object.kind = Kind::kObject;
    object.free_keys = true;
    int32_t key = nodes[static_cast<size_t>(any())].children[2];  // any's string node
    if (s.contains("propertyNames")) {
      Json names = s["propertyNames"];
      if (names.is_object() && !names.contains("type")) names["type"] = "string";  // keys are strings
      MINFER_ASSIGN_OR_RETURN(key, node(names, where + ".propertyNames", depth + 1));
      key = resolved(key);
      if (key < 0 || nodes[static_cast<size_t>(key)].kind != Kind::kString) {
        return unexpected(refuse(where, "'propertyNames' is supported as a string's length, pattern or format"));
      }
    }
    MINFER_TRY(counts(s, where, "minProperties", "maxProperties", &object.min_items, &object.max_items));
    object.children = {value, key};
    return add(std::move(object));
  }
  int32_t any_ = -1;

  static constexpr const char* kNumeric[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
  // The most a bound or multiple may be, either way: a value's integer
  // digits are followed up to INT32_MAX (number()), one past every bound.
  static constexpr int64_t kBoundLimit = INT32_MAX - 1;

  // Whether the schema's type is `type` or a list that names it.
  static bool typed_as(const Json& s, const char* type) {
    if (!s.contains("type")) return false;
    const Json& t = s["type"];
    return t == type || (t.is_array() && std::find(t.begin(), t.end(), Json(type)) != t.end());
  }

  // An integer's or a number's bounds and multiple, in units of 10^-scale
  // (SchemaNode::held): exclusive bounds made inclusive, a number's scale
  // its multiple's decimals (at most kMaxScale) or else kMaxScale.
  Status numeric_bounds(const Json& s, const std::string& where, bool integer, SchemaNode* n) {
    bool held = false;
    for (const char* key : kNumeric) {
      if (!s.contains(key)) continue;
      held = true;
      const Json& v = s[key];
      if (!v.is_number()) return unexpected(refuse(where, fmt::format("'{}' must be a number", key)));
      if (!(std::fabs(v.get<double>()) <= static_cast<double>(kBoundLimit))) {
        return unexpected(refuse(where, fmt::format("'{}' {} is beyond the supported ±{}", key, v.dump(), kBoundLimit)));
      }
    }
    if (!held) return ok_status();
    n->held = true;
    n->scale = integer ? 0 : SchemaNode::kMaxScale;
    if (s.contains("multipleOf")) {
      const Decimal m = decimal(s["multipleOf"]);
      if (m.negative || m.mantissa == 0) return unexpected(refuse(where, "'multipleOf' must be above 0"));
      if (m.decimals > SchemaNode::kMaxScale) {
        return unexpected(refuse(where, fmt::format("'multipleOf' {} has more than {} decimals", s["multipleOf"].dump(),
                                                    SchemaNode::kMaxScale)));
      }
      // An integer is a multiple of p / 10^d when it is one of p / gcd(p, 10^d).
      n->scale = integer ? 0 : m.decimals;
      n->step = integer ? m.mantissa / std::gcd(m.mantissa, pow10(m.decimals)) : m.mantissa;
    }
    for (const char* key : kNumeric) {
      if (!s.contains(key) || std::string_view(key) == "multipleOf") continue;
      const Decimal x = decimal(s[key]);
      const std::string_view name(key);
      if (name == "minimum") n->min_units = std::max(n->min_units, x.units(n->scale, true));
      if (name == "exclusiveMinimum") n->min_units = std::max(n->min_units, x.units(n->scale, false) + 1);
      if (name == "maximum") n->max_units = std::min(n->max_units, x.units(n->scale, false));
      if (name == "exclusiveMaximum") n->max_units = std::min(n->max_units, x.units(n->scale, true) - 1);
    }
    if (!multiple_within(n->min_units, n->max_units, n->step)) {
      if (n->step != 0) {
        return unexpected(refuse(where, fmt::format("no multiple of {} lies within its minimum and maximum",
                                                    s["multipleOf"].dump())));
      }
      return unexpected(refuse(where, fmt::format("no {} lies within its minimum and maximum", integer ? "integer" : "number")));
    }
    return ok_status();
  }

  // A local reference: the node of the schema it points to, compiled once
  // (a reference met again, recursion included, is that node). A node
  // stands for it, an alternative of one, filled when its target is
  // compiled. A reference back to one still being compiled with no object
  // or array opened in between would be a value made of itself: refused.
  Expected<int32_t> ref(const Json& target, const std::string& where) {
    if (!target.is_string()) return unexpected(refuse(where, "'$ref' must be a string"));
    const std::string pointer = target.get<std::string>();
    if (auto it = refs_.find(pointer); it != refs_.end()) {
      if (unguarded_.count(pointer)) {
        return unexpected(refuse(where, fmt::format("'$ref' {} refers back to itself with no object or array in "
                                                    "between: the value would be made of itself",
                                                    pointer)));
      }
      return it->second;
    }
    if (pointer.empty() || pointer[0] != '#') {
      return unexpected(refuse(where, fmt::format("'$ref' {} is not local: only '#/...' references are supported", pointer)));
    }
    const Json* schema = nullptr;
    try {
      schema = &document_.at(Json::json_pointer(pointer.substr(1)));
    } catch (const Json::exception&) {
      return unexpected(refuse(where, fmt::format("'$ref' {} names nothing in the schema", pointer)));
    }
    const int32_t stand_in = add(SchemaNode{});
    nodes[static_cast<size_t>(stand_in)].kind = Kind::kAnyOf;
    refs_[pointer] = stand_in;
    unguarded_.insert(pointer);
    auto compiled = node(*schema, pointer, 0);
    unguarded_.erase(pointer);
    if (!compiled) return compiled;
    nodes[static_cast<size_t>(stand_in)].children = {*compiled};
    return stand_in;
  }
  // A value inside an object or array: references from there back to the
  // ones being compiled are recursion through the container, which is fine.
  Expected<int32_t> guarded(const Json& s, const std::string& where, int depth) {
    std::set<std::string> outside;
    outside.swap(unguarded_);
    auto r = node(s, where, depth);
    unguarded_.swap(outside);
    return r;
  }
  const Json& document_;
  std::map<std::string, int32_t> refs_;  // pointer -> its stand-in node
  std::set<std::string> unguarded_;      // references being compiled with no container opened since

  // A pair of count bounds (minItems/maxItems, minLength/maxLength), each
  // where given: at most 2^20.
  static Status counts(const Json& s, const std::string& where, const char* min_key, const char* max_key, int32_t* min,
                       int32_t* max) {
    for (const char* key : {min_key, max_key}) {
      if (!s.contains(key)) continue;
      if (!s[key].is_number_unsigned() || s[key].get<uint64_t>() > 1u << 20) {
        return unexpected(refuse(where, fmt::format("'{}' must be a count", key)));
      }
      *(key == min_key ? min : max) = static_cast<int32_t>(s[key].get<uint64_t>());
    }
    if (*min > *max) return unexpected(refuse(where, fmt::format("'{}' is above '{}'", min_key, max_key)));
    return ok_status();
  }

  Expected<int32_t> typed(const Json& s, const std::string& type, const std::string& where, int depth) {
    SchemaNode n;
    if (type == "string") {
      n.kind = Kind::kString;
      MINFER_TRY(counts(s, where, "minLength", "maxLength", &n.min_length, &n.max_length));
      if (s.contains("pattern") && s.contains("format")) {
        return unexpected(refuse(where, "'pattern' and 'format' together are not supported"));
      }
      for (const char* key : {"pattern", "format"}) {
        if (!s.contains(key)) continue;
        if (!s[key].is_string()) return unexpected(refuse(where, fmt::format("'{}' must be a string", key)));
        const std::string text = s[key].get<std::string>();
        auto compiled = std::string_view(key) == "pattern" ? StringPattern::compile(text) : StringPattern::format(text);
        if (!compiled) return unexpected(refuse(where, fmt::format("'{}' {}: {}", key, s[key].dump(), compiled.error().message)));
        n.pattern = std::move(*compiled);
      }
    } else if (type == "number" || type == "integer") {
      n.kind = type == "number" ? Kind::kNumber : Kind::kInteger;
      MINFER_TRY(numeric_bounds(s, where, type == "integer", &n));
    } else if (type == "boolean") {
      n.kind = Kind::kLiterals;
      n.literals = {"true", "false"};
    } else if (type == "null") {
      n.kind = Kind::kLiterals;
      n.literals = {"null"};
    } else if (type == "object") {
      n.kind = Kind::kObject;
      // Keys beside the properties: none (false), or, where there are no
      // properties, any (a map, as Pydantic writes dict[str, X]: true or
      // absent, any values; a schema, values of it).
      const bool listed = s.contains("properties") && !(s["properties"].is_object() && s["properties"].empty());
      if (s.contains("additionalProperties") && s["additionalProperties"] != false) {
        const Json& extra = s["additionalProperties"];
        if (!extra.is_boolean() && !extra.is_object()) {
          return unexpected(refuse(where, "'additionalProperties' must be a boolean or a schema"));
        }
        if (listed) {
          return unexpected(refuse(where, "'additionalProperties' beside 'properties' may only be false (the "
                                          "properties' keys are written in order, no other)"));
        }
        if (s.contains("required") && !s["required"].empty()) {
          return unexpected(refuse(where, "'required' names keys not in 'properties'"));
        }
        int32_t value = -1;
        if (extra == true) {
          value = any();
        } else {
          MINFER_ASSIGN_OR_RETURN(value, guarded(extra, where + ".*", depth + 1));
        }
        return map_of(s, value, where, depth);
      }
      // No properties and no word against others: any object (JSON
      // Schema's meaning of {"type": "object"}).
      if (!s.contains("properties") && !s.contains("additionalProperties") && !s.contains("required")) {
        return map_of(s, any(), where, depth);
      }
      for (const char* key : {"propertyNames", "minProperties", "maxProperties"}) {
        if (s.contains(key)) {
          return unexpected(refuse(where, fmt::format("'{}' is supported on maps only (no 'properties')", key)));
        }
      }
      const Json props = s.value("properties", Json::object());
      if (!props.is_object()) return unexpected(refuse(where, "'properties' must be an object"));
      std::set<std::string> required;
      if (s.contains("required")) {
        if (!s["required"].is_array()) return unexpected(refuse(where, "'required' must be an array of names"));
        for (const Json& r : s["required"]) {
          if (!r.is_string() || !props.contains(r.get<std::string>())) {
            return unexpected(refuse(where, fmt::format("'required' names {}, which is not in 'properties'", r.dump())));
          }
          required.insert(r.get<std::string>());
        }
      }
      std::vector<int32_t> children;
      for (const auto& [key, value] : props.items()) {
        MINFER_ASSIGN_OR_RETURN(int32_t child, guarded(value, where + "." + key, depth + 1));
        children.push_back(child);
        n.keys.push_back(Json(key).dump());
        n.required.push_back(required.count(key) > 0);
      }
      n.children = std::move(children);
    } else if (type == "array") {
      n.kind = Kind::kArray;
      MINFER_TRY(counts(s, where, "minItems", "maxItems", &n.min_items, &n.max_items));
      // The first items of prefixItems (a tuple), the rest of items: a
      // schema, false (none), or absent (any values).
      std::vector<int32_t> prefix;
      if (s.contains("prefixItems")) {
        const Json& first = s["prefixItems"];
        if (!first.is_array()) return unexpected(refuse(where, "'prefixItems' must be an array of schemas"));
        for (size_t i = 0; i < first.size(); ++i) {
          MINFER_ASSIGN_OR_RETURN(const int32_t item, guarded(first[i], fmt::format("{}[{}]", where, i), depth + 1));
          prefix.push_back(item);
        }
      }
      int32_t items = any();
      if (s.contains("items") && s["items"] == false) {
        n.max_items = std::min(n.max_items, static_cast<int32_t>(prefix.size()));
        if (n.min_items > n.max_items) return unexpected(refuse(where, "'minItems' is above the items that may come"));
      } else if (s.contains("items")) {
        MINFER_ASSIGN_OR_RETURN(items, guarded(s["items"], where + "[]", depth + 1));
      }
      n.children = {items};
      n.children.insert(n.children.end(), prefix.begin(), prefix.end());
      MINFER_TRY(unique_items(s, where, &n));
    } else {
      return unexpected(refuse(where, fmt::format("type '{}' is not a JSON type", type)));
    }
    for (const char* key : {"properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties"}) {
      if (type != "object" && s.contains(key) && s.contains("type") && s["type"].is_string()) {
        return unexpected(refuse(where, fmt::format("'{}' belongs to objects, not {}", key, type)));
      }
    }
    return add(std::move(n));
  }
};

// Phases of each kind's frame.
enum ObjectPhase : uint8_t { kObjStart, kObjKeyOrEnd, kObjKey, kObjKeyText, kObjColon, kObjValue, kObjCommaOrEnd };
enum ArrayPhase : uint8_t { kArrStart, kArrValueOrEnd, kArrValue, kArrInValue, kArrCommaOrEnd };
enum StringPhase : uint8_t { kStrStart, kStrIn, kStrEscape, kStrUnicode };
enum NumberPhase : uint8_t { kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits };
enum LiteralPhase : uint8_t { kLitStart, kLitIn };
enum Gap : uint8_t { kGapNone, kGapSpace, kGapNewline };
constexpr int kMaxIndent = JsonSchemaGrammar::kMaxIndent;

bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_hex(unsigned char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

using Branch = JsonSchemaGrammar::Branch;
using Frame = JsonSchemaGrammar::Frame;

// Whether a held number (SchemaNode::held) whose characters so far frame f
// holds (Stepper::number) can lie within its node's bounds and be a multiple
// of its step: the value itself when it ends here, else any number those
// characters begin (integer digits, then decimals up to the node's scale).
bool reachable(const SchemaNode& n, const Frame& f, bool ends) {
  const bool negative = (f.b & 1) != 0;
  const int decimals = f.b >> 1;
  auto within = [&](int64_t low, int64_t high) {  // magnitudes
    return negative ? multiple_within(std::max(-high, n.min_units), std::min(-low, n.max_units), n.step)
                    : multiple_within(std::max(low, n.min_units), std::min(high, n.max_units), n.step);
  };
  const int64_t here = std::min(SchemaNode::kUnbounded, scaled(f.a, n.scale) + scaled(f.c, n.scale - decimals));
  if (ends) return within(here, here);
  switch (f.phase) {
    case kNumMinus: return within(0, SchemaNode::kUnbounded);
    case kNumZero: return within(0, pow10(n.scale) - 1);
    case kNumDot:
    case kNumFrac: return within(here, here + (pow10(n.scale - decimals) - 1));
    default: break;
  }
  // kNumInt: f.a's digits, j more, then any decimals: [f.a, f.a + 1) × 10^j.
  for (int64_t span = pow10(n.scale); span < SchemaNode::kUnbounded; span = scaled(span, 1)) {
    if (f.a > SchemaNode::kUnbounded / span) return false;
    const int64_t low = f.a * span;
    if (within(low, std::min(SchemaNode::kUnbounded, low + (span - 1)))) return true;
  }
  return false;
}

class Stepper {
 public:
  Stepper(const std::vector<SchemaNode>& nodes, std::vector<Branch>* out) : nodes_(nodes), out_(out) {}

  // `b` with the value of `node` begun (anyOf: one branch an alternative),
  // at `phase`; none past kMaxDepth frames. Each alternative node is
  // expanded once: references shared by many alternatives (D0 = anyOf[D1,
  // D1], D1 = anyOf[D2, D2], ...) give one branch a value, not 2^n.
  void push_value(Branch b, int32_t node, std::vector<Branch>* into, uint8_t phase = 0) const {
    if (nodes_[static_cast<size_t>(node)].kind != Kind::kAnyOf) {  // one alternative: the common case
      if (static_cast<int>(b.stack.size()) >= JsonSchemaGrammar::kMaxDepth) return;
      b.stack.push_back(Frame{node, phase, 0, 0});
      into->push_back(std::move(b));
      return;
    }
    std::vector<int32_t> expanded;
    push_alternatives(b, node, into, phase, &expanded);
  }

  // The top value of `b` is complete: its parent moves on (an object's key
  // to its colon, an object's value or an array's item to a comma or close).
  void pop(Branch& b) const {
    const int32_t which = b.stack.back().a;  // a literal's index (unique items)
    b.stack.pop_back();
    if (b.stack.empty()) return;
    Frame& parent = b.stack.back();
    const SchemaNode& n = nodes_[static_cast<size_t>(parent.node)];
    if (n.kind == Kind::kObject) {
      if (parent.phase != kObjKeyText && n.free_keys && counted(n)) ++parent.a;  // a map's entries so far
      parent.phase = parent.phase == kObjKeyText ? kObjColon : kObjCommaOrEnd;
    } else {
      parent.phase = kArrCommaOrEnd;
      ++parent.a;
      if (!n.unique_bits.empty()) parent.c |= 1 << n.unique_bits[static_cast<size_t>(which)];
    }
  }

  void feed(Branch b, unsigned char c) const {
    if (b.stack.empty()) {  // complete: whitespace only
      if (is_space(c) && gap_ok(b, c)) out_->push_back(std::move(b));
      return;
    }
    Frame& f = b.stack.back();
    const SchemaNode& n = nodes_[static_cast<size_t>(f.node)];
    if (structural(n.kind, f.phase)) {
      if (is_space(c)) {
        if (gap_ok(b, c)) out_->push_back(std::move(b));
        return;
      }
      b.gap = kGapNone;
    }
    switch (n.kind) {
      case Kind::kObject: return object(std::move(b), n, c);
      case Kind::kArray: return array(std::move(b), n, c);
      case Kind::kString: return string(std::move(b), n, c);
      case Kind::kNumber:
      case Kind::kInteger: return number(std::move(b), n, c);
      case Kind::kLiterals: return literal(std::move(b), n, c);
      case Kind::kAnyOf: return;  // expanded when pushed
    }
  }

 private:
  void push_alternatives(const Branch& b, int32_t node, std::vector<Branch>* into, uint8_t phase,
                         std::vector<int32_t>* expanded) const {
    if (std::find(expanded->begin(), expanded->end(), node) != expanded->end()) return;
    expanded->push_back(node);
    const SchemaNode& n = nodes_[static_cast<size_t>(node)];
    if (n.kind == Kind::kAnyOf) {
      for (const int32_t alt : n.children) push_alternatives(b, alt, into, phase, expanded);
      return;
    }
    if (static_cast<int>(b.stack.size()) >= JsonSchemaGrammar::kMaxDepth) return;
    Branch begun = b;
    begun.stack.push_back(Frame{node, phase, 0, 0});
    into->push_back(std::move(begun));
  }

  static bool structural(Kind kind, uint8_t phase) {
    switch (kind) {
      case Kind::kObject: return phase != kObjKeyText && phase != kObjValue;  // (a free key's string is its own frame)
      case Kind::kArray: return phase != kArrInValue;
      default: return phase == 0;  // before a scalar
    }
  }
  static bool gap_ok(Branch& b, unsigned char c) {
    if (b.gap == kGapNone && (c == ' ' || c == '\n')) {
      b.gap = c == ' ' ? kGapSpace : kGapNewline;
      b.indent = 0;
      return true;
    }
    return b.gap == kGapNewline && (c == ' ' || c == '\t') && ++b.indent <= kMaxIndent;
  }
  // Whether a map counts its entries (it has bounds on them).
  static bool counted(const SchemaNode& n) { return n.min_items > 0 || n.max_items < INT32_MAX; }
  // Keys [from, n) that can come next: those after which no required key is skipped.
  static bool required_in(const SchemaNode& n, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (n.required[i]) return true;
    }
    return false;
  }

  void object(Branch b, const SchemaNode& n, unsigned char c) const {
    Frame& f = b.stack.back();
    switch (f.phase) {
      case kObjStart:
        if (c != '{') return;
        f.phase = kObjKeyOrEnd;
        f.b = 0;
        out_->push_back(std::move(b));
        return;
      case kObjKeyOrEnd:
      case kObjKey:
      case kObjCommaOrEnd: {
        const size_t next = static_cast<size_t>(f.b);
        if (n.free_keys) {  // any key: a string, then its value; f.a entries so far (where counted)
          if (f.phase == kObjCommaOrEnd && c == ',') {
            if (f.a >= n.max_items) return;
            f.phase = kObjKey;
            out_->push_back(std::move(b));
          } else if (f.phase != kObjKey && c == '}') {
            if (f.a < n.min_items) return;
            pop(b);
            out_->push_back(std::move(b));
          } else if (f.phase != kObjCommaOrEnd && c == '"') {
            if (n.max_items == 0) return;
            f.phase = kObjKeyText;
            push_value(std::move(b), n.children[1], out_, kStrIn);
          }
          return;
        }
        if (f.phase == kObjCommaOrEnd && c == ',') {
          if (next >= n.keys.size()) return;
          f.phase = kObjKey;
          out_->push_back(std::move(b));
          return;
        }
        if (f.phase != kObjKey && c == '}') {
          if (required_in(n, next, n.keys.size())) return;
          pop(b);
          out_->push_back(std::move(b));
          return;
        }
        if (f.phase == kObjCommaOrEnd || c != '"') return;
        for (size_t j = next; j < n.keys.size(); ++j) {
          Branch k = b;
          Frame& kf = k.stack.back();
          kf.phase = kObjKeyText;
          kf.a = static_cast<int32_t>(j);
          kf.b = 1;  // the key text's opening quote
          out_->push_back(std::move(k));
          if (n.required[j]) break;  // a later key would skip this one
        }
        return;
      }
      case kObjKeyText: {
        const std::string& key = n.keys[static_cast<size_t>(f.a)];
        if (static_cast<unsigned char>(key[static_cast<size_t>(f.b)]) != c) return;
        if (++f.b == static_cast<int32_t>(key.size())) {
          f.phase = kObjColon;
          f.b = f.a + 1;  // the next key's index, once this value is done
        }
        out_->push_back(std::move(b));
        return;
      }
      case kObjColon:
        if (c != ':') return;
        f.phase = kObjValue;
        push_value(std::move(b), n.children[n.free_keys ? 0 : static_cast<size_t>(f.a)], out_);
        return;
      default: return;
    }
  }

  void array(Branch b, const SchemaNode& n, unsigned char c) const {
    Frame& f = b.stack.back();
    switch (f.phase) {
      case kArrStart:
        if (c != '[') return;
        f.phase = kArrValueOrEnd;
        out_->push_back(std::move(b));
        return;
      case kArrValueOrEnd:
      case kArrValue: {
        if (f.phase == kArrValueOrEnd && c == ']') {
          if (n.min_items > 0) return;
          pop(b);
          out_->push_back(std::move(b));
          return;
        }
        if (n.max_items == 0) return;
        f.phase = kArrInValue;
        std::vector<Branch> started;
        const size_t at = static_cast<size_t>(f.a) + 1;  // prefixItems' node for this item, else items'
        push_value(std::move(b), n.children[at < n.children.size() ? at : 0], &started);
        for (Branch& s : started) feed(std::move(s), c);
        return;
      }
      case kArrCommaOrEnd:
        if (c == ',' && f.a < n.max_items) {
          f.phase = kArrValue;
          out_->push_back(std::move(b));
        } else if (c == ']' && f.a >= n.min_items) {
          pop(b);
          out_->push_back(std::move(b));
        }
        return;
      default: return;
    }
  }

  // f.b counts the characters so far: a byte that begins one (not a UTF-8
  // continuation byte), or an escape (a \u escape one, a surrogate pair two).
  // A \u escape's code unit builds up in f.c's low 16 bits; kLowNext: it was
  // a high surrogate, and the next thing must be the \u escape of a low one
  // (a lone surrogate is refused: strict parsers — Python's, Pydantic's —
  // reject it).
  static constexpr int32_t kLowNext = 1 << 16;
  // A character's UTF-8 bytes are held too (RFC 3629: no overlong forms, no
  // surrogates, nothing past U+10FFFF; a token may end inside a character):
  // f.c's bits 17-18 count the continuation bytes still to come, bits 19-21
  // name the range of the next one (kUtf8Ranges).
  static constexpr int kUtf8Shift = 17;
  static constexpr std::pair<unsigned char, unsigned char> kUtf8Ranges[] = {
      {0x80, 0xBF}, {0xA0, 0xBF}, {0x80, 0x9F}, {0x90, 0xBF}, {0x80, 0x8F}};
  // Where a string's raw byte c may stand, given the UTF-8 state in f.c:
  // false if not; else the new state.
  static bool utf8_byte(Frame& f, unsigned char c) {
    const int32_t state = f.c >> kUtf8Shift, left = state & 3, range = state >> 2;
    if (left > 0) {
      if (c < kUtf8Ranges[range].first || c > kUtf8Ranges[range].second) return false;
      f.c = (f.c & ((1 << kUtf8Shift) - 1)) | ((left - 1) << kUtf8Shift);
      return true;
    }
    int32_t more = 0, first = 0;  // continuation bytes, and the first one's range
    if (c < 0x80) return true;
    if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      more = 2, first = c == 0xE0 ? 1 : c == 0xED ? 2 : 0;
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3, first = c == 0xF0 ? 3 : c == 0xF4 ? 4 : 0;
    } else {
      return false;  // a continuation byte alone, C0, C1, F5-FF
    }
    f.c = (f.c & ((1 << kUtf8Shift) - 1)) | ((more | first << 2) << kUtf8Shift);
    return true;
  }
  void string(Branch b, const SchemaNode& n, unsigned char c) const {
    Frame& f = b.stack.back();
    const bool low_next = (f.c & kLowNext) != 0;
    if (low_next && ((f.phase == kStrIn && c != '\\') || (f.phase == kStrEscape && c != 'u'))) return;
    switch (f.phase) {
      case kStrStart:
        if (c != '"') return;
        f.phase = kStrIn;
        if (n.pattern) {
          f.a = n.pattern->start();
          if (n.pattern->shortest(f.a) > n.max_length || n.pattern->longest(f.a) < n.min_length) return;
        }
        break;
      case kStrIn:
        if (!n.pattern && !utf8_byte(f, c)) return;  // (a pattern's automaton holds its own)
        if (c == '"') {
          if (f.b < n.min_length || (n.pattern && !n.pattern->accepting(f.a))) return;
          pop(b);
          break;
        }
        if (c < 0x20 || (c == '\\' && n.pattern)) return;  // a pattern's string is written without escapes
        if ((c & 0xC0) != 0x80) {
          if (f.b == n.max_length) return;
          if (n.max_length < INT32_MAX || n.min_length > 0) ++f.b;
        }
        if (n.pattern) {  // its state after the byte, from which the pattern can still end in time
          f.a = n.pattern->next(f.a, c);
          if (f.a < 0 || (n.max_length < INT32_MAX && f.b + n.pattern->shortest(f.a) > n.max_length)) return;
          if (n.min_length > 0 && n.pattern->longest(f.a) < INT32_MAX && f.b + n.pattern->longest(f.a) < n.min_length) return;
          break;
        }
        if (c == '\\') f.phase = kStrEscape;
        break;
      case kStrEscape:
        if (c == 'u') {
          f.phase = kStrUnicode;
          f.a = 4;
          f.c &= kLowNext;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
          f.phase = kStrIn;
        } else {
          return;
        }
        break;
      case kStrUnicode: {
        if (!is_hex(c)) return;
        const int32_t digit = is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
        const int32_t unit = ((f.c & 0xFFFF) << 4 | digit) & 0xFFFF;  // the digits so far
        f.c = (f.c & kLowNext) | unit;
        const int32_t first_two = f.a == 3 ? unit : -1;  // 0xDC-0xDF: a low surrogate
        if (f.a == 4 && low_next && digit != 0xD) return;
        if (first_two >= 0 && low_next != (first_two >= 0xDC && first_two <= 0xDF)) return;
        if (--f.a == 0) {
          f.phase = kStrIn;
          f.c = !low_next && unit >= 0xD800 && unit <= 0xDBFF ? kLowNext : 0;
        }
        break;
      }
      default: return;
    }
    out_->push_back(std::move(b));
  }

  // A held number (SchemaNode::held) keeps its characters so far: its
  // integer digits' value in f.a (at most INT32_MAX, past every bound), in
  // f.b a minus (bit 0) and how many decimals (the rest), their value in
  // f.c; a character is taken only if the number can still end within its
  // bounds (reachable), the number ends only there, and it has no exponent.
  // Any other number ("type": "number") stays within a double's range, as
  // RFC 8259 advises (Pydantic refuses an infinite one): at most
  // kMaxWholeDigits integer digits (counted in f.a) and an exponent of at
  // most kMaxExponent either way (its value in f.c), 1e300 at most.
  static constexpr int32_t kMaxWholeDigits = 20, kMaxExponent = 280;
  void number(Branch b, const SchemaNode& n, unsigned char c) const {
    const bool integer = n.kind == Kind::kInteger;
    Frame& f = b.stack.back();
    auto to = [&](NumberPhase p) {
      f.phase = p;
      if (n.held && !reachable(n, f, false)) return;
      out_->push_back(std::move(b));
    };
    auto decimal_digit = [&]() {
      if (n.held) {
        if (f.b >> 1 == n.scale) return;
        f.c = 10 * f.c + (c - '0');
        f.b += 2;
      }
      to(kNumFrac);
    };
    switch (f.phase) {
      case kNumStart:
        if (c == '-') {
          f.b = n.held ? 1 : 0;
          return to(kNumMinus);
        }
        [[fallthrough]];
      case kNumMinus:
        if (!is_digit(c)) return;
        if (n.held) f.a = c - '0';
        if (!n.held && !integer) f.a = 1;
        return to(c == '0' ? kNumZero : kNumInt);
      case kNumDot:
        if (is_digit(c)) decimal_digit();
        return;
      case kNumExp:
        if (c == '+' || c == '-') return to(kNumExpSign);
        [[fallthrough]];
      case kNumExpSign:
        if (!is_digit(c)) return;
        f.c = c - '0';
        return to(kNumExpDigits);
      default: break;  // a number that may end here
    }
    if (is_digit(c) && f.phase == kNumFrac) return decimal_digit();
    if (is_digit(c) && f.phase != kNumZero) {
      if (n.held) f.a = static_cast<int32_t>(std::min<int64_t>(INT32_MAX, int64_t{10} * f.a + (c - '0')));
      if (f.phase == kNumExpDigits && (f.c = 10 * f.c + (c - '0')) > kMaxExponent) return;
      if (f.phase == kNumInt && !n.held && !integer && ++f.a > kMaxWholeDigits) return;
      return to(static_cast<NumberPhase>(f.phase));
    }
    if (!integer && c == '.' && (f.phase == kNumZero || f.phase == kNumInt) && (!n.held || n.scale > 0)) return to(kNumDot);
    if (!integer && !n.held && (c == 'e' || c == 'E') && f.phase != kNumExpDigits) return to(kNumExp);
    // The number ends: the byte is its parent's.
    if (n.held && !reachable(n, f, true)) return;
    pop(b);
    feed(std::move(b), c);
  }

  void literal(Branch b, const SchemaNode& n, unsigned char c) const {
    Frame& f = b.stack.back();
    if (f.phase == kLitStart) {
      // Unique items: not a value the array has already.
      const Frame* parent = b.stack.size() > 1 ? &b.stack[b.stack.size() - 2] : nullptr;
      const std::vector<int32_t>* taken = parent ? &nodes_[static_cast<size_t>(parent->node)].unique_bits : nullptr;
      for (size_t i = 0; i < n.literals.size(); ++i) {
        if (static_cast<unsigned char>(n.literals[i][0]) != c) continue;
        if (taken != nullptr && !taken->empty() && ((parent->c >> (*taken)[i]) & 1) != 0) continue;
        Branch l = b;
        Frame& lf = l.stack.back();
        lf.phase = kLitIn;
        lf.a = static_cast<int32_t>(i);
        lf.b = 1;
        if (n.literals[i].size() == 1) pop(l);
        out_->push_back(std::move(l));
      }
      return;
    }
    const std::string& text = n.literals[static_cast<size_t>(f.a)];
    if (static_cast<unsigned char>(text[static_cast<size_t>(f.b)]) != c) return;
    if (++f.b == static_cast<int32_t>(text.size())) pop(b);
    out_->push_back(std::move(b));
  }

  const std::vector<SchemaNode>& nodes_;
  std::vector<Branch>* out_;
};

}  // namespace

bool JsonSchemaGrammar::Branch::operator==(const Branch& o) const {
  if (gap != o.gap || indent != o.indent || stack.size() != o.stack.size()) return false;
  for (size_t i = 0; i < stack.size(); ++i) {
    const Frame &x = stack[i], &y = o.stack[i];
    if (x.node != y.node || x.phase != y.phase || x.a != y.a || x.b != y.b || x.c != y.c) return false;
  }
  return true;
}

Expected<std::shared_ptr<const JsonSchema>> JsonSchema::compile(std::string_view schema_json) {
  const Json s = Json::parse(schema_json, nullptr, false);
  if (s.is_discarded()) return unexpected(ErrorCode::kInvalidArgument, "the JSON schema is not JSON");
  Compiler c(s);
  c.nodes.reserve(16);
  c.nodes.emplace_back();  // [0]: the root, filled below
  MINFER_ASSIGN_OR_RETURN(int32_t root, c.node(s, "", 0));
  c.nodes[0] = SchemaNode{};
  c.nodes[0].kind = Kind::kAnyOf;  // one alternative: the root
  c.nodes[0].children = {root};
  std::shared_ptr<JsonSchema> out(new JsonSchema());
  out->nodes_ = std::make_unique<std::vector<SchemaNode>>(std::move(c.nodes));
  return std::shared_ptr<const JsonSchema>(std::move(out));
}

JsonSchema::~JsonSchema() = default;

std::shared_ptr<const JsonSchema> JsonSchema::any_object() {
  static const std::shared_ptr<const JsonSchema> object = *compile(R"({"type": "object"})");
  return object;
}

JsonSchemaGrammar::JsonSchemaGrammar(std::shared_ptr<const JsonSchema> schema) : schema_(std::move(schema)) {
  Stepper(schema_->nodes(), &branches_).push_value(Branch{}, 0, &branches_);
}

bool JsonSchemaGrammar::step(unsigned char c) {
  first_known_ = false;
  asked_ = 0;
  std::vector<Branch> next;
  const Stepper stepper(schema_->nodes(), &next);
  for (const Branch& b : branches_) stepper.feed(b, c);
  // Branches that met again (a literal shared by two alternatives) are one;
  // at most kMaxBranches go on (what they accept is still the schema's).
  std::vector<Branch> unique;
  for (Branch& b : next) {
    if (unique.size() == kMaxBranches) break;
    if (std::find(unique.begin(), unique.end(), b) == unique.end()) unique.push_back(std::move(b));
  }
  branches_ = std::move(unique);
  return !branches_.empty();
}

bool JsonSchemaGrammar::advance(std::string_view bytes) {
  for (const char c : bytes) {
    if (!step(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool JsonSchemaGrammar::accepts(std::string_view bytes) const {
  if (bytes.empty()) return true;
  // Most tokens asked where few may come (a colon, a digit) fail at their
  // first byte: once a state has been asked about kAsksBeforeFirstBytes
  // tokens (the best ones are usually allowed: no table for them), the
  // bytes that may come next are found, and a token is walked (on a copy)
  // only if it begins with one.
  if (!first_known_ && ++asked_ > kAsksBeforeFirstBytes) {
    std::vector<Branch> next;
    const Stepper stepper(schema_->nodes(), &next);
    for (int c = 0; c < 256; ++c) {
      next.clear();
      for (const Branch& b : branches_) {
        stepper.feed(b, static_cast<unsigned char>(c));
        if (!next.empty()) break;
      }
      first_.set(static_cast<size_t>(c), !next.empty());
    }
    first_known_ = true;
  }
  if (first_known_ && !first_.test(static_cast<unsigned char>(bytes[0]))) return false;
  if (first_known_ && bytes.size() == 1) return true;
  JsonSchemaGrammar g = *this;
  return g.advance(bytes);
}

bool JsonSchemaGrammar::complete() const {
  // Done: nothing left open — or, a number at the root, digits that may end
  // it (a number ends only when the byte after it comes).
  return std::any_of(branches_.begin(), branches_.end(), [this](const Branch& b) {
    if (b.stack.empty()) return true;
    const Frame& f = b.stack.front();
    const Kind kind = schema_->nodes()[static_cast<size_t>(f.node)].kind;
    const SchemaNode& n = schema_->nodes()[static_cast<size_t>(f.node)];
    return b.stack.size() == 1 && (kind == Kind::kNumber || kind == Kind::kInteger) &&
           (f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac || f.phase == kNumExpDigits) &&
           (!n.held || reachable(n, f, true));
  });
}

}  // namespace minfer
