#include "tests/daemon/http_test_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <cctype>
#include <cstring>
#include <limits>

namespace minfer::test {
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

std::string HttpResponse::header(const std::string& name) const {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  auto it = headers.find(lower);
  return it == headers.end() ? std::string() : it->second;
}

nlohmann::json HttpResponse::json() const { return nlohmann::json::parse(body, nullptr, false); }

TestConnection::TestConnection(const std::string& socket_path, int rcvbuf) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return;
  }
  fd_ = fd;
}

TestConnection::~TestConnection() { close(); }

void TestConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool TestConnection::send(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return fd_ >= 0;
}

TestConnection::Recv TestConnection::recv_some(Clock::time_point deadline) {
  if (fd_ < 0 || eof_) return Recv::kEof;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return Recv::kTimeout;
  pollfd p{fd_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(left));
  if (r == 0) return Recv::kTimeout;
  if (r < 0) return Recv::kError;
  char buf[65536];
  const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
  if (n == 0) {
    eof_ = true;
    return Recv::kEof;
  }
  if (n < 0) return Recv::kError;
  inbuf_.append(buf, static_cast<size_t>(n));
  return Recv::kData;
}

// Feeds buffered bytes to the parser, receiving more when it needs them.
// Returns false on deadline/close/error before progress; *done when the
// response is complete.
bool TestConnection::pump(Clock::time_point deadline, bool* done) {
  if (!parser_) {
    parser_.emplace();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // not boost::none: see socket_client.cpp
    parser_->eager(true);
  }
  for (;;) {
    if (!inbuf_.empty()) {
      boost::beast::error_code ec;
      const size_t n = parser_->put(boost::asio::buffer(inbuf_), ec);
      inbuf_.erase(0, n);
      if (ec && ec != http::error::need_more) return false;
      if (parser_->is_done()) {
        *done = true;
        return true;
      }
      if (n > 0) return true;
    }
    switch (recv_some(deadline)) {
      case Recv::kData: break;
      case Recv::kEof: {
        boost::beast::error_code ec;
        parser_->put_eof(ec);
        *done = !ec && parser_->is_done();
        return *done;
      }
      case Recv::kTimeout:
      case Recv::kError: return false;
    }
  }
}

std::optional<HttpResponse> TestConnection::read_response(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool done = false;
  while (!done) {
    if (!pump(deadline, &done)) {
      parser_.reset();
      return std::nullopt;
    }
  }
  auto msg = parser_->release();
  parser_.reset();
  HttpResponse r;
  r.status = static_cast<int>(msg.result_int());
  for (const auto& f : msg) {
    std::string name(f.name_string().data(), f.name_string().size());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    r.headers[name] = std::string(f.value().data(), f.value().size());
  }
  r.body = std::move(msg.body());
  r.keep_alive = msg.keep_alive();
  return r;
}

bool TestConnection::read_until(const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool done = false;
  for (;;) {
    if (parser_ && parser_->is_header_done() && pred(parser_->get().body())) return true;
    if (done || !pump(deadline, &done)) return false;
  }
}

const std::string& TestConnection::partial_body() const {
  static const std::string empty;
  return parser_ ? parser_->get().body() : empty;
}

int TestConnection::partial_status() const {
  return parser_ && parser_->is_header_done() ? static_cast<int>(parser_->get().result_int()) : 0;
}

bool TestConnection::wait_closed(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    inbuf_.clear();
    switch (recv_some(deadline)) {
      case Recv::kData: continue;
      case Recv::kEof: return true;
      case Recv::kError: return true;  // reset by the peer: closed too
      case Recv::kTimeout: return false;
    }
  }
}

std::string make_request(std::string_view method, std::string_view target, std::string_view body, bool keep_alive,
                         std::string_view extra_headers) {
  std::string r;
  r += method;
  r += ' ';
  r += target;
  r += " HTTP/1.1\r\nHost: minferd\r\n";
  if (!keep_alive) r += "Connection: close\r\n";
  if (!body.empty() || method == "POST") {
    r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += extra_headers;
  r += "\r\n";
  r += body;
  return r;
}

HttpResponse http_request(const std::string& socket, std::string_view method, std::string_view target,
                          std::string_view body) {
  TestConnection c(socket);
  if (!c.connected() || !c.send(make_request(method, target, body))) return {};
  return c.read_response().value_or(HttpResponse{});
}

HttpResponse post_json(const std::string& socket, std::string_view target, const nlohmann::json& body) {
  return http_request(socket, "POST", target, body.dump());
}

std::vector<std::string> sse_data(const std::string& body, bool* done) {
  std::vector<std::string> out;
  *done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) break;
    std::string_view event(body.data() + pos, end - pos);
    pos = end + 2;
    if (event.substr(0, 6) != "data: ") continue;
    event.remove_prefix(6);
    if (event == "[DONE]") {
      *done = true;
      continue;
    }
    out.emplace_back(event);
  }
  return out;
}

}  // namespace minfer::test
