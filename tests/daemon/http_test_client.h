// A blocking HTTP/1.1 client over a Unix socket for the daemon tests, built
// on raw sockets (poll with a deadline, so no test can hang) and Beast's
// response parser. It can send arbitrary bytes (malformed requests), read a
// stream piece by piece, stop reading, or vanish mid-stream.
#pragma once

#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::test {

using namespace std::chrono_literals;

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  bool keep_alive = true;

  std::string header(const std::string& name) const;
  nlohmann::json json() const;  // discarded value when not JSON
};

class TestConnection {
 public:
  // rcvbuf > 0 sets SO_RCVBUF (a client that reads slowly fills up sooner).
  explicit TestConnection(const std::string& socket_path, int rcvbuf = 0);
  ~TestConnection();
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send(std::string_view bytes);
  // One response, or nullopt when the deadline passes or the peer closes first.
  std::optional<HttpResponse> read_response(std::chrono::milliseconds timeout = 30s);
  // Reads a response's head and then body bytes until pred(body so far) is
  // true; false on deadline, close or a complete response that never satisfied it.
  bool read_until(const std::function<bool(const std::string& body)>& pred, std::chrono::milliseconds timeout = 30s);
  const std::string& partial_body() const;
  int partial_status() const;
  // Reads (and discards) until the peer closes; false on deadline.
  bool wait_closed(std::chrono::milliseconds timeout = 30s);
  void close();

 private:
  enum class Recv { kData, kEof, kTimeout, kError };
  Recv recv_some(std::chrono::steady_clock::time_point deadline);
  bool pump(std::chrono::steady_clock::time_point deadline, bool* done);

  int fd_ = -1;
  std::string inbuf_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::string_body>> parser_;
  bool eof_ = false;
};

// A request's bytes; Connection: close unless keep_alive.
std::string make_request(std::string_view method, std::string_view target, std::string_view body = "",
                         bool keep_alive = false, std::string_view extra_headers = "");

// One request on its own connection. A failure to connect or to read is a
// response with status 0 (the calling test fails on it).
HttpResponse http_request(const std::string& socket, std::string_view method, std::string_view target,
                          std::string_view body = "");
HttpResponse post_json(const std::string& socket, std::string_view target, const nlohmann::json& body);

// The events of an SSE body: each "data:" payload; [DONE] sets *done (and is not returned).
std::vector<std::string> sse_data(const std::string& body, bool* done);

}  // namespace minfer::test
