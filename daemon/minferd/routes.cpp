#include "daemon/minferd/routes.h"

#include <fmt/format.h>

namespace minfer::daemon {
namespace {

struct Entry {
  std::string_view path;
  std::string_view method;
  Endpoint endpoint;
};

constexpr Entry kRoutes[] = {
    {"/v1/completions", "POST", Endpoint::kCompletions},
    {"/v1/chat/completions", "POST", Endpoint::kChatCompletions},
    {"/infill", "POST", Endpoint::kInfill},
    {"/v1/models", "GET", Endpoint::kModels},
    {"/tokenize", "POST", Endpoint::kTokenize},
    {"/detokenize", "POST", Endpoint::kDetokenize},
    {"/health", "GET", Endpoint::kHealth},
    {"/metrics", "GET", Endpoint::kMetrics},
};

constexpr std::string_view kModelPrefix = "/v1/models/";

ApiError method_not_allowed(std::string_view method, std::string_view path, std::string_view allow) {
  ApiError e = invalid_request("", "method_not_allowed",
                               fmt::format("{} is not allowed on {}; use {}", method, path, allow));
  e.status = 405;
  e.allow = std::string(allow);
  return e;
}

}  // namespace

std::variant<Route, ApiError> route(std::string_view method, std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  for (const Entry& r : kRoutes) {
    if (path != r.path) continue;
    if (method != r.method) return method_not_allowed(method, path, r.method);
    return Route{r.endpoint, {}};
  }
  if (path.size() > kModelPrefix.size() && path.substr(0, kModelPrefix.size()) == kModelPrefix) {
    if (method != "GET") return method_not_allowed(method, path, "GET");
    return Route{Endpoint::kModel, std::string(path.substr(kModelPrefix.size()))};
  }
  // OpenAI's wording for an unknown URL.
  ApiError e = invalid_request("", "not_found", fmt::format("Invalid URL ({} {})", method, path));
  e.status = 404;
  return e;
}

const char* endpoint_label(Endpoint e) {
  switch (e) {
    case Endpoint::kCompletions: return "/v1/completions";
    case Endpoint::kChatCompletions: return "/v1/chat/completions";
    case Endpoint::kInfill: return "/infill";
    case Endpoint::kModels: return "/v1/models";
    case Endpoint::kModel: return "/v1/models/{id}";
    case Endpoint::kTokenize: return "/tokenize";
    case Endpoint::kDetokenize: return "/detokenize";
    case Endpoint::kHealth: return "/health";
    case Endpoint::kMetrics: return "/metrics";
    case Endpoint::kNone: return "other";
  }
  return "other";
}

}  // namespace minfer::daemon
