// Errors answered to clients, in the OpenAI shape:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
// `type` is stable and coarse (invalid_request_error for the client's
// mistakes, server_error for ours or for load); `code` says which case it is,
// so programs can branch on it; `message` names the value and the limit.
#pragma once

#include <string>

namespace minfer::daemon {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;       // the offending request field; empty → null
  std::string code;        // empty → null
  int retry_after_s = 0;   // > 0: sent as Retry-After (503)
  std::string allow;       // 405: sent as Allow
  bool close_connection = false;  // the stream cannot be trusted past this (bad framing)
};

// 400 invalid_request_error naming the field.
ApiError invalid_request(std::string param, std::string code, std::string message);
// 5xx server_error (503 with Retry-After when retry_after_s > 0).
ApiError server_error(int status, std::string code, std::string message, int retry_after_s = 0);

// The JSON text of the error body.
std::string error_body(const ApiError& e);

}  // namespace minfer::daemon
