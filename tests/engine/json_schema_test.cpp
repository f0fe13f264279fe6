// Structured output's automata against schemas and documents worked out by
// hand: what a schema allows is accepted to its end and complete there; what
// it does not is refused at the byte that breaks it; keywords outside the
// subset are refused at compile time with their names.
#include <gtest/gtest.h>

#include <string>

#include "engine/sampling/json_schema.h"

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
  EXPECT_NE(error_of(R"({"$ref": "#/$defs/x"})").find("'$ref' is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "^a"})").find("'pattern' is not supported"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}})")
                .find("JSON schema at .a: 'minimum' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "additionalProperties": true})").find("may only be false"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "object", "properties": {}, "required": ["a"]})").find("not in 'properties'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "tuple"})").find("'tuple' is not a JSON type"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("must be an object"), std::string::npos);
  EXPECT_NE(error_of("{").find("not JSON"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type": "string", "title": "t", "description": "d", "default": "x"})"), "compiled");
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
}

}  // namespace
}  // namespace minfer
