// HTTP/1.1 response bytes: a complete reply (status, headers, body) or the
// head of a streamed one and its chunks. Sessions queue these bytes; keeping
// them as plain strings makes the write queue one simple thing.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/minferd/api_error.h"

namespace minfer::daemon {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Retry-After, Allow, Server-Timing
};

HttpReply error_reply(const ApiError& e);

// `version` is 10 or 11 (HTTP/1.0, 1.1). Connection: close when !keep_alive.
std::string serialize_reply(const HttpReply& reply, unsigned version, bool keep_alive);

// A streamed reply's head: 200, text/event-stream, chunked on HTTP/1.1; on
// HTTP/1.0 the body runs to the end of the connection instead.
std::string stream_head(unsigned version, bool keep_alive, std::string_view request_id);
// One piece of a streamed body: a chunk on HTTP/1.1, the bytes on HTTP/1.0.
std::string stream_piece(std::string_view data, unsigned version);
// The end of a streamed body ("0\r\n\r\n" on HTTP/1.1, nothing on 1.0).
std::string stream_end(unsigned version);

// "HTTP/1.1 100 Continue" for a client that waits for it before the body.
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace minfer::daemon
