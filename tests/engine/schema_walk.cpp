// schema_walk SCHEMAS_JSON COUNT SEED: random complete documents of each
// schema in SCHEMAS_JSON (tests/data/pydantic/schemas.json), COUNT a model,
// written as one JSON object {model name: [documents]} to stdout. Each
// document is a walk through the schema's automaton: at every byte one of
// the printable ASCII bytes, tab or newline it accepts, drawn at random
// (the structural ones more often as the document grows, so that walks end),
// until it is complete. tests/data/pydantic/check_walks.py hands them to
// Pydantic: whatever the automaton lets through must be a valid instance.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/sampling/json_schema.h"

namespace {

using Json = nlohmann::ordered_json;  // keys in the schema's order

std::string walk(const std::shared_ptr<const minfer::JsonSchema>& schema, std::mt19937& rng, bool* complete) {
  static const std::string kBytes = [] {
    std::string b = "\t\n";
    for (int c = 0x20; c < 0x7F; ++c) b += static_cast<char>(c);
    return b;
  }();
  minfer::JsonSchemaGrammar g(schema);
  std::string doc;
  for (int step = 0; step < 1000; ++step) {
    if (g.complete() && rng() % 3 == 0) break;
    std::vector<char> ok, structural;
    for (const char c : kBytes) {
      if (!g.accepts(std::string(1, c))) continue;
      ok.push_back(c);
      if (c == '"' || c == '}' || c == ']' || c == ',' || c == ':') structural.push_back(c);
    }
    if (ok.empty()) break;
    const bool close = !structural.empty() && rng() % 100 < std::min<size_t>(90, doc.size() / 3);
    const char c = close ? structural[rng() % structural.size()] : ok[rng() % ok.size()];
    doc += c;
    g.advance(std::string(1, c));
  }
  *complete = g.complete();
  return doc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: schema_walk SCHEMAS_JSON COUNT SEED\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  const Json data = Json::parse(in, nullptr, false);
  if (data.is_discarded() || !data.contains("models")) {
    std::fprintf(stderr, "schema_walk: %s is not a schemas file\n", argv[1]);
    return 1;
  }
  const int count = std::atoi(argv[2]);
  std::mt19937 rng(static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)));
  Json out = Json::object();
  for (const Json& m : data["models"]) {
    if (m.contains("refused")) continue;
    auto schema = minfer::JsonSchema::compile(m["schema"].dump());
    if (!schema) {
      std::fprintf(stderr, "schema_walk: %s: %s\n", m["name"].get<std::string>().c_str(), schema.error().message.c_str());
      return 1;
    }
    Json docs = Json::array();
    for (int tries = 0; static_cast<int>(docs.size()) < count && tries < 20 * count; ++tries) {
      bool complete = false;
      std::string doc = walk(*schema, rng, &complete);
      if (complete) docs.push_back(std::move(doc));
    }
    out[m["name"].get<std::string>()] = std::move(docs);
  }
  std::cout << out.dump() << "\n";
  return 0;
}
