// A small HTTP/1.1 client over minferd's Unix socket (Boost.Beast, blocking),
// for the `minfer` subcommands that talk to the daemon: one request per
// connection, and server-sent-event streams read as they arrive.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "engine/common/expected.h"

namespace minfer::cli {

// $MINFER_SOCKET, else /run/minfer/minferd.sock.
std::string default_socket_path();

struct HttpResult {
  int status = 0;
  std::string body;  // for a stream answered with 200: empty
};

class SocketClient {
 public:
  explicit SocketClient(std::string socket_path) : path_(std::move(socket_path)) {}

  Expected<HttpResult> request(std::string_view method, std::string_view target, const std::string& body = "");

  // POSTs a JSON body asking for a stream and calls `on_data` with each
  // event's data (the text after "data: ") until "[DONE]" or until it
  // returns false. A non-200 answer comes back whole in the result.
  Expected<HttpResult> stream(std::string_view target, const std::string& body,
                              const std::function<bool(std::string_view data)>& on_data);

 private:
  std::string path_;
};

// The "message" of an OpenAI-style error body, or the body itself.
std::string error_message(const std::string& body);

}  // namespace minfer::cli
