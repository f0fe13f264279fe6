// Structured output's automata against schemas and documents worked out by
// hand: what a schema allows is accepted to its end and complete there; what
// it does not is refused at the byte that breaks it; keywords outside the
// subset are refused at compile time with their names.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engine/sampling/json_schema.h"
#include "engine/sampling/string_pattern.h"

namespace minfer {
namespace {

std::shared_ptr<const JsonSchema> compiled(const std::string& schema) {
  auto s = JsonSchema::compile(schema);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  return s ? *s : nullptr;
}

// The index of the first byte refused, or -1; *done: complete at the end.
int first_refused(const std::shared_ptr<const JsonSchema>& schema, const std::string& text, bool* done = nullptr) {
  JsonSchemaGrammar g(schema);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!g.accepts(text.substr(i, 1))) return static_cast<int>(i);
    EXPECT_TRUE(g.advance(text.substr(i, 1)));
  }
  if (done != nullptr) *done = g.complete();
  return -1;
}

const char* kPet = R"({"type": "object", "properties": {
    "name": {"type": "string"}, "age": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    "kind": {"enum": ["cat", "dog"]}, "nick": {"type": ["string", "null"]}},
  "required": ["name", "age", "kind"], "additionalProperties": false})";

TEST(JsonSchemaGrammar, ObjectsInThePropertiesOrder) {
  const auto pet = compiled(kPet);
  ASSERT_TRUE(pet);
  for (const std::string doc : {R"({"name":"Lily","age":3,"kind":"cat"})",
                                "{\n  \"name\": \"A\\\"b\",\n  \"age\": -10,\n  \"tags\": [\"x\", \"y\"],\n  \"kind\": \"dog\","
                                "\n  \"nick\": null\n}",
                                R"({"name":"","age":0,"tags":[],"kind":"cat","nick":"Li"})"}) {
    bool done = false;
    EXPECT_EQ(first_refused(pet, doc, &done), -1) << doc;
    EXPECT_TRUE(done) << doc;
  }
  // Not yet complete: a prefix.
  bool done = true;
  EXPECT_EQ(first_refused(pet, R"({"name":"Lily","age":3)", &done), -1);
  EXPECT_FALSE(done);
  EXPECT_EQ(first_refused(pet, R"({"age":3})"), 2);                  // "name" comes first and is required
  EXPECT_EQ(first_refused(pet, R"({"name":"A","kind":"cat"})"), 13);  // the next key is "age": required
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3})"), 19);       // '}' with kind still required
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3.5})"), 19);     // an integer
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3,"kind":"bird"})"), 28);
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3,"kind":"cat","color":1})"), 34);  // no other key
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3,"tags":["a","b","c"],"kind":"cat"})"), 35);  // maxItems 2
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3,"kind":"cat","nick":5})"), 40);
  EXPECT_EQ(first_refused(pet, R"({"name":"A","age":3,"kind":"cat"}x)"), 33);
  EXPECT_EQ(first_refused(pet, R"({"name":5)"), 8);
}

TEST(JsonSchemaGrammar, ArraysScalarsAndAlternatives) {
  const auto numbers = compiled(R"({"type": "array", "items": {"type": "number"}, "minItems": 1})");
  bool done = false;
  EXPECT_EQ(first_refused(numbers, "[1.5, -2e3, 0]", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(numbers, "[]"), 1);  // minItems 1
  EXPECT_EQ(first_refused(numbers, "[01]"), 2);
  const auto either = compiled(R"({"anyOf": [{"type": "integer"}, {"type": "boolean"}, {"const": "n/a"}]})");
  for (const std::string doc : {"12", "true", "false", "\"n/a\""}) {
    EXPECT_EQ(first_refused(either, doc, &done), -1) << doc;
    EXPECT_TRUE(done) << doc;
  }
  EXPECT_EQ(first_refused(either, "\"x\""), 1);
  EXPECT_EQ(first_refused(either, "nul"), 0);
  const auto nested = compiled(R"({"type": "object", "properties": {"points": {"type": "array",
      "items": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}}},
      "required": ["points"]})");
  EXPECT_EQ(first_refused(nested, R"({"points": [{"x": 1, "y": 2}, {"x": 0.5, "y": -1}]})", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(nested, R"({"points": [{"x": 1}]})"), 19);
}

TEST(JsonSchemaGrammar, KeywordsOutsideTheSubsetAreRefusedByName) {
  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of(R"({"if": {"type": "string"}})").find("'if' is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "not": {"const": 2}})").find("'not' is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {"a": {"type": "string", "minimum": 0}}})")
                .find("JSON schema at .a: 'minimum' is supported with \"type\": \"integer\" or \"number\" only"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"maximum": 3})").find("'maximum' is supported with \"type\": \"integer\" or \"number\" only"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 5, "maximum": 4})").find("no integer lies within"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "maximum": 1e12})").find("'maximum' 1000000000000.0 is beyond the supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "exclusiveMinimum": true})").find("'exclusiveMinimum' must be a number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {"a": {}}, "additionalProperties": true})")
                .find("'additionalProperties' beside 'properties' may only be false"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "additionalProperties": 1})").find("must be a boolean or a schema"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {}, "required": ["a"]})").find("not in 'properties'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "tuple"})").find("'tuple' is not a JSON type"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("must be an object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not JSON"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type": "string", "title": "t", "description": "d", "default": "x"})"), "compiled");
}

