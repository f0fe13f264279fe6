// The route table: method and path → endpoint, or the 404/405 to answer.
// The query string is ignored. Metrics label requests by the endpoint's path
// (unknown paths share one label, so clients cannot grow the label set).
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "daemon/minferd/api_error.h"

namespace minfer::daemon {

enum class Endpoint {
  kCompletions,
  kChatCompletions,
  kInfill,  // POST /infill, llama.cpp's code completion
  kModels,
  kModel,  // GET /v1/models/{id}
  kTokenize,
  kDetokenize,
  kHealth,
  kMetrics,
  kNone,   // not routed (404/405, malformed HTTP)
};
constexpr int kEndpointCount = static_cast<int>(Endpoint::kNone) + 1;

struct Route {
  Endpoint endpoint = Endpoint::kNone;
  std::string model_id;  // kModel
};

std::variant<Route, ApiError> route(std::string_view method, std::string_view target);

// "/v1/completions", ..., "other".
const char* endpoint_label(Endpoint e);

}  // namespace minfer::daemon
