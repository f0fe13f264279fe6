// Structured output (OpenAI's response_format json_schema): the output is one
// JSON value that a schema describes, byte by byte, as a set of pushdown
// automata run side by side (a schema's alternatives and optional keys are
// branches; a byte keeps the branches it can extend).
//
// The schema subset (what OpenAI's strict mode allows, and what Pydantic
// writes beside it): "type" one of
// object, array, string, number, integer, boolean, null, or a list of them;
// "properties" with "required" (keys come in the properties' order; a key
// not required may be left out; no other key is written, so
// "additionalProperties" may only be false beside them); "items" with
// "minItems" and "maxItems", "prefixItems" (tuples), "uniqueItems" where
// the items are enumerated values (a set of an enum); "enum" and "const" of scalars; "minLength" and
// "maxLength" of strings (characters: a UTF-8 character or an escape each
// count one), "pattern" and "format" (string_pattern.h; with a maxLength
// or minLength, no character after which the pattern cannot end within them); "minimum",
// "maximum", "exclusiveMinimum", "exclusiveMaximum" and "multipleOf" of
// integers and numbers (within ±2,147,483,646: a digit is taken only if a
// value it begins lies within them and is a multiple, and the number ends
// only at one; such a number has no exponent and at most 9 decimals, or
// the multiple's); "anyOf", and "oneOf" where no value can match two
// alternatives (other JSON types, or objects with a required property of
// distinct constants: a discriminated union, "discriminator" beside it);
// maps ("additionalProperties" a schema or true, without "properties":
// dict[str, X]; "minProperties", "maxProperties", and "propertyNames" as a
// string's length, pattern or format); local references ("$ref": "#/$defs/Name",
// "#/definitions/Name", "#"), recursive ones included, as Pydantic and OpenAI's SDKs write models, and "allOf" of
// one schema. "title", "description", "default", "$schema", "$defs" and
// "definitions" are read as comments (definitions count where referenced).
// Anything else (not, if, other unique items, another format, a multiple with
// more than 9 decimals, an overlapping oneOf, a keyword beside "$ref", ...)
// is refused by compile() with its name, never ignored: the output would
// not be held to it.
//
// What JSON Schema leaves open stays open: no type is any value, an object
// without properties or additionalProperties any object (JSON mode is that
// schema, any_object()), an array without items any items. Between tokens
// the whitespace llama.cpp's JSON grammar allows (nothing, one space, or a
// newline and up to kMaxIndent spaces or tabs), so that a model cannot pad
// forever; strings take any character but the quote, the backslash and
// controls (whole UTF-8 characters, RFC 3629's, though a token may end
// inside one); at most kMaxDepth values open at once.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/expected.h"

namespace minfer {

struct SchemaNode;

// A compiled schema: immutable, shared by the requests that use it.
class JsonSchema {
 public:
  static Expected<std::shared_ptr<const JsonSchema>> compile(std::string_view schema_json);
  // {"type": "object"}: any JSON object — JSON mode (response_format json_object).
  static std::shared_ptr<const JsonSchema> any_object();
  ~JsonSchema();
  const std::vector<SchemaNode>& nodes() const { return *nodes_; }

 private:
  JsonSchema() = default;
  std::unique_ptr<std::vector<SchemaNode>> nodes_;  // [0]: the root
};

class JsonSchemaGrammar {
 public:
  static constexpr int kMaxIndent = 20;  // spaces or tabs after a newline between tokens
  static constexpr int kMaxDepth = 64;   // values open at once
  // Parses followed side by side at most: a schema whose alternatives stay
  // ambiguous for long (anyOf of look-alike objects nested by references)
  // would double them at each level; past this the first ones go on, so
  // the output still keeps to the schema but may miss a way to finish.
  static constexpr size_t kMaxBranches = 256;

  explicit JsonSchemaGrammar(std::shared_ptr<const JsonSchema> schema);

  // Whether `bytes` may follow what was fed so far (nothing changes).
  bool accepts(std::string_view bytes) const;
  // Feeds `bytes`; false (and the state is then unspecified) when they cannot follow.
  bool advance(std::string_view bytes);
  // A branch has completed the value (only whitespace may follow).
  bool complete() const;

  // One position in the value being written: which node, and how far.
  struct Frame {
    int32_t node = 0;
    uint8_t phase = 0;
    int32_t a = 0;  // object: the property; array: the items so far; literal: which; string/number: lexer state
    int32_t b = 0;  // object: the next property's index; literal: bytes matched
    int32_t c = 0;  // a held number's fraction digits so far
  };
  struct Branch {
    std::vector<Frame> stack;  // empty: the value is complete
    uint8_t gap = 0, indent = 0;  // the whitespace between two tokens so far
    bool operator==(const Branch& o) const;
  };

 private:
  bool step(unsigned char c);
  std::shared_ptr<const JsonSchema> schema_;
  std::vector<Branch> branches_;
  // The bytes that may come next (accepts()), found once a state has been
  // asked about more than kAsksBeforeFirstBytes tokens.
  static constexpr int kAsksBeforeFirstBytes = 8;
  mutable std::bitset<256> first_;
  mutable bool first_known_ = false;
  mutable int asked_ = 0;
};

}  // namespace minfer