// A model as Pydantic (and so OpenAI's SDKs' parse()) writes it: nested
// models in "$defs" named by "$ref", an optional field as anyOf with null, a
// described reference as an allOf of one — and a recursive model.
TEST(JsonSchemaGrammar, LocalReferencesAsPydanticWritesThem) {
  const auto order = compiled(R"({
    "$defs": {
      "Address": {"properties": {"city": {"title": "City", "type": "string"},
                                 "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}},
                  "required": ["city", "zip"], "title": "Address", "type": "object", "additionalProperties": false},
      "Size": {"enum": ["S", "M", "L"], "title": "Size", "type": "string"}},
    "properties": {"to": {"$ref": "#/$defs/Address"},
                   "from": {"allOf": [{"$ref": "#/$defs/Address"}], "description": "the sender"},
                   "sizes": {"items": {"$ref": "#/$defs/Size"}, "type": "array"}},
    "required": ["to", "from", "sizes"], "title": "Order", "type": "object", "additionalProperties": false})");
  ASSERT_TRUE(order);
  bool done = false;
  const std::string doc = R"({"to": {"city": "Oslo", "zip": "0150"}, "from": {"city": "Rome", "zip": null}, "sizes": ["M", "L"]})";
  EXPECT_EQ(first_refused(order, doc, &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(order, R"({"to": {"zip": "1"})"), 9);                         // city first
  EXPECT_EQ(first_refused(order, R"({"to": {"city": "A", "zip": 5})"), 28);             // a string or null
  EXPECT_EQ(first_refused(order, R"({"to": {"city": "A", "zip": null}, "from": 1})"), 43);  // an Address
  EXPECT_EQ(first_refused(order, R"({"to": {"city": "A", "zip": null}, "from": {"city": "B", "zip": null}, "sizes": ["XL"])"),
            82);

  // A tree: each node's children are nodes; "#" is the whole schema.
  const auto tree = compiled(R"({"$defs": {"Node": {"type": "object", "properties": {
      "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
      "required": ["name", "children"]}}, "$ref": "#/$defs/Node"})");
  ASSERT_TRUE(tree);
  EXPECT_EQ(first_refused(tree, R"({"name": "a", "children": [{"name": "b", "children": []}, {"name": "c", "children": [{"name": "d", "children": []}]}]})",
                          &done),
            -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(tree, R"({"name": "a", "children": [{"children": []}]})"), 29);  // a child is a Node: name first
  const auto list = compiled(R"({"type": "object", "properties": {"v": {"type": "integer"},
      "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}, "required": ["v", "next"]})");
  EXPECT_EQ(first_refused(list, R"({"v": 1, "next": {"v": 2, "next": null}})", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(list, R"({"v": 1, "next": {"v": 2}})"), 24);  // "next" is required inside too
}

// References the automata cannot follow are refused, each with its reason.
TEST(JsonSchemaGrammar, ReferencesItCannotFollowAreRefused) {
  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of(R"({"$ref": "other.json#/x"})").find("is not local"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/Missing", "$defs": {}})").find("'$ref' #/$defs/Missing names nothing"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/A", "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}})")
                .find("refers back to itself with no object or array in between"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"anyOf": [{"$ref": "#"}]})").find("refers back to itself"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/A", "type": "object", "$defs": {"A": {}}})").find("'type' beside '$ref'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf": [{"type": "string"}, {"const": "a"}]})").find("'allOf' is supported with one schema only"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/A", "$defs": {"A": {"type": "integer", "not": {"const": 2}}}})")
                .find("JSON schema at #/$defs/A: 'not' is not supported"),
            std::string::npos);
  // Definitions nobody names are not compiled, whatever they hold.
  EXPECT_EQ(error_of(R"({"type": "string", "$defs": {"Unused": {"not": {"const": 2}}}})"), "compiled");
}

