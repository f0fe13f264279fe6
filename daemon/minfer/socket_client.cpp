#include "daemon/minfer/socket_client.h"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>

namespace minfer::cli {
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using net::local::stream_protocol;

namespace {

Expected<std::unique_ptr<stream_protocol::socket>> connect(net::io_context& ioc, const std::string& path) {
  auto s = std::make_unique<stream_protocol::socket>(ioc);
  beast::error_code ec;
  s->connect(stream_protocol::endpoint(path), ec);
  if (ec) {
    return unexpected(ErrorCode::kIo, fmt::format("cannot connect to {}: {}; is minferd running? (systemctl status "
                                                  "minferd; --socket or MINFER_SOCKET name another socket)",
                                                  path, ec.message()));
  }
  return s;
}

http::request<http::string_body> make_request(std::string_view method, std::string_view target, const std::string& body) {
  http::request<http::string_body> req{http::string_to_verb(beast::string_view(method.data(), method.size())),
                                       beast::string_view(target.data(), target.size()), 11};
  req.set(http::field::host, "minferd");
  req.set(http::field::user_agent, "minfer");
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  return req;
}

Error io_error(const beast::error_code& ec, const char* what) {
  return Error(ErrorCode::kIo, fmt::format("{} failed: {}", what, ec.message()));
}

}  // namespace

std::string default_socket_path() {
  const char* env = std::getenv("MINFER_SOCKET");
  return env != nullptr && *env != '\0' ? env : "/run/minfer/minferd.sock";
}

std::string error_message(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return body;
}

Expected<HttpResult> SocketClient::request(std::string_view method, std::string_view target, const std::string& body) {
  net::io_context ioc;
  MINFER_ASSIGN_OR_RETURN(auto socket, connect(ioc, path_));
  beast::error_code ec;
  http::write(*socket, make_request(method, target, body), ec);
  if (ec) return io_error(ec, "sending the request");
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(*socket, buffer, res, ec);
  if (ec) return io_error(ec, "reading the response");
  return HttpResult{static_cast<int>(res.result_int()), std::move(res.body())};
}

Expected<HttpResult> SocketClient::stream(std::string_view target, const std::string& body,
                                          const std::function<bool(std::string_view data)>& on_data) {
  net::io_context ioc;
  MINFER_ASSIGN_OR_RETURN(auto socket, connect(ioc, path_));
  beast::error_code ec;
  auto req = make_request("POST", target, body);
  req.set(http::field::accept, "text/event-stream");
  http::write(*socket, req, ec);
  if (ec) return io_error(ec, "sending the request");

  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  // A stream is as long as the generation. (Not boost::none: Beast 1.74 compares
  // a Content-Length against an empty limit as exceeding it.)
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(*socket, buffer, parser, ec);
  if (ec) return io_error(ec, "reading the response");
  HttpResult result{static_cast<int>(parser.get().result_int()), {}};

  std::string pending;  // bytes of events not yet complete
  char chunk[8192];
  bool done = false;
  while (!parser.is_done() && !done) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    http::read(*socket, buffer, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return io_error(ec, "reading the stream");
    const size_t n = sizeof(chunk) - parser.get().body().size;
    if (result.status != 200) {
      result.body.append(chunk, n);
      continue;
    }
    pending.append(chunk, n);
    // Events end with a blank line; each "data:" line carries the payload.
    for (size_t end; !done && (end = pending.find("\n\n")) != std::string::npos;) {
      std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      std::string data;
      for (size_t pos = 0; pos <= event.size();) {
        size_t eol = event.find('\n', pos);
        if (eol == std::string::npos) eol = event.size();
        std::string_view line(event.data() + pos, eol - pos);
        if (line.substr(0, 5) == "data:") {
          line.remove_prefix(line.size() > 5 && line[5] == ' ' ? 6 : 5);
          if (!data.empty()) data += '\n';
          data += line;
        }
        pos = eol + 1;
      }
      if (data == "[DONE]" || !on_data(data)) done = true;
    }
  }
  return result;
}

}  // namespace minfer::cli
