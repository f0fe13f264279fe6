// JSON mode (the schema {"type": "object"}: JsonSchema::any_object()) against
// documents worked out by hand: every valid object is accepted to its end and
// complete there, fed whole or a byte at a time; each invalid one is refused
// at the byte that breaks it.
#include <gtest/gtest.h>

#include <string>

#include "engine/sampling/json_schema.h"

namespace minfer {
namespace {

std::shared_ptr<const JsonSchema> object_schema() { return JsonSchema::any_object(); }

// The index of the first byte the grammar refuses, or -1 when all pass.
int first_refused(const std::string& text) {
  JsonSchemaGrammar g(object_schema());
  for (size_t i = 0; i < text.size(); ++i) {
    if (!g.accepts(text.substr(i, 1))) return static_cast<int>(i);
    EXPECT_TRUE(g.advance(text.substr(i, 1)));
  }
  return -1;
}

bool complete(const std::string& text) {
  JsonSchemaGrammar g(object_schema());
  return g.advance(text) && g.complete();
}

TEST(JsonMode, AcceptsObjectsAndEndsWithThem) {
  for (const std::string doc :
       {"{}", " {} ", "{\"a\":1}", "{\"a\":[1,2,{\"b\":null}],\"c\":\"x\\\"y\\u00e9\\n\",\"d\":-0.5e+10,\"e\":true,\"f\":false}",
        "{\n  \"name\": \"Lily\",\n  \"age\": 3,\n  \"tags\": [ ],\n\t\"x\": 0, \"y\": 10E-2, \"z\": -0\n}",
        "{\"caf\xc3\xa9\": \"\xe2\x82\xac\"}", "{\"a\":{\"b\":{\"c\":[[[]]]}}}"}) {
    EXPECT_EQ(first_refused(doc), -1) << doc;
    EXPECT_TRUE(complete(doc)) << doc;
  }
  // A prefix is accepted and not complete.
  JsonSchemaGrammar g(object_schema());
  ASSERT_TRUE(g.advance("{\"a\": [1, 2"));
  EXPECT_FALSE(g.complete());
  EXPECT_TRUE(g.accepts("]}"));
  EXPECT_TRUE(g.accepts("3"));     // the number goes on
  EXPECT_TRUE(g.accepts(".5,"));
  EXPECT_FALSE(g.accepts("}"));    // the array is open
  EXPECT_FALSE(g.accepts("]]"));
  EXPECT_TRUE(g.accepts(""));      // nothing is always allowed by the automaton (the sampler refuses empty tokens)
}

TEST(JsonMode, RefusesAtTheBreakingByte) {
  EXPECT_EQ(first_refused("[]"), 0);              // the top level is an object
  EXPECT_EQ(first_refused("\"a\""), 0);
  EXPECT_EQ(first_refused("{\"a\"}"), 4);         // a key needs its colon
  EXPECT_EQ(first_refused("{\"a\":01}"), 6);      // no leading zeros
  EXPECT_EQ(first_refused("{\"a\":1,}"), 7);      // no trailing comma
  EXPECT_EQ(first_refused("{,}"), 1);
  EXPECT_EQ(first_refused("{\"a\":tru}"), 8);
  EXPECT_EQ(first_refused("{\"a\":\"\x01\"}"), 6);  // controls are escaped
  EXPECT_EQ(first_refused("{\"a\":\"\\x\"}"), 7);   // not an escape
  EXPECT_EQ(first_refused("{\"a\":\"\\u12g4\"}"), 10);
  EXPECT_EQ(first_refused("{\"a\":1}}"), 7);      // after the object, whitespace only
  EXPECT_EQ(first_refused("{\"a\":1} x"), 8);
  EXPECT_EQ(first_refused("{\"a\":-}"), 6);
  EXPECT_EQ(first_refused("{\"a\":1.}"), 7);
  EXPECT_EQ(first_refused("{\"a\":1e}"), 7);
  EXPECT_EQ(first_refused("{\"a\":[1 2]}"), 8);
  EXPECT_EQ(first_refused("{\"a\":[}"), 6);
  EXPECT_EQ(first_refused("{1:2}"), 1);           // keys are strings
}

// Between tokens: nothing, one space, or a newline and up to 20 spaces or
// tabs (llama.cpp's `ws`); inside strings any number.
TEST(JsonMode, BoundsWhitespaceAndDepth) {
  const std::string indent(JsonSchemaGrammar::kMaxIndent, ' ');
  EXPECT_EQ(first_refused("{\n" + indent + "}"), -1);
  EXPECT_EQ(first_refused("{\n" + indent + " }"), 2 + JsonSchemaGrammar::kMaxIndent);
  EXPECT_EQ(first_refused("{  }"), 2);     // two spaces
  EXPECT_EQ(first_refused("{\n\n}"), 2);  // two newlines
  EXPECT_EQ(first_refused("{ \n}"), 2);    // a space, then a newline
  EXPECT_EQ(first_refused("{\r\n}"), 1);  // \r is not in the set
  EXPECT_EQ(first_refused("{\"a\": 1 , \"b\":\n\t[ 2 ]\n}\n"), -1);
  EXPECT_EQ(first_refused("{\"a\":\"" + indent + indent + "\n\"}"), static_cast<int>(6 + 2 * indent.size()));  // text, but no raw newline
  std::string deep = "{\"a\":";
  for (int i = 1; i < JsonSchemaGrammar::kMaxDepth; ++i) deep += "[";
  EXPECT_EQ(first_refused(deep), -1);
  EXPECT_EQ(first_refused(deep + "["), static_cast<int>(deep.size()));
}

}  // namespace
}  // namespace minfer