// Schemas whose alternatives multiply: 24 definitions, each two references
// to the next, expand to one branch (not 2^24); 24 levels of look-alike
// objects, each of two alternatives, nest a document 24 deep with at most
// kMaxBranches parses followed (2^24 without the bound) and still accept it.
TEST(JsonSchemaGrammar, AlternativesThatMultiplyStayBounded) {
  constexpr int kLevels = 24;
  std::string defs;
  for (int i = 0; i < kLevels; ++i) {
    defs += "\"D" + std::to_string(i) + "\": {\"anyOf\": [{\"$ref\": \"#/$defs/D" + std::to_string(i + 1) +
            "\"}, {\"$ref\": \"#/$defs/D" + std::to_string(i + 1) + "\"}]}, ";
  }
  const auto doubling = compiled("{\"$defs\": {" + defs + "\"D" + std::to_string(kLevels) +
                                 "\": {\"type\": \"string\"}}, \"$ref\": \"#/$defs/D0\"}");
  ASSERT_TRUE(doubling);
  bool done = false;
  EXPECT_EQ(first_refused(doubling, "\"deep\"", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(doubling, "1"), 0);

  std::string nested_defs;
  for (int i = 0; i < kLevels; ++i) {
    const std::string next = i + 1 < kLevels ? "{\"$ref\": \"#/$defs/N" + std::to_string(i + 1) + "\"}" : "{\"type\": \"integer\"}";
    const std::string object = "{\"type\": \"object\", \"properties\": {\"a\": " + next + "}, \"required\": [\"a\"]}";
    nested_defs += "\"N" + std::to_string(i) + "\": {\"anyOf\": [" + object + ", " + object + "]}, ";
  }
  nested_defs.resize(nested_defs.size() - 2);
  const auto nested = compiled("{\"$defs\": {" + nested_defs + "}, \"$ref\": \"#/$defs/N0\"}");
  ASSERT_TRUE(nested);
  std::string doc;
  for (int i = 0; i < kLevels; ++i) doc += "{\"a\": ";
  doc += "7";
  for (int i = 0; i < kLevels; ++i) doc += "}";
  EXPECT_EQ(first_refused(nested, doc, &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(nested, "{\"a\": {\"a\": 7}}"), 12);  // 24 levels, not 2
}

// Integers with bounds: a digit is taken only if some integer that begins
// with the digits so far lies within them, and the number may end only
// inside them.
TEST(JsonSchemaGrammar, IntegerBoundsHoldEveryDigit) {
  const auto days = compiled(R"({"type": "integer", "minimum": 1, "maximum": 14})");
  ASSERT_TRUE(days);
  bool done = false;
  for (const std::string ok : {"1", "9", "10", "14"}) {
    EXPECT_EQ(first_refused(days, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(days, "0"), 0);
  EXPECT_EQ(first_refused(days, "-1"), 0);
  EXPECT_EQ(first_refused(days, "15"), 1);
  EXPECT_EQ(first_refused(days, "140"), 2);
  EXPECT_EQ(first_refused(days, "2", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(days, "20"), 1);  // 2 may end, 20 may not

  // Exclusive bounds, negative values, and a value inside an object: the
  // byte that ends it is refused when the value is out.
  const auto temp = compiled(R"({"type": "object", "properties": {"t": {"type": "integer", "exclusiveMinimum": -40.5,
      "exclusiveMaximum": 60}}, "required": ["t"]})");
  ASSERT_TRUE(temp);
  for (const std::string ok : {R"({"t": -40})", R"({"t": 59})", R"({"t": 0})", R"({"t": -0})", R"({"t": -5})"}) {
    EXPECT_EQ(first_refused(temp, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(temp, R"({"t": -41})"), 8);
  EXPECT_EQ(first_refused(temp, R"({"t": 60})"), 7);
  EXPECT_EQ(first_refused(temp, R"({"t": 6})"), -1);  // 6 and 6x (up to 59) are still open
  EXPECT_EQ(first_refused(temp, R"({"t": 600})"), 7);  // no integer from 60 up is below 60

  // One side only: a minimum far from zero, reached by long numbers.
  const auto big = compiled(R"({"type": "integer", "minimum": 2000000000})");
  ASSERT_TRUE(big);
  EXPECT_EQ(first_refused(big, "123456789012", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(big, "1999999999", &done), -1);
  EXPECT_FALSE(done);  // 1,999,999,999 is below: another digit must come
  EXPECT_EQ(first_refused(big, "-"), 0);
  const auto below = compiled(R"({"type": "integer", "maximum": -10})");
  EXPECT_EQ(first_refused(below, "-9"), -1);  // -9x
  EXPECT_EQ(first_refused(below, "-9", &done), -1);
  EXPECT_FALSE(done);
  EXPECT_EQ(first_refused(below, "3"), 0);
  EXPECT_EQ(first_refused(below, "-0"), 1);
}

// A number's bounds, held as an integer's are: each digit and decimal only
// if some number it begins lies within them; such a number has no exponent
// and at most nine decimals (the multiple's, with multipleOf).
TEST(JsonSchemaGrammar, NumberBoundsHoldEveryDigitAndDecimal) {
  const auto unit = compiled(R"({"type": "number", "minimum": 0, "maximum": 1})");
  ASSERT_TRUE(unit);
  bool done = false;
  for (const std::string ok : {"0", "1", "0.5", "0.999999999", "1.0", "1.000", "0.25"}) {
    EXPECT_EQ(first_refused(unit, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(unit, "-0", &done), -1);  // -0 is 0
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(unit, "-1"), 1);
  EXPECT_EQ(first_refused(unit, "2"), 0);
  EXPECT_EQ(first_refused(unit, "1.01"), 3);  // 1.0 may go on only with zeros
  EXPECT_EQ(first_refused(unit, "10"), 1);
  EXPECT_EQ(first_refused(unit, "0.1234567891"), 11);  // a tenth decimal
  EXPECT_EQ(first_refused(unit, "1e0"), 1);            // no exponent
  EXPECT_EQ(first_refused(unit, "0.", &done), -1);
  EXPECT_FALSE(done);  // a point needs a decimal

  // Exclusive bounds between decimals, negative ones, inside an object: the
  // byte that ends the number is refused when it is out.
  const auto temp = compiled(R"({"type": "object", "properties": {"t": {"type": "number", "exclusiveMinimum": -2.5,
      "exclusiveMaximum": 0.1}}, "required": ["t"]})");
  ASSERT_TRUE(temp);
  for (const std::string ok : {R"({"t": -2.4})", R"({"t": -2.499})", R"({"t": 0.09})", R"({"t": 0})", R"({"t": -0.0})",
                               R"({"t": -1})"}) {
    EXPECT_EQ(first_refused(temp, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(temp, R"({"t": -2.5})"), 9);  // -2.5 and every -2.5x are out
  EXPECT_EQ(first_refused(temp, R"({"t": -2.})"), 9);   // -2. is -2.x: the brace is refused
  EXPECT_EQ(first_refused(temp, R"({"t": 0.1})"), 8);
  EXPECT_EQ(first_refused(temp, R"({"t": 0.2})"), 8);
  EXPECT_EQ(first_refused(temp, R"({"t": -3})"), 7);

  // A type list: the bounds hold the number, not the null.
  const auto maybe = compiled(R"({"type": ["number", "null"], "minimum": 10})");
  EXPECT_EQ(first_refused(maybe, "null", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(maybe, "9", &done), -1);
  EXPECT_FALSE(done);  // 9 is below; 95 is not
  EXPECT_EQ(first_refused(maybe, "9 "), 1);
  EXPECT_EQ(first_refused(maybe, "9."), 1);  // nor is any 9.x

  // An unbounded number takes any JSON number within a double's range.
  const auto any = compiled(R"({"type": "number"})");
  EXPECT_EQ(first_refused(any, "-1.25e+280", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(any, "12345678901234567890.5E-0280", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(any, "1e281"), 4);
  EXPECT_EQ(first_refused(any, "1e-1000"), 6);
  EXPECT_EQ(first_refused(any, "123456789012345678901"), 20);  // a 21st integer digit
  EXPECT_EQ(first_refused(compiled(R"({"type": "integer"})"), "123456789012345678901234567890", &done), -1);
  EXPECT_TRUE(done);  // integers are any length
}

// multipleOf, of integers and numbers: a digit only if some multiple within
// the bounds begins with it; a number's decimals at most the multiple's.
TEST(JsonSchemaGrammar, MultiplesHoldEveryDigit) {
  bool done = false;
  const auto even = compiled(R"({"type": "integer", "multipleOf": 2, "minimum": 0, "maximum": 20})");
  ASSERT_TRUE(even);
  for (const std::string ok : {"0", "2", "14", "20"}) {
    EXPECT_EQ(first_refused(even, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(even, "3"), 0);   // odd, and nothing from 30 up is within
  EXPECT_EQ(first_refused(even, "1", &done), -1);
  EXPECT_FALSE(done);  // 1 is odd; 10-19 are not all
  EXPECT_EQ(first_refused(even, "1 "), 1);
  EXPECT_EQ(first_refused(even, "21"), 1);  // 2 is even, 21 odd and no 21x lies within
  EXPECT_EQ(first_refused(even, "-2"), 1);

  const auto cents = compiled(R"({"type": "number", "multipleOf": 0.01, "minimum": 0.5})");
  ASSERT_TRUE(cents);
  for (const std::string ok : {"0.5", "0.55", "12", "12.34", "1000000"}) {
    EXPECT_EQ(first_refused(cents, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(cents, "12.345"), 5);  // a third decimal
  EXPECT_EQ(first_refused(cents, "0.4"), 2);
  EXPECT_EQ(first_refused(cents, "0.49"), 2);

  const auto quarters = compiled(R"({"type": "number", "multipleOf": 0.25, "exclusiveMaximum": 1})");
  ASSERT_TRUE(quarters);
  for (const std::string ok : {"0.25", "0.5", "0.75", "-0.25", "0", "-100"}) {
    EXPECT_EQ(first_refused(quarters, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(quarters, "0.3"), 2);  // 0.3x: no quarter
  EXPECT_EQ(first_refused(quarters, "0.2", &done), -1);
  EXPECT_FALSE(done);
  EXPECT_EQ(first_refused(quarters, "1"), 0);

  // An integer that is a multiple of 2.5 is one of 5; a multiple of 5 with
  // no decimals allowed at all takes no point.
  const auto fives = compiled(R"({"type": "integer", "multipleOf": 2.5})");
  EXPECT_EQ(first_refused(fives, "15", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(fives, "12.5"), 2);
  const auto whole = compiled(R"({"type": "number", "multipleOf": 5})");
  EXPECT_EQ(first_refused(whole, "25", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(whole, "25.0"), 2);

  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of(R"({"type": "number", "multipleOf": 0})").find("'multipleOf' must be above 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "multipleOf": -2})").find("'multipleOf' must be above 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "multipleOf": 1e-10})").find("has more than 9 decimals"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "multipleOf": 7, "minimum": 1, "maximum": 6})")
                .find("no multiple of 7 lies within its minimum and maximum"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "minimum": 1, "exclusiveMaximum": 1})").find("no number lies within"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "maximum": 3e9})").find("beyond the supported"), std::string::npos);
}

// A string's length in characters: a multi-byte UTF-8 character and an
// escape count one each; the closing quote waits for minLength, and no
// character begins past maxLength.
TEST(JsonSchemaGrammar, StringLengthsCountCharacters) {
  const auto code = compiled(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  ASSERT_TRUE(code);
  bool done = false;
  for (const std::string ok : {"\"ab\"", "\"abc\"", "\"\xc3\xa9t\xc3\xa9\"", "\"a\\n\"", "\"\\u00e9xy\""}) {
    EXPECT_EQ(first_refused(code, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(code, "\"a\""), 2);     // one character: the quote waits
  EXPECT_EQ(first_refused(code, "\"\""), 1);
  EXPECT_EQ(first_refused(code, "\"abcd\""), 4);  // a fourth character
  EXPECT_EQ(first_refused(code, "\"ab\\t\\n\""), 5);
  EXPECT_NE(JsonSchema::compile(R"({"type": "string", "minLength": 3, "maxLength": 2})").error().message.find(
                "'minLength' is above 'maxLength'"),
            std::string::npos);
  EXPECT_NE(JsonSchema::compile(R"({"type": "array", "maxLength": 2})").error().message.find(
                "'maxLength' is supported with \"type\": \"string\" only"),
            std::string::npos);
}

// Strings hold whole UTF-8 characters (RFC 3629): a character may be split
// across tokens, but no byte stands where a character cannot have it — a
// continuation byte alone, an overlong form, a surrogate, past U+10FFFF —
// and the string does not close inside one. Patterns' "." alike.
TEST(JsonSchemaGrammar, StringsHoldWholeUtf8Characters) {
  bool done = false;
  for (const char* schema : {R"({"type": "string"})", R"({"type": "string", "pattern": "^.*$"})"}) {
    const auto text = compiled(schema);
    ASSERT_TRUE(text);
    for (const std::string ok : {"\"caf\xc3\xa9\"", "\"\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xed\x9f\xbf\"",
                                 "\"\xf4\x8f\xbf\xbf\""}) {
      EXPECT_EQ(first_refused(text, ok, &done), -1) << schema << " " << ok;
      EXPECT_TRUE(done) << schema << " " << ok;
    }
    EXPECT_EQ(first_refused(text, "\"\x80\""), 1) << schema;          // a continuation byte alone
    EXPECT_EQ(first_refused(text, "\"\xc3\""), 2) << schema;          // closed inside a character
    EXPECT_EQ(first_refused(text, "\"\xc0\xaf\""), 1) << schema;     // overlong
    EXPECT_EQ(first_refused(text, "\"\xe0\x80\x80\""), 2) << schema;
    EXPECT_EQ(first_refused(text, "\"\xed\xa0\x80\""), 2) << schema;  // a surrogate
    EXPECT_EQ(first_refused(text, "\"\xf4\x90\x80\x80\""), 2) << schema;  // past U+10FFFF
    EXPECT_EQ(first_refused(text, "\"\xf5"), 1) << schema;
  }
}

// \u escapes of UTF-16 surrogates come in pairs, a high one then a low one:
// a lone one is refused where it shows (Python's and Pydantic's parsers
// reject it).
TEST(JsonSchemaGrammar, SurrogateEscapesComeInPairs) {
  const auto text = compiled(R"({"type": "string"})");
  ASSERT_TRUE(text);
  bool done = false;
  for (const std::string ok : {R"("\ud83d\ude00")", R"("a\uD83D\uDE00b")", R"("\u00e9\uffff")", R"("\ud7ff")"}) {
    EXPECT_EQ(first_refused(text, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(text, R"("\ud83d")"), 7);       // the quote after a high one
  EXPECT_EQ(first_refused(text, R"("\ud83dx")"), 7);
  EXPECT_EQ(first_refused(text, R"("\ud83d\n")"), 8);     // an escape, but not \u
  EXPECT_EQ(first_refused(text, R"("\ud83d\u0041")"), 9);  // not a low one
  EXPECT_EQ(first_refused(text, R"("\ud83d\ud83d")"), 10);
  EXPECT_EQ(first_refused(text, R"("\ude00")"), 4);        // a low one alone
  const auto keys = compiled(R"({"type": "object", "additionalProperties": {"type": "integer"}})");
  EXPECT_EQ(first_refused(keys, R"({"\udc00": 1})"), 5);   // keys too
}

// "format": RFC 3339's date, time and date-time, and uuid — what Pydantic
// writes for date, time, datetime and UUID fields.
TEST(JsonSchemaGrammar, FormatsHoldTheirCharacters) {
  auto holds = [](const std::string& schema, const std::string& text) {
    bool done = false;
    const int at = first_refused(compiled(schema), text, &done);
    return at == -1 && done ? -1 : at == -1 ? -2 : at;  // -2: a prefix, not complete
  };
  const std::string date = R"({"type": "string", "format": "date"})";
  EXPECT_EQ(holds(date, "\"2024-05-31\""), -1);
  EXPECT_EQ(holds(date, "\"2024-13-01\""), 7);   // month 13
  EXPECT_EQ(holds(date, "\"2024-02-32\""), 9);   // no 3x in February
  EXPECT_EQ(holds(date, "\"2024-02-29\""), -1);  // a leap year
  EXPECT_EQ(holds(date, "\"2000-02-29\""), -1);
  EXPECT_EQ(holds(date, "\"1900-02-29\""), 10);  // not one
  EXPECT_EQ(holds(date, "\"2023-02-29\""), 10);
  EXPECT_EQ(holds(date, "\"2023-04-31\""), 10);  // April has 30
  EXPECT_EQ(holds(date, "\"2023-12-31\""), -1);
  EXPECT_EQ(holds(date, "\"0000-01-01\""), 4);   // years from 1
  EXPECT_EQ(holds(date, "\"2024-5-31\""), 6);
  EXPECT_EQ(holds(date, "\"2024-05-31"), -2);
  const std::string time = R"({"type": "string", "format": "time"})";
  EXPECT_EQ(holds(time, "\"12:30:00Z\""), -1);
  EXPECT_EQ(holds(time, "\"23:59:59.123+02:00\""), -1);
  EXPECT_EQ(holds(time, "\"23:59:60Z\""), 7);  // no leap second: Python's and Pydantic's times have none
  EXPECT_EQ(holds(time, "\"24:00:00Z\""), 2);
  EXPECT_EQ(holds(time, "\"12:30:00\""), 9);  // RFC 3339: the offset is required
  const std::string date_time = R"({"type": "string", "format": "date-time"})";
  EXPECT_EQ(holds(date_time, "\"2024-05-31T12:30:00.5-07:00\""), -1);
  EXPECT_EQ(holds(date_time, "\"2024-05-31 12:30:00Z\""), 11);
  const std::string uuid = R"({"type": "string", "format": "uuid"})";
  EXPECT_EQ(holds(uuid, "\"123e4567-e89b-12d3-a456-426614174000\""), -1);
  EXPECT_EQ(holds(uuid, "\"123e4567-e89b-12d3-a456-42661417400g\""), 36);
  EXPECT_NE(JsonSchema::compile(R"({"type": "string", "format": "iri"})").error().message.find(
                "format 'iri' is not supported (date, time, date-time, duration, email, hostname, ipv4, ipv6, uri and "
                "uuid are, and Pydantic's ipvanyaddress and ip*interface)"),
            std::string::npos);
}

// The rest of what OpenAI's strict mode lists (duration, email, hostname,
// ipv4, ipv6) and uri (Pydantic's URL types): whole values the grammars
// allow, and where a value that breaks them is refused (-2: a prefix of one).
TEST(JsonSchemaGrammar, AddressesNamesAndDurationsHoldTheirGrammars) {
  auto holds = [](const std::string& format, const std::string& value) {
    bool done = false;
    const auto schema = compiled(nlohmann::json{{"type", "string"}, {"format", format}}.dump());
    const int at = first_refused(schema, "\"" + value + "\"", &done);
    return at == -1 && done ? -1 : at == -1 ? -2 : at - 1;  // the refused byte's index in the value
  };
  for (const char* ok : {"P1Y", "P1Y2M3D", "P3D", "P2W", "PT4H", "PT4H5M6S", "PT30S", "P1DT12H", "P1M4DT1M"}) {
    EXPECT_EQ(holds("duration", ok), -1) << ok;
  }
  EXPECT_EQ(holds("duration", "P"), 1);       // nothing after P: the quote is refused
  EXPECT_EQ(holds("duration", "PT"), 2);
  EXPECT_EQ(holds("duration", "P1D2Y"), 3);   // nothing after days but a T
  EXPECT_EQ(holds("duration", "P1W2D"), 3);   // weeks stand alone
  EXPECT_EQ(holds("duration", "P1H"), 2);     // hours after a T only
  EXPECT_EQ(holds("duration", "P1Y2M"), -1);
  EXPECT_EQ(holds("duration", "PT999999H"), -1);
  EXPECT_EQ(holds("duration", "PT9999999H"), 8);  // six digits a number at most

  for (const char* ok : {"0.0.0.0", "192.168.1.254", "255.255.255.255", "10.0.0.1"}) EXPECT_EQ(holds("ipv4", ok), -1) << ok;
  EXPECT_EQ(holds("ipv4", "256.1.1.1"), 2);
  EXPECT_EQ(holds("ipv4", "01.1.1.1"), 1);  // no leading zeros
  EXPECT_EQ(holds("ipv4", "1.2.3"), 5);
  EXPECT_EQ(holds("ipv4", "1.2.3.4.5"), 7);

  for (const char* ok : {"::", "::1", "1::", "2001:db8::8a2e:370:7334", "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
                         "fe80::1:2:3:4:5:6", "::ffff:192.0.2.128", "1:2:3:4:5:6:1.2.3.4", "a:b:c:d:e:f::"}) {
    EXPECT_EQ(holds("ipv6", ok), -1) << ok;
  }
  EXPECT_EQ(holds("ipv6", "1:2:3:4:5:6:7:8:9"), 15);  // nine groups
  EXPECT_EQ(holds("ipv6", "1::2::3"), 5);              // two runs of zeros
  EXPECT_EQ(holds("ipv6", "12345::"), 4);              // five hex digits
  EXPECT_EQ(holds("ipv6", "1:2:3:4:5:6:7"), 13);
  EXPECT_EQ(holds("ipv6", "g::"), 0);

  for (const char* ok : {"10.0.0.1", "fe80::1"}) EXPECT_EQ(holds("ipvanyaddress", ok), -1) << ok;
  for (const char* ok : {"10.0.0.1/8", "10.0.0.1/32", "fe80::1/64", "::/128"}) EXPECT_EQ(holds("ipvanyinterface", ok), -1) << ok;
  EXPECT_EQ(holds("ipv4interface", "10.0.0.1/33"), 10);
  EXPECT_EQ(holds("ipv6interface", "::/129"), 5);
  EXPECT_EQ(holds("ipv4interface", "10.0.0.1"), 8);  // the prefix length is written

  for (const char* ok : {"example.com", "a", "my-host.local", "xn--bcher-kva.example", "1.2.3.4"}) {
    EXPECT_EQ(holds("hostname", ok), -1) << ok;
  }
  EXPECT_EQ(holds("hostname", "-a.com"), 0);
  EXPECT_EQ(holds("hostname", "a-.com"), 2);  // a label ends in a letter or digit
  EXPECT_EQ(holds("hostname", "a..com"), 2);
  EXPECT_EQ(holds("hostname", "a_b"), 1);
  EXPECT_EQ(holds("hostname", std::string(63, 'x') + ".com"), -1);
  EXPECT_EQ(holds("hostname", std::string(64, 'x') + ".com"), 63);  // a label of 63 at most

  for (const char* ok : {"jane.doe@example.com", "x+tag@mail.example.org", "o'brien@ex-ample.co.uk", "a!#$%&*/=?^_`{|}~@b.c"}) {
    EXPECT_EQ(holds("email", ok), -1) << ok;
  }
  EXPECT_EQ(holds("email", "jane@localhost"), 14);  // a dot in the domain
  EXPECT_EQ(holds("email", "jane..doe@example.com"), 5);
  EXPECT_EQ(holds("email", ".jane@example.com"), 0);
  EXPECT_EQ(holds("email", "jane doe@example.com"), 4);
  EXPECT_EQ(holds("email", "jane@@example.com"), 5);

  for (const char* ok : {"https://example.com", "https://example.com/a/b?q=1&r=%20x#top", "http://user:pw@host:8080/",
                         "mailto:jane@example.com", "urn:isbn:0451450523", "http://[2001:db8::1]:80/index.html",
                         "file:///etc/hosts", "ftp://192.168.0.1/x", "a:"}) {
    EXPECT_EQ(holds("uri", ok), -1) << ok;
  }
  EXPECT_EQ(holds("uri", "example.com"), 11);         // no scheme: no colon ever comes
  EXPECT_EQ(holds("uri", "1http://x"), 0);            // a scheme begins with a letter
  EXPECT_EQ(holds("uri", "http://a b"), 8);
  EXPECT_EQ(holds("uri", "http://x/%2"), 11);         // a percent escape is two hex digits: not the quote
  EXPECT_EQ(holds("uri", "http://x/%zz"), 10);
  EXPECT_EQ(holds("uri", "http://host:8a/"), 14);     // a port is digits (host:8a could begin user info)
  EXPECT_EQ(holds("uri", "http://x/a#b#c"), 12);      // one fragment
  EXPECT_EQ(holds("uri", "http://[1:2]/"), 11);       // an IPv6 host is a whole address
}

// A pattern or format with a maxLength or minLength: a character is taken
// only if the pattern can still end within the lengths, so that no string
// is begun that cannot be closed.
TEST(JsonSchemaGrammar, PatternsEndWithinTheirLengths) {
  bool done = false;
  const auto email = compiled(R"({"type": "string", "format": "email", "maxLength": 8})");
  ASSERT_TRUE(email);
  EXPECT_EQ(first_refused(email, R"("ab@c.de")", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(email, R"("abcd@e.f")", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(email, R"("abcde@f.g")"), 5);  // "@f.g" no longer fits after five
  EXPECT_EQ(first_refused(email, R"("ab@cdefg")"), 7);   // the domain's dot no longer fits
  const auto tag = compiled(R"({"type": "string", "pattern": "^x+-\\d{3}$", "maxLength": 6})");
  ASSERT_TRUE(tag);
  EXPECT_EQ(first_refused(tag, R"("xx-123")", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(tag, R"("xxx)"), 3);
  // Characters, not bytes: é is one.
  const auto two = compiled(R"({"type": "string", "pattern": "^.+!$", "maxLength": 2})");
  EXPECT_EQ(first_refused(two, "\"\xc3\xa9!\"", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(two, "\"\xc3\xa9\xc3\xa9"), 3);
  // A pattern longer than the length: nothing, not even the quote.
  EXPECT_EQ(first_refused(compiled(R"({"type": "string", "format": "date", "maxLength": 9})"), "\""), 0);
  // With a minLength, no character after which the pattern must end too soon.
  const auto code = compiled(R"({"type": "string", "pattern": "^a{1,4}b?$", "minLength": 3})");
  ASSERT_TRUE(code);
  EXPECT_EQ(first_refused(code, R"("aab")", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(code, R"("aaaa")", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(code, R"("ab)"), 2);  // "ab" could only end, two characters
  EXPECT_EQ(first_refused(code, R"("aa")"), 3);
  EXPECT_EQ(first_refused(compiled(R"({"type": "string", "format": "uuid", "minLength": 37})"), "\""), 0);
  EXPECT_EQ(first_refused(compiled(R"({"type": "string", "pattern": "^x+$", "minLength": 200})"), "\"xx", &done), -1);
}

// "pattern": a regular expression in the subset string_pattern.h names,
// anchored where it says so and found anywhere where it does not.
TEST(JsonSchemaGrammar, PatternsHoldTheirCharacters) {
  auto holds = [](const std::string& pattern, const std::string& text) {
    bool done = false;
    const int at = first_refused(compiled(nlohmann::json{{"type", "string"}, {"pattern", pattern}}.dump()), text, &done);
    return at == -1 && done ? -1 : at == -1 ? -2 : at;
  };
  EXPECT_EQ(holds(R"(^[A-Z]{3}-\d{2,4}$)", "\"ABC-12\""), -1);
  EXPECT_EQ(holds(R"(^[A-Z]{3}-\d{2,4}$)", "\"ABC-1234\""), -1);
  EXPECT_EQ(holds(R"(^[A-Z]{3}-\d{2,4}$)", "\"ABC-12345\""), 9);
  EXPECT_EQ(holds(R"(^[A-Z]{3}-\d{2,4}$)", "\"AB-\""), 3);
  EXPECT_EQ(holds(R"(^[A-Z]{3}-\d{2,4}$)", "\"ABC-1\""), 6);
  EXPECT_EQ(holds(R"(^(red|green)( light)?$)", "\"green light\""), -1);
  EXPECT_EQ(holds(R"(^(red|green)( light)?$)", "\"red\""), -1);
  EXPECT_EQ(holds(R"(^(red|green)( light)?$)", "\"blue\""), 1);
  EXPECT_EQ(holds("cat", "\"concatenate\""), -1);  // not anchored: anywhere
  EXPECT_EQ(holds("cat", "\"dog\""), 4);
  EXPECT_EQ(holds("^a", "\"abc\""), -1);
  EXPECT_EQ(holds("^a", "\"ba\""), 1);
  EXPECT_EQ(holds("^.{2}$", "\"\xc3\xa9!\""), -1);  // a character, not a byte
  EXPECT_EQ(holds("^.{2}$", "\"abc\""), 3);
  EXPECT_EQ(holds(R"(^[^0-9]+$)", "\"a\xc3\xa9\""), -1);
  EXPECT_EQ(holds(R"(^[^0-9]+$)", "\"a1\""), 2);
  EXPECT_EQ(holds("^a+$", "\"a\\n\""), 2);  // no escapes in a pattern's string
  // Lookaheads where the string starts: Pydantic's Decimal (not only signs
  // and points), and "some digit somewhere".
  const std::string decimal = R"(^(?!^[-+.]*$)[+-]?0*\d*\.?\d*$)";
  for (const char* ok : {"\"12.50\"", "\"-0.001\"", "\"+7\"", "\".5\"", "\"1.\"", "\"007\""}) {
    EXPECT_EQ(holds(decimal, ok), -1) << ok;
  }
  EXPECT_EQ(holds(decimal, "\"\""), 1);   // empty: only signs and points
  EXPECT_EQ(holds(decimal, "\"-.\""), 3);
  EXPECT_EQ(holds(decimal, "\"1.2.\""), 4);
  EXPECT_EQ(holds(decimal, "\"1e5\""), 2);
  EXPECT_EQ(holds(R"(^(?=.*\d)\w+$)", "\"ab3c\""), -1);
  EXPECT_EQ(holds(R"(^(?=.*\d)\w+$)", "\"abc\""), 4);  // no digit: the quote is refused
  EXPECT_EQ(holds(R"(^(?!ab)\w+$)", "\"abc\""), 2);     // does not begin with ab
  EXPECT_EQ(holds(R"(^(?!ab)\w+$)", "\"bac\""), -1);
  auto error_of = [](const std::string& pattern) {
    auto s = JsonSchema::compile(nlohmann::json{{"type", "string"}, {"pattern", pattern}}.dump());
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of("(?=a)b").find("lookaround"), std::string::npos);  // not anchored at the start
  EXPECT_NE(error_of("^a(?!b)").find("lookaround"), std::string::npos);  // not where the string starts
  EXPECT_NE(error_of("^(?!a*$)a*$").find("no string matches it"), std::string::npos);
  // A pattern built once is the same automaton for the requests after.
  auto first = StringPattern::format("uri"), again = StringPattern::format("uri");
  ASSERT_TRUE(first && again);
  EXPECT_EQ(first->get(), again->get());
  EXPECT_NE(error_of(R"((a)\1)").find("the escape '\\1' is not supported"), std::string::npos);
  EXPECT_NE(error_of("a*?").find("lazy"), std::string::npos);
  EXPECT_NE(error_of("[\xc3\xa9]").find("non-ASCII"), std::string::npos);
  EXPECT_NE(error_of("^a|b$").find("top-level '|'"), std::string::npos);
  EXPECT_NE(error_of("a{101}").find("above 100"), std::string::npos);
  EXPECT_NE(error_of("(a").find("not closed"), std::string::npos);
  EXPECT_NE(error_of("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of(".{100}.{100}.{100}.{100}").find("automaton states"), std::string::npos);
  EXPECT_NE(JsonSchema::compile(R"({"type": "integer", "pattern": "1"})").error().message.find(
                "'pattern' is supported with \"type\": \"string\" only"),
            std::string::npos);
}

// oneOf where no value can match two alternatives — a union told apart by a
// discriminator, as Pydantic writes one, or alternatives of different JSON
// types — is held as anyOf; any other oneOf is refused.
TEST(JsonSchemaGrammar, OneOfWhereTheAlternativesAreApart) {
  const auto pets = compiled(R"({"$defs": {
      "Cat": {"type": "object", "properties": {"pet_type": {"const": "cat", "type": "string"}, "lives": {"type": "integer"}},
              "required": ["pet_type", "lives"], "additionalProperties": false},
      "Dog": {"type": "object", "properties": {"pet_type": {"enum": ["dog", "puppy"]}, "barks": {"type": "boolean"}},
              "required": ["pet_type", "barks"], "additionalProperties": false}},
    "type": "object", "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
      "discriminator": {"propertyName": "pet_type", "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}}},
    "required": ["pet"], "additionalProperties": false})");
  ASSERT_TRUE(pets);
  bool done = false;
  for (const std::string ok : {R"({"pet": {"pet_type": "cat", "lives": 9}})", R"({"pet": {"pet_type": "puppy", "barks": true}})"}) {
    EXPECT_EQ(first_refused(pets, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(pets, R"({"pet": {"pet_type": "cat", "barks": true}})"), 29);
  EXPECT_EQ(first_refused(compiled(R"({"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]})"), "12", &done),
            -1);
  EXPECT_TRUE(done);

  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  const char* kOverlap = "'oneOf' is supported where no value can match two alternatives";
  EXPECT_NE(error_of(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})").find(kOverlap), std::string::npos);
  EXPECT_NE(error_of(R"({"oneOf": [{"const": 1.0}, {"type": "integer"}]})").find(kOverlap), std::string::npos);  // 1.0 is one
  EXPECT_EQ(error_of(R"({"oneOf": [{"const": 1.5}, {"type": "integer"}]})"), "compiled");
  EXPECT_NE(error_of(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                                   {"type": "object", "properties": {"k": {"const": 1.0}}, "required": ["k"]}]})")
                .find(kOverlap),
            std::string::npos);  // 1 and 1.0 are one value
  EXPECT_NE(error_of(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}},
                                   {"type": "object", "properties": {"k": {"const": 2}}}]})")
                .find(kOverlap),
            std::string::npos);  // k not required: {} is both
  EXPECT_NE(error_of(R"({"discriminator": {"propertyName": "k"}, "type": "object"})").find("belongs beside 'oneOf'"),
            std::string::npos);
}

// prefixItems: each place of a tuple its own schema (Pydantic's tuple[int,
// str]), the items after them of items (a schema, false: none, absent: any).
TEST(JsonSchemaGrammar, TuplesHoldEachPlace) {
  bool done = false;
  const auto pair = compiled(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
      "minItems": 2, "maxItems": 2})");
  ASSERT_TRUE(pair);
  EXPECT_EQ(first_refused(pair, R"([1, "a"])", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(pair, R"(["a", 1])"), 1);
  EXPECT_EQ(first_refused(pair, R"([1])"), 2);
  EXPECT_EQ(first_refused(pair, R"([1, "a", 2])"), 7);
  const auto head = compiled(R"({"type": "array", "prefixItems": [{"const": "x"}], "items": {"type": "integer"}})");
  EXPECT_EQ(first_refused(head, R"(["x", 1, 2, 3])", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(head, R"(["x", "y"])"), 6);
  EXPECT_EQ(first_refused(head, "[]", &done), -1);
  EXPECT_TRUE(done);
  const auto closed = compiled(R"({"type": "array", "prefixItems": [{"type": "boolean"}], "items": false})");
  EXPECT_EQ(first_refused(closed, "[true]", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(closed, "[true, false]"), 5);
  const auto open = compiled(R"({"type": "array", "prefixItems": [{"type": "boolean"}]})");
  EXPECT_EQ(first_refused(open, R"([true, "any", {"k": null}])", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_NE(JsonSchema::compile(R"({"type": "array", "prefixItems": [{}], "items": false, "minItems": 2})")
                .error()
                .message.find("'minItems' is above the items that may come"),
            std::string::npos);
}

// uniqueItems where the items are enumerated values (Pydantic's set of an
// enum): a value the array has is not begun again, and there are at most as
// many items as distinct values; other unique items are refused.
TEST(JsonSchemaGrammar, UniqueItemsOfEnumeratedValues) {
  bool done = false;
  const auto colors = compiled(R"({"$defs": {"Color": {"enum": ["red", "green", "blue"], "type": "string"}},
      "type": "array", "items": {"$ref": "#/$defs/Color"}, "uniqueItems": true})");
  ASSERT_TRUE(colors);
  for (const std::string ok : {"[]", R"(["red"])", R"(["blue", "red", "green"])"}) {
    EXPECT_EQ(first_refused(colors, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(colors, R"(["red", "red"])"), 9);
  EXPECT_EQ(first_refused(colors, R"(["red", "green", "blue", )"), 23);  // no fourth value
  const auto flags = compiled(R"({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 2})");
  EXPECT_EQ(first_refused(flags, "[false, true]", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(flags, "[true, t"), 7);
  EXPECT_EQ(first_refused(flags, "[true]"), 5);  // minItems
  const auto numbers = compiled(R"({"type": "array", "items": {"enum": [1, 1.0, 2]}, "uniqueItems": true})");
  EXPECT_EQ(first_refused(numbers, "[1, 1.0]"), 4);  // 1 and 1.0 are one value
  EXPECT_EQ(first_refused(compiled(R"({"type": "array", "uniqueItems": false})"), "[1, 1]", &done), -1);
  EXPECT_TRUE(done);
  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})")
                .find("'uniqueItems' is supported where the items are at most 31 enumerated values"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "minItems": 3})")
                .find("'minItems' is above the 2 distinct values"),
            std::string::npos);
}

// What JSON Schema leaves open stays open: no type is any value, an object
// without properties any object, an array without items any items.
TEST(JsonSchemaGrammar, OpenSchemasTakeAnyValue) {
  bool done = false;
  const auto anything = compiled(R"({"description": "whatever"})");
  for (const std::string doc : {"1", "-0.5", "\"x\"", "null", "[1, [true], {}]", R"({"a": {"b": [null, "c"]}})"}) {
    EXPECT_EQ(first_refused(anything, doc, &done), -1) << doc;
    EXPECT_TRUE(done) << doc;
  }
  const auto list = compiled(R"({"type": "object", "properties": {"xs": {"type": "array"}}, "required": ["xs"]})");
  EXPECT_EQ(first_refused(list, R"({"xs": [1, "a", {"k": [false]}]})", &done), -1);
  EXPECT_TRUE(done);
  const auto empty = compiled(R"({"type": "object", "additionalProperties": false})");
  EXPECT_EQ(first_refused(empty, "{}", &done), -1);
  EXPECT_EQ(first_refused(empty, R"({"a": 1})"), 1);
  const auto open = compiled(R"({"type": "object", "additionalProperties": true})");
  EXPECT_EQ(first_refused(open, R"({"a": [1], "b": {"c": null}})", &done), -1);
  EXPECT_TRUE(done);
}

// A map, as Pydantic writes dict[str, X]: any keys, each value of the
// additionalProperties schema — references and bounds included.
TEST(JsonSchemaGrammar, MapsHoldEveryValueToTheirSchema) {
  bool done = false;
  const auto stock = compiled(R"({"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}})");
  ASSERT_TRUE(stock);
  for (const std::string ok : {"{}", R"({"apples": 3, "pears": 0})", R"({"": 12})"}) {
    EXPECT_EQ(first_refused(stock, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(stock, R"({"apples": -3})"), 12);  // -0 only
  EXPECT_EQ(first_refused(stock, R"({"apples": "3"})"), 11);
  EXPECT_EQ(first_refused(stock, R"({"apples" 3})"), 10);
  const auto people = compiled(R"({"$defs": {"P": {"type": "object", "properties": {"age": {"type": "integer"}},
      "required": ["age"], "additionalProperties": false}}, "type": "object", "properties": {"by_name": {"type": "object",
      "additionalProperties": {"$ref": "#/$defs/P"}}}, "required": ["by_name"], "additionalProperties": false})");
  ASSERT_TRUE(people);
  EXPECT_EQ(first_refused(people, R"({"by_name": {"ann": {"age": 31}, "bo": {"age": 4}}})", &done), -1);
  EXPECT_TRUE(done);
  EXPECT_EQ(first_refused(people, R"({"by_name": {"ann": {"name": "x"}}})"), 22);

  // Its keys' number and their strings: minProperties, maxProperties, propertyNames.
  const auto tags = compiled(R"({"type": "object", "additionalProperties": {"type": "boolean"}, "minProperties": 1,
      "maxProperties": 2, "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 4}})");
  ASSERT_TRUE(tags);
  for (const std::string ok : {R"({"a": true})", R"({"ab": true, "cd": false})"}) {
    EXPECT_EQ(first_refused(tags, ok, &done), -1) << ok;
    EXPECT_TRUE(done) << ok;
  }
  EXPECT_EQ(first_refused(tags, "{}"), 1);
  EXPECT_EQ(first_refused(tags, R"({"a": true, "b": true, "c": true})"), 21);
  EXPECT_EQ(first_refused(tags, R"({"A": true})"), 2);
  EXPECT_EQ(first_refused(tags, R"({"abcde": true})"), 6);
  const auto few = compiled(R"({"type": "object", "maxProperties": 0})");
  EXPECT_EQ(first_refused(few, "{}", &done), -1);
  EXPECT_EQ(first_refused(few, R"({"a": 1})"), 1);

  auto error_of = [](const std::string& schema) {
    auto s = JsonSchema::compile(schema);
    return s ? std::string("compiled") : s.error().message;
  };
  EXPECT_NE(error_of(R"({"type": "object", "properties": {"a": {}}, "maxProperties": 1})").find("on maps only"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "propertyNames": {"enum": ["a"]}})").find("as a string's length, pattern or format"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "minProperties": 3, "maxProperties": 2})").find("'minProperties' is above"),
            std::string::npos);
}

}  // namespace
}  // namespace minfer
