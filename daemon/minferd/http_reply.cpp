#include "daemon/minferd/http_reply.h"

#include <fmt/format.h>

#include <boost/beast/http.hpp>

namespace minfer::daemon {
namespace http = boost::beast::http;

HttpReply error_reply(const ApiError& e) {
  HttpReply r;
  r.status = e.status;
  r.body = error_body(e);
  if (e.retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  if (!e.allow.empty()) r.headers.emplace_back("Allow", e.allow);
  return r;
}

std::string serialize_reply(const HttpReply& reply, unsigned version, bool keep_alive) {
  // Beast writes the status line and the framing headers; the serializer's
  // buffers are copied into one string (the write_ostream pattern, without a stream).
  http::response<http::string_body> res{static_cast<http::status>(reply.status), version};
  res.set(http::field::server, "minferd");
  res.set(http::field::content_type, reply.content_type);
  for (const auto& [k, v] : reply.headers) res.set(k, v);
  res.body() = reply.body;
  res.keep_alive(keep_alive);
  res.prepare_payload();
  std::string out;
  out.reserve(reply.body.size() + 256);
  http::serializer<false, http::string_body> sr{res};
  boost::beast::error_code ec;
  do {
    sr.next(ec, [&](boost::beast::error_code&, const auto& buffers) {
      size_t n = 0;
      for (const auto b : boost::beast::buffers_range_ref(buffers)) {
        out.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      sr.consume(n);
    });
  } while (!ec && !sr.is_done());
  return out;
}

std::string stream_head(unsigned version, bool keep_alive, std::string_view request_id) {
  std::string head = fmt::format("HTTP/1.{} 200 OK\r\nServer: minferd\r\nContent-Type: text/event-stream\r\n"
                                 "Cache-Control: no-cache\r\nX-Request-Id: {}\r\n",
                                 version == 10 ? 0 : 1, request_id);
  if (version == 10) {
    head += "Connection: close\r\n";
  } else {
    head += "Transfer-Encoding: chunked\r\n";
    if (!keep_alive) head += "Connection: close\r\n";
  }
  head += "\r\n";
  return head;
}

std::string stream_piece(std::string_view data, unsigned version) {
  if (version == 10) return std::string(data);
  if (data.empty()) return {};  // an empty chunk would end the body
  std::string out = fmt::format("{:x}\r\n", data.size());
  out += data;
  out += "\r\n";
  return out;
}

std::string stream_end(unsigned version) { return version == 10 ? std::string() : std::string("0\r\n\r\n"); }

}  // namespace minfer::daemon
