// libFuzzer target: structured output's schema compiler and automata
// (engine/sampling/json_schema.h, string_pattern.h) on a client's schema.
// The input is a schema's text, a NUL, then choices: the schema is compiled
// (any text: an error or an automaton, never a crash), then walked — at each
// step the next choice byte picks one of the bytes the automaton accepts
// among printable ASCII, tab, newline and a few UTF-8 bytes, until the
// choices run out, the value is complete or nothing may follow (a schema
// can ask for more than 64 values open at once: kMaxDepth). Checks:
// accepts() says what advance() does; a completed walk is one JSON value.
// Seeds: tests/fuzz/corpus/json_schema (the schemas of tests/data/schemas and
// tests/data/pydantic, make_seeds.sh).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling/json_schema.h"

namespace {

[[noreturn]] void fail(const std::string& what, const std::string& doc) {
  std::fprintf(stderr, "fuzz_json_schema: %s after %zu bytes: %s\n", what.c_str(), doc.size(), doc.c_str());
  std::abort();
}

const std::string& candidates() {
  static const std::string bytes = [] {
    std::string b = "\t\n";
    for (int c = 0x20; c < 0x7F; ++c) b += static_cast<char>(c);
    b += "\xc3\xa9\x80\xbf";  // é's bytes, and continuation bytes alone
    return b;
  }();
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view schema_text = input.substr(0, nul);
  const std::string_view choices = nul == std::string_view::npos ? std::string_view() : input.substr(nul + 1);
  auto schema = minfer::JsonSchema::compile(schema_text);
  if (!schema) return 0;
  minfer::JsonSchemaGrammar g(*schema);
  std::string doc;
  for (const char choice : choices) {
    if (g.complete() && !doc.empty()) break;
    std::vector<char> ok;
    for (const char c : candidates()) {
      const std::string one(1, c);
      if (g.accepts(one)) ok.push_back(c);
    }
    if (ok.empty()) break;
    const char c = ok[static_cast<unsigned char>(choice) % ok.size()];
    doc += c;
    if (!g.advance(std::string(1, c))) fail("advance() refused what accepts() took", doc);
  }
  if (g.complete() && !nlohmann::json::accept(doc)) fail("a complete value that is not JSON", doc);
  return 0;
}
