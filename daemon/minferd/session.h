// One client connection: HTTP/1.1 over the Unix socket, all handlers on one
// strand. It reads requests (idle, header and body timeouts; header and body
// size limits; at most --max-pipelined read ahead), answers them strictly in
// order, hands generation work to the engine worker and streams the results
// back. While a request is in progress a read stays posted, so a client that
// disconnects is noticed at once and its request cancelled.
//
// Every accepted request ends in exactly one of: a response written, an error
// response written, or a logged cancellation (log_request with status 499).
#pragma once

#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "daemon/minferd/http_reply.h"
#include "daemon/minferd/job.h"
#include "daemon/minferd/openai_response.h"
#include "daemon/minferd/request_log.h"
#include "daemon/minferd/server_context.h"
#include "platform/peer_credentials.h"

namespace minfer::daemon {

namespace net = boost::asio;
namespace http = boost::beast::http;
using UnixSocket = net::local::stream_protocol::socket;

class Session : public std::enable_shared_from_this<Session> {
 public:
  // `socket` must use a strand executor; the session's handlers run on it.
  Session(UnixSocket socket, ServerContext& ctx);
  ~Session();

  void start();
  // Shutdown: answer what is in progress, then close (posts to the strand).
  void drain();
  // End of the shutdown grace: close now, logging any request left unanswered.
  void force_close();

  // Called through the job sink, on the strand.
  void on_job_started(const std::shared_ptr<Job>& job);
  void on_job_text(const std::shared_ptr<Job>& job, int choice, std::string piece, int n_generated,
                   std::vector<TokenLogprobs> logprobs);
  void on_job_tool_call(const std::shared_ptr<Job>& job, int choice, int index, ToolCall call);
  void on_job_reasoning(const std::shared_ptr<Job>& job, int choice, std::string piece);
  void on_job_choice_finished(const std::shared_ptr<Job>& job, int choice, ChoiceOutcome outcome);
  void on_job_finished(const std::shared_ptr<Job>& job, JobOutcome outcome);

 private:
  struct Pending {
    http::request<http::string_body> request;
    Clock::time_point received{};
    std::optional<ApiError> fatal;  // a framing error to answer, then close
  };
  struct Active {
    RequestRecord record;
    Clock::time_point received{};
    unsigned version = 11;
    bool keep_alive = true;
    std::shared_ptr<Job> job;
    bool streaming = false;
    bool include_usage = false;
    int n = 1;                  // choices of each prompt
    bool logprobs = false;      // the request asked for log-probabilities
    // The streamed choice's tokens whose log-probabilities a chunk carried,
    // and completions' text_offset of its next streamed token.
    size_t logprobs_sent = 0;
    int64_t logprobs_offset = 0;
    bool head_sent = false;
    bool done = false;  // its outcome is decided (answer queued or cancellation logged)
    ResponseIdentity identity;
    JobOutcome outcome;
  };
  struct Segment {
    std::string bytes;
    bool ends_response = false;
  };

  // Reading.
  void read_next();
  void read_header();
  void on_read_some(boost::beast::error_code ec, size_t n);
  void on_header(boost::beast::error_code ec);
  void on_body(boost::beast::error_code ec);
  void on_parse_error(boost::beast::error_code ec);
  void on_read_error(boost::beast::error_code ec);
  void arm_read_timer(int timeout_ms);
  void arm_idle_timer_if_idle();

  // Answering, in order.
  void dispatch_next();
  void dispatch(Pending p);
  void start_job(Endpoint endpoint, http::request<http::string_body>& request);
  void complete(JobOutcome outcome);
  void complete_cancelled();
  void complete_generation(JobOutcome& outcome);
  void complete_infill(const JobOutcome& outcome);
  void answer(const HttpReply& reply, bool close_after = false);
  void answer_error(const ApiError& e);
  void stream_error(const ApiError& e);
  void stream_event(std::string_view data);
  // Streaming: a choice's finish chunk, with the log-probabilities of its
  // tokens that no piece of text carried.
  void stream_choice_finish(int choice, const GenerationResult& r, bool with_tool_calls);
  void log_unanswered(CancelReason reason);
  void after_response();

  // Writing.
  void send(std::string bytes, bool ends_response);
  void do_write();
  void on_write(boost::beast::error_code ec, size_t n);
  void close();

  UnixSocket socket_;
  ServerContext& ctx_;
  platform::PeerCredentials peer_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  net::steady_timer deadline_timer_;

  std::deque<Pending> pending_;
  std::optional<Active> active_;
  bool reading_ = false;
  bool awaiting_first_byte_ = false;  // the posted read waits for a new request to begin
  bool read_stopped_ = false;  // no more requests will be read (framing error, peer gone)
  bool draining_ = false;
  bool close_after_response_ = false;
  bool closed_ = false;

  std::deque<Segment> segments_;
  std::string out_;
  bool out_ends_response_ = false;
  bool writing_ = false;
  size_t unsent_bytes_ = 0;
};

}  // namespace minfer::daemon
