// Structured output against two corpora of schemas: the schemas Pydantic 2
// writes for typical models (tests/data/pydantic/schemas.json, made by
// make_schemas.py there) — every schema compiles, and every instance
// Pydantic validated and serialized is taken byte by byte to a complete
// value; the models minfer refuses say why — and hand-written ones using
// every keyword it holds (tests/data/schemas/keywords.json). Random walks
// through both, checked by independent validators, are CTest's SchemaWalks
// and PydanticWalks (tests/data/schemas/check_walks.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/sampling/json_schema.h"
#include "tests/engine/test_models.h"

namespace minfer {
namespace {

// (ordered: the keys in the properties' order, as a client sends them)
nlohmann::ordered_json corpus(const std::string& rel) {
  std::ifstream in(test::data_path(rel));
  EXPECT_TRUE(in.good()) << rel;
  return nlohmann::ordered_json::parse(in, nullptr, false);
}

TEST(PydanticSchemas, EveryInstanceIsTakenToItsEnd) {
  const nlohmann::ordered_json data = corpus("pydantic/schemas.json");
  ASSERT_TRUE(data.is_object() && data["models"].size() >= 10u);
  int instances = 0;
  for (const nlohmann::ordered_json& m : data["models"]) {
    const std::string name = m["name"];
    auto schema = JsonSchema::compile(m["schema"].dump());
    if (m.contains("refused")) {
      ASSERT_FALSE(schema.has_value()) << name << " now compiles: move it to the models that do";
      EXPECT_NE(schema.error().message.find(m["refused"].get<std::string>()), std::string::npos)
          << name << ": " << schema.error().message;
      continue;
    }
    ASSERT_TRUE(schema.has_value()) << name << ": " << schema.error().message;
    for (const nlohmann::ordered_json& instance : m["instances"]) {
      const std::string text = instance;
      JsonSchemaGrammar g(*schema);
      size_t at = 0;
      while (at < text.size() && g.advance(text.substr(at, 1))) ++at;
      EXPECT_EQ(at, text.size()) << name << ": refused at byte " << at << " of " << text;
      EXPECT_TRUE(g.complete()) << name << ": not complete after " << text;
      ++instances;
    }
  }
  EXPECT_GE(instances, 16);
}

TEST(SchemaCorpus, EveryKeywordsSchemaCompiles) {
  const nlohmann::ordered_json data = corpus("schemas/keywords.json");
  ASSERT_TRUE(data.is_object() && data["models"].size() >= 7u);
  for (const nlohmann::ordered_json& m : data["models"]) {
    auto schema = JsonSchema::compile(m["schema"].dump());
    EXPECT_TRUE(schema.has_value()) << m["name"] << ": " << (schema ? "" : schema.error().message);
  }
}

}  // namespace
}  // namespace minfer
