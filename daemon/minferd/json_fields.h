// Typed reads of optional fields from a JSON request object. Absent or null
// is "not given" (OpenAI accepts null for optional parameters); a wrong type
// is a 400 naming the field, the expected type and the type received.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/minferd/api_error.h"

namespace minfer::daemon {

// Request bodies keep their keys in the client's order: a JSON schema's
// properties are the order its object's keys are written in, and declared
// tools are printed into the prompt as the client wrote them.
using Json = nlohmann::ordered_json;

// Parses a request body that must be a JSON object. Never throws.
std::optional<ApiError> parse_json_object(std::string_view body, Json* out);

std::optional<ApiError> read_number(const Json& obj, const char* name, std::optional<double>* out);
// Integers only: 16 is accepted, 16.0 and "16" are not.
std::optional<ApiError> read_integer(const Json& obj, const char* name, std::optional<int64_t>* out);
std::optional<ApiError> read_bool(const Json& obj, const char* name, std::optional<bool>* out);
std::optional<ApiError> read_string(const Json& obj, const char* name, std::optional<std::string>* out);

// A token id list (array of integers), each in [0, vocab_size).
std::optional<ApiError> read_token_ids(const Json& value, const std::string& param, int vocab_size,
                                       std::vector<int32_t>* out);

// "a string", "an array", ... for messages.
const char* json_type_phrase(const Json& v);

}  // namespace minfer::daemon
