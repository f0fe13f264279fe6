// The accept loop on the listening socket. Each connection becomes a Session
// on its own strand, up to --max-connections; beyond that the connection gets
// a 503 and is closed, so a flood of clients costs a few bytes each and never
// a session. A failed accept (EMFILE, ENOBUFS) is logged and retried after a
// pause; the loop only ends when the acceptor is closed.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <memory>

#include "daemon/minferd/server_context.h"

namespace minfer::daemon {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  // Takes ownership of the listening socket `fd`.
  Listener(boost::asio::io_context& ioc, int fd, ServerContext& ctx);
  void start();
  void stop();  // closes the acceptor (from any thread)

 private:
  void accept();
  void on_accept(boost::system::error_code ec, boost::asio::local::stream_protocol::socket socket);
  void reject(boost::asio::local::stream_protocol::socket socket);

  boost::asio::io_context& ioc_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  ServerContext& ctx_;
};

}  // namespace minfer::daemon
