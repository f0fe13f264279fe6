#include "daemon/minferd/api_error.h"

#include <nlohmann/json.hpp>

namespace minfer::daemon {

ApiError invalid_request(std::string param, std::string code, std::string message) {
  ApiError e;
  e.status = 400;
  e.type = "invalid_request_error";
  e.param = std::move(param);
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

ApiError server_error(int status, std::string code, std::string message, int retry_after_s) {
  ApiError e;
  e.status = status;
  e.type = "server_error";
  e.code = std::move(code);
  e.message = std::move(message);
  e.retry_after_s = retry_after_s;
  return e;
}

std::string error_body(const ApiError& e) {
  nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  // Client-supplied text can be invalid UTF-8 inside a message: replace, never throw.
  return nlohmann::json{{"error", std::move(err)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace minfer::daemon
