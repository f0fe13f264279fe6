#include "daemon/minferd/listener.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "daemon/minferd/http_reply.h"
#include "daemon/minferd/session.h"
#include "platform/log.h"

namespace minfer::daemon {
namespace net = boost::asio;
using net::local::stream_protocol;

Listener::Listener(net::io_context& ioc, int fd, ServerContext& ctx)
    : ioc_(ioc), strand_(net::make_strand(ioc)), acceptor_(strand_), retry_timer_(strand_), ctx_(ctx) {
  acceptor_.assign(stream_protocol(), fd);
}

void Listener::start() {
  net::dispatch(strand_, [self = shared_from_this()] { self->accept(); });
}

void Listener::stop() {
  net::dispatch(strand_, [self = shared_from_this()] {
    boost::system::error_code ec;
    self->acceptor_.close(ec);
    self->retry_timer_.cancel();
  });
}

void Listener::accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(net::make_strand(ioc_), [self = shared_from_this()](boost::system::error_code ec,
                                                                             stream_protocol::socket socket) {
    self->on_accept(ec, std::move(socket));
  });
}

void Listener::on_accept(boost::system::error_code ec, stream_protocol::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of descriptors or buffers: pause instead of spinning, then go on.
    log::warn("accept failed: {}; retrying in 100 ms", ec.message());
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code e) {
      if (!e) self->accept();
    });
    return;
  }
  if (ctx_.sessions.size() >= static_cast<size_t>(ctx_.config.max_connections)) {
    ctx_.metrics.count_connection(false);
    reject(std::move(socket));
  } else {
    ctx_.metrics.count_connection(true);
    // Registered here, on the listener's strand, so the cap check above is exact.
    auto session = std::make_shared<Session>(std::move(socket), ctx_);
    ctx_.sessions.add(session.get(), session);
    session->start();
  }
  accept();
}

void Listener::reject(stream_protocol::socket socket) {
  ApiError e = server_error(503, "too_many_connections",
                            fmt::format("minferd has {} open connections, its limit (--max-connections); retry shortly",
                                        ctx_.config.max_connections),
                            1);
  auto bytes = std::make_shared<std::string>(serialize_reply(error_reply(e), 11, false));
  auto s = std::make_shared<stream_protocol::socket>(std::move(socket));
  // A fresh socket's send buffer takes these few hundred bytes at once.
  net::async_write(*s, net::buffer(*bytes), [s, bytes](boost::system::error_code, size_t) {
    boost::system::error_code ec;
    s->shutdown(net::socket_base::shutdown_both, ec);
    s->close(ec);
  });
  // At most one line a second: a flood of connections must not flood the journal too.
  static std::atomic<int64_t> last_logged_s{0};
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
  if (last_logged_s.exchange(now_s) != now_s) {
    log::warn("connection refused: {} open connections (--max-connections); see minfer_connections_rejected_total",
              ctx_.config.max_connections);
  }
}

}  // namespace minfer::daemon
