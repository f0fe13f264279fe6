#include "daemon/minferd/session.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <ctime>
#include <random>

#include "daemon/minferd/infill_response.h"
#include "daemon/minferd/info_handlers.h"
#include "daemon/minferd/request_parse.h"
#include "platform/log.h"

namespace minfer::daemon {
namespace beast = boost::beast;

namespace {

constexpr uint32_t kHeaderLimitBytes = 16 * 1024;  // request line and headers
constexpr size_t kReadChunkBytes = 16 * 1024;
constexpr size_t kLoggedTargetBytes = 256;
// The engine checks the deadline every step; the session's own timer is the
// backstop for an engine that stopped stepping, so it fires a little later.
constexpr std::chrono::seconds kDeadlineBackstop{2};

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool is_malformed_http(const beast::error_code& ec) {
  // A copy of one Beast HTTP error code carries the category to compare with
  // (a reference through a temporary error_code reads as dangling to gcc 13).
  static const beast::error_code http_error = http::make_error_code(http::error::bad_method);
  if (ec.category() != http_error.category()) return false;
  switch (static_cast<http::error>(ec.value())) {
    case http::error::end_of_stream:
    case http::error::partial_message:
    case http::error::need_more:
    case http::error::need_buffer:
    case http::error::buffer_overflow: return false;  // the connection ended, not a bad request
    default: return true;
  }
}

std::string_view sv(beast::string_view s) { return std::string_view(s.data(), s.size()); }

uint64_t random_seed() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

bool called_tools(const ChoiceOutcome& c) { return c.tool_reply && !c.tool_reply->calls.empty(); }

// Where a generation's time went, for clients and the load tool
// (Server-Timing, W3C).
std::string server_timing(const JobOutcome& o) {
  return fmt::format("queue;dur={:.3f}, prep;dur={:.3f}, engine;dur={:.3f}", o.queue_ms, o.prep_ms, o.engine_ms);
}

// A generation's usage: each prompt once (its first choice's tokens, and
// what that choice reused of earlier requests' KV) and every choice's
// generated tokens, best_of's unanswered candidates' too. `n`: the choices
// of each prompt.
Usage usage_of(const JobOutcome& o, int n) {
  Usage u;
  u.completion_tokens = o.unanswered_tokens;
  for (size_t i = 0; i < o.choices.size(); ++i) {
    const GenerationResult& r = o.choices[i].result;
    if (i % static_cast<size_t>(n) == 0) {
      u.prompt_tokens += r.n_prompt;
      u.cached_tokens += r.n_cached;
    }
    u.completion_tokens += r.n_generated;
  }
  return u;
}

// The engine thread's handle on a session: every call is posted to the
// session's strand, so the engine never waits for a client.
class SessionSink final : public JobSink {
 public:
  SessionSink(std::shared_ptr<Session> session, net::any_io_executor strand)
      : session_(std::move(session)), strand_(std::move(strand)) {}
  void bind(const std::shared_ptr<Job>& job) { job_ = job; }

  void started(int) override {
    net::post(strand_, [s = session_, j = job_.lock()] { s->on_job_started(j); });
  }
  void text(int choice, std::string piece, int n_generated, std::vector<TokenLogprobs> logprobs) override {
    net::post(strand_, [s = session_, j = job_.lock(), choice, p = std::move(piece), n_generated,
                        l = std::move(logprobs)]() mutable {
      s->on_job_text(j, choice, std::move(p), n_generated, std::move(l));
    });
  }
  void tool_call(int choice, int index, ToolCall call) override {
    net::post(strand_, [s = session_, j = job_.lock(), choice, index, c = std::move(call)]() mutable {
      s->on_job_tool_call(j, choice, index, std::move(c));
    });
  }
  void reasoning(int choice, std::string piece) override {
    net::post(strand_, [s = session_, j = job_.lock(), choice, p = std::move(piece)]() mutable {
      s->on_job_reasoning(j, choice, std::move(p));
    });
  }
  void choice_finished(int choice, ChoiceOutcome outcome) override {
    net::post(strand_, [s = session_, j = job_.lock(), choice, o = std::move(outcome)]() mutable {
      s->on_job_choice_finished(j, choice, std::move(o));
    });
  }
  void finished(JobOutcome outcome) override {
    // The last call: dropping the session here breaks the cycle
    // session → job → sink → session.
    std::shared_ptr<Session> s = std::move(session_);
    net::post(strand_, [s, j = job_.lock(), o = std::move(outcome)]() mutable { s->on_job_finished(j, std::move(o)); });
  }

 private:
  std::shared_ptr<Session> session_;
  net::any_io_executor strand_;
  std::weak_ptr<Job> job_;
};

}  // namespace

Session::Session(UnixSocket socket, ServerContext& ctx)
    : socket_(std::move(socket)),
      ctx_(ctx),
      read_timer_(socket_.get_executor()),
      write_timer_(socket_.get_executor()),
      deadline_timer_(socket_.get_executor()) {}

Session::~Session() { ctx_.sessions.remove(this); }

void Session::start() {
  net::dispatch(socket_.get_executor(), [self = shared_from_this()] {
    self->peer_ = platform::peer_credentials(self->socket_.native_handle());
    if (const int sndbuf = self->ctx_.config.send_buffer_bytes; sndbuf > 0) {
      ::setsockopt(self->socket_.native_handle(), SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    }
    if (self->ctx_.draining.load()) self->draining_ = true;
    self->read_next();
  });
}

void Session::drain() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    self->draining_ = true;
    if (!self->active_ && self->pending_.empty() && !self->writing_ && self->segments_.empty()) self->close();
  });
}

void Session::force_close() {
  net::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->active_ && !self->active_->done) self->log_unanswered(CancelReason::kShutdown);
    self->close();
  });
}

// ---- reading ---------------------------------------------------------------

void Session::arm_read_timer(int timeout_ms) {
  read_timer_.expires_after(std::chrono::milliseconds(timeout_ms));
  read_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_) return;
    if (self->read_timer_.expiry() > Clock::now()) return;  // re-armed after it fired
    // Idle keep-alive connection, or a request that trickles in (slowloris):
    // either way the connection is done. A request in progress is cancelled.
    log::debug("connection closed: read timeout (peer pid {})", self->peer_.pid);
    self->close();
  });
}

void Session::read_next() {
  if (reading_ || read_stopped_ || closed_) return;
  if (pending_.size() + (active_ ? 1 : 0) >= static_cast<size_t>(ctx_.config.max_pipelined)) return;
  if (draining_ && !active_ && pending_.empty()) {
    close();
    return;
  }
  reading_ = true;
  if (buffer_.size() > 0) {  // a pipelined request's bytes are already here
    read_header();
    return;
  }
  awaiting_first_byte_ = true;
  read_timer_.cancel();  // while a request is in progress: only listening for a disconnect or a pipelined request
  arm_idle_timer_if_idle();
  socket_.async_read_some(buffer_.prepare(kReadChunkBytes),
                          beast::bind_front_handler(&Session::on_read_some, shared_from_this()));
}

void Session::arm_idle_timer_if_idle() {
  if (awaiting_first_byte_ && !active_ && pending_.empty()) arm_read_timer(ctx_.config.idle_timeout_ms);
}

void Session::on_read_some(beast::error_code ec, size_t n) {
  awaiting_first_byte_ = false;
  if (closed_) return;
  if (ec) return on_read_error(ec);
  buffer_.commit(n);
  read_header();
}

void Session::read_header() {
  parser_.emplace();
  parser_->header_limit(kHeaderLimitBytes);
  parser_->body_limit(ctx_.config.body_limit_bytes);
  arm_read_timer(ctx_.config.header_timeout_ms);
  http::async_read_header(socket_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(beast::error_code ec) {
  if (closed_) return;
  if (ec) return on_parse_error(ec);
  // Refuse a declared oversized body before reading it.
  if (const auto length = parser_->content_length(); length && *length > ctx_.config.body_limit_bytes) {
    return on_parse_error(http::error::body_limit);
  }
  const auto& req = parser_->get();
  if (beast::iequals(req[http::field::expect], "100-continue") && !active_ && pending_.empty() && !writing_ &&
      segments_.empty()) {
    send(std::string(kContinue), false);
  }
  arm_read_timer(ctx_.config.header_timeout_ms);  // and again for the body
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](beast::error_code ec2, size_t) { self->on_body(ec2); });
}

void Session::on_body(beast::error_code ec) {
  reading_ = false;
  read_timer_.cancel();
  if (closed_) return;
  if (ec) return on_parse_error(ec);
  pending_.push_back(Pending{parser_->release(), Clock::now(), std::nullopt});
  parser_.reset();
  dispatch_next();
  read_next();
}

void Session::on_parse_error(beast::error_code ec) {
  reading_ = false;
  read_timer_.cancel();
  if (closed_) return;
  ApiError e;
  if (ec == http::error::body_limit) {
    e = invalid_request("", "request_too_large",
                        fmt::format("the request body is larger than the limit of {} bytes (--body-limit-bytes)",
                                    ctx_.config.body_limit_bytes));
    e.status = 413;
  } else if (ec == http::error::header_limit) {
    e = invalid_request("", "request_header_too_large",
                        fmt::format("the request line and headers exceed {} bytes", kHeaderLimitBytes));
    e.status = 431;
  } else if (is_malformed_http(ec)) {
    e = invalid_request("", "malformed_request", fmt::format("malformed HTTP request: {}", ec.message()));
  } else {
    return on_read_error(ec);
  }
  // Framing is lost: answer in order, then close.
  e.close_connection = true;
  read_stopped_ = true;
  pending_.push_back(Pending{{}, Clock::now(), std::move(e)});
  dispatch_next();
}

void Session::on_read_error(beast::error_code ec) {
  reading_ = false;
  read_stopped_ = true;
  read_timer_.cancel();
  if (closed_) return;
  // The client closed its end or the connection broke: nothing more will be
  // read or delivered. A request in progress is cancelled (close()).
  if (!pending_.empty()) log::debug("client went away with {} pipelined requests unanswered", pending_.size());
  log::debug("connection closed by peer pid {}: {}", peer_.pid, ec.message());
  close();
}

// ---- answering ---------------------------------------------------------------

void Session::dispatch_next() {
  if (active_ || pending_.empty() || closed_) return;
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  dispatch(std::move(p));
}

void Session::dispatch(Pending p) {
  // emplace(Active{}), not emplace(): clang 14 (the sanitizer and fuzz builds)
  // judges the nested Active, with its default member initializers, not
  // default-constructible here.
  Active& a = active_.emplace(Active{});
  a.received = p.received;
  a.record.id = ++ctx_.next_request_id;
  a.record.peer = peer_;
  if (const ModelInfo* info = ctx_.worker.info()) a.record.backend = info->backend;
  if (p.fatal) {
    a.record.method = "-";
    a.record.target = "-";
    a.keep_alive = false;
    answer_error(*p.fatal);
    return;
  }
  auto& req = p.request;
  a.record.method = std::string(sv(req.method_string()));
  a.record.target = std::string(sv(req.target()).substr(0, kLoggedTargetBytes));
  a.version = req.version() == 10 ? 10 : 11;
  a.keep_alive = req.keep_alive();
  auto routed = route(sv(req.method_string()), sv(req.target()));
  if (const ApiError* e = std::get_if<ApiError>(&routed)) {
    answer_error(*e);
    return;
  }
  const Route& r = std::get<Route>(routed);
  a.record.endpoint = r.endpoint;
  switch (r.endpoint) {
    case Endpoint::kHealth: answer(health_reply(ctx_)); return;
    case Endpoint::kMetrics: answer(metrics_reply(ctx_)); return;
    case Endpoint::kModels: answer(models_reply(ctx_, nullptr)); return;
    case Endpoint::kModel: answer(models_reply(ctx_, &r.model_id)); return;
    default: start_job(r.endpoint, req); return;
  }
}

void Session::start_job(Endpoint endpoint, http::request<http::string_body>& request) {
  Active& a = *active_;
  switch (ctx_.worker.phase()) {
    case DaemonPhase::kLoading:
    case DaemonPhase::kWarmingUp:
      return answer_error(server_error(503, "model_loading", "the model is still loading; retry shortly", 1));
    case DaemonPhase::kStopping:
      return answer_error(server_error(503, "shutting_down", "minferd is shutting down"));
    case DaemonPhase::kFailed:
      return answer_error(server_error(503, "engine_failed", "the engine failed to start: " + ctx_.worker.failure()));
    case DaemonPhase::kReady: break;
  }
  const ModelLimits limits = ctx_.worker.limits();
  auto job = std::make_shared<Job>();
  job->id = a.record.id;
  job->received = a.received;
  job->deadline = a.received + std::chrono::milliseconds(ctx_.config.request_timeout_ms);
  job->seed = random_seed();
  std::optional<ApiError> err;
  switch (endpoint) {
    case Endpoint::kCompletions: err = parse_completion_request(request.body(), limits, &job->generation); break;
    case Endpoint::kChatCompletions: err = parse_chat_request(request.body(), limits, &job->generation); break;
    case Endpoint::kInfill: err = parse_infill_request(request.body(), limits, &job->generation); break;
    case Endpoint::kTokenize:
      job->kind = JobKind::kTokenize;
      err = parse_tokenize_request(request.body(), &job->tokenize);
      break;
    case Endpoint::kDetokenize:
      job->kind = JobKind::kDetokenize;
      err = parse_detokenize_request(request.body(), limits, &job->detokenize);
      break;
    default: err = server_error(500, "internal_error", "unrouted endpoint"); break;
  }
  if (err) return answer_error(*err);
  if (job->kind == JobKind::kGenerate) {
    const GenerationSpec& spec = job->generation;
    a.streaming = spec.stream;
    a.include_usage = spec.include_usage;
    a.n = spec.n;
    a.logprobs = spec.top_logprobs >= 0;
    a.identity.kind = spec.kind;
    a.identity.id = fmt::format("{}-{:x}{:06x}", spec.kind == ApiKind::kChat ? "chatcmpl" : "cmpl", ctx_.started_unix,
                                a.record.id);
    a.identity.created = static_cast<int64_t>(std::time(nullptr));
    a.identity.model = ctx_.model_id;
  }
  auto sink = std::make_shared<SessionSink>(shared_from_this(), socket_.get_executor());
  sink->bind(job);
  job->sink = sink;
  a.job = job;
  switch (ctx_.worker.submit(job)) {
    case EngineWorker::Admit::kQueued: break;
    case EngineWorker::Admit::kFull:
      a.job.reset();
      return answer_error(server_error(
          503, "queue_full",
          fmt::format("the request queue is full ({} waiting); retry shortly", ctx_.worker.queue_capacity()), 1));
    case EngineWorker::Admit::kNotReady:
      a.job.reset();
      return answer_error(server_error(503, "model_loading", "the model is still loading; retry shortly", 1));
    case EngineWorker::Admit::kStopping:
    case EngineWorker::Admit::kFailed:
      a.job.reset();
      return answer_error(server_error(503, "shutting_down", "minferd is shutting down"));
  }
  deadline_timer_.expires_at(job->deadline + kDeadlineBackstop);
  deadline_timer_.async_wait([self = shared_from_this(), job](beast::error_code ec) {
    if (ec || !self->active_ || self->active_->job != job || self->active_->done) return;
    // The engine did not answer by the deadline: answer for it.
    job->request_cancel(CancelReason::kDeadline);
    self->ctx_.metrics.count_cancellation(CancelReason::kDeadline);
    self->active_->record.cancel_reason = cancel_reason_name(CancelReason::kDeadline);
    JobOutcome out;
    out.error = server_error(504, "deadline_exceeded",
                             fmt::format("no answer from the engine within the deadline of {} ms",
                                         self->ctx_.config.request_timeout_ms));
    self->complete(std::move(out));
  });
}

void Session::on_job_started(const std::shared_ptr<Job>& job) {
  if (closed_ || !active_ || active_->job != job || active_->done || !active_->streaming) return;
  Active& a = *active_;
  const bool keep = a.keep_alive && !draining_ && a.version == 11;
  if (!keep) close_after_response_ = true;
  send(stream_head(a.version, keep, std::to_string(a.record.id)), false);
  a.head_sent = true;
  a.record.status = 200;
  if (a.identity.kind == ApiKind::kChat) {
    for (int c = 0; c < a.n; ++c) stream_event(role_chunk(a.identity, c, a.include_usage));
  }
}

void Session::on_job_text(const std::shared_ptr<Job>& job, int choice, std::string piece, int n_generated,
                          std::vector<TokenLogprobs> logprobs) {
  if (closed_ || !active_ || active_->job != job || active_->done || !active_->head_sent) return;
  Active& a = *active_;
  if (a.identity.kind == ApiKind::kInfill) {
    stream_event(infill_chunk(piece, n_generated));
  } else if (a.logprobs) {
    const ChoiceLogprobs lp{logprobs, a.logprobs_offset};
    stream_event(text_chunk(a.identity, choice, piece, a.include_usage, &lp));
    a.logprobs_sent += logprobs.size();
    a.logprobs_offset += logprobs_text_chars(logprobs);
  } else {
    stream_event(text_chunk(a.identity, choice, piece, a.include_usage));
  }
  if (unsent_bytes_ > ctx_.config.stream_buffer_bytes && !job->cancelled()) {
    // The client does not read its stream: stop generating for it.
    job->request_cancel(CancelReason::kSlowReader);
  }
}

void Session::on_job_tool_call(const std::shared_ptr<Job>& job, int choice, int index, ToolCall call) {
  if (closed_ || !active_ || active_->job != job || active_->done || !active_->head_sent) return;
  stream_event(tool_call_chunk(active_->identity, choice, index, call, active_->include_usage));
}

void Session::on_job_reasoning(const std::shared_ptr<Job>& job, int choice, std::string piece) {
  if (closed_ || !active_ || active_->job != job || active_->done || !active_->head_sent) return;
  stream_event(reasoning_chunk(active_->identity, choice, piece, active_->include_usage));
}

void Session::on_job_choice_finished(const std::shared_ptr<Job>& job, int choice, ChoiceOutcome outcome) {
  if (closed_ || !active_ || active_->job != job || active_->done || !active_->head_sent) return;
  stream_choice_finish(choice, outcome.result, called_tools(outcome));
}

void Session::stream_choice_finish(int choice, const GenerationResult& r, bool with_tool_calls) {
  Active& a = *active_;
  // Tokens whose logprobs no piece of text carried (held back, then cut by
  // a stop string, or ending the text) come with the finish.
  const auto rest = std::span<const TokenLogprobs>(r.logprobs).subspan(std::min(a.logprobs_sent, r.logprobs.size()));
  const ChoiceLogprobs lp{rest, a.logprobs_offset};
  stream_event(finish_chunk(a.identity, choice, openai_finish_reason(r.finish, with_tool_calls), a.include_usage,
                            a.logprobs && !rest.empty() ? &lp : nullptr));
  a.logprobs_sent = 0;  // the next choice's tokens
  a.logprobs_offset = 0;
}

void Session::on_job_finished(const std::shared_ptr<Job>& job, JobOutcome outcome) {
  if (!active_ || active_->job != job || active_->done) return;  // answered already (deadline backstop)
  if (closed_) {
    // Nobody to answer: the logged cancellation is this request's outcome.
    Active& a = *active_;
    a.done = true;
    a.outcome = std::move(outcome);
    CancelReason reason = job->cancel_reason.load();
    if (reason == CancelReason::kNone) reason = CancelReason::kClientGone;
    if (a.outcome.cancelled) ctx_.metrics.count_cancellation(reason);
    a.record.cancel_reason = cancel_reason_name(reason);
    a.record.status = 499;
    after_response();
    return;
  }
  complete(std::move(outcome));
}

void Session::complete(JobOutcome outcome) {
  Active& a = *active_;
  a.done = true;
  deadline_timer_.cancel();
  a.outcome = std::move(outcome);
  if (a.outcome.error) {
    if (a.head_sent) return stream_error(*a.outcome.error);
    return answer_error(*a.outcome.error);
  }
  if (a.outcome.cancelled) return complete_cancelled();
  switch (a.job->kind) {
    case JobKind::kTokenize: return answer(tokenize_reply(a.job->tokenize, a.outcome));
    case JobKind::kDetokenize: return answer(detokenize_reply(a.outcome));
    case JobKind::kGenerate: return complete_generation(a.outcome);
  }
}

// Cancelled while it waited or ran, with the client still connected: at
// shutdown a 503 (or, streaming, an error event); otherwise the client is
// not reading its stream, and the connection is dropped.
void Session::complete_cancelled() {
  Active& a = *active_;
  const CancelReason reason = a.job->cancel_reason.load();
  ctx_.metrics.count_cancellation(reason);
  a.record.cancel_reason = cancel_reason_name(reason);
  if (reason == CancelReason::kShutdown) {
    std::string message = "minferd is shutting down; the request was cancelled";
    if (a.job->kind == JobKind::kGenerate) {
      message += fmt::format(" after {} tokens", usage_of(a.outcome, a.n).completion_tokens);
    }
    ApiError e = server_error(503, "shutting_down", std::move(message));
    e.close_connection = true;
    if (a.head_sent) return stream_error(e);
    return answer_error(e);
  }
  log::debug("request {}: client not reading; {} bytes unsent", a.record.id, unsent_bytes_);
  a.record.status = 499;
  close_after_response_ = true;
  after_response();
}

void Session::complete_generation(JobOutcome& o) {
  Active& a = *active_;
  if (o.choices.empty()) {  // run_generation ends with an error or a cancellation before its first choice
    return answer_error(server_error(500, "internal_error", "the engine ended the request without a choice"));
  }
  if (a.identity.kind == ApiKind::kInfill) return complete_infill(o);
  const Usage usage = usage_of(o, a.n);
  const std::vector<ChoiceOutcome>& choices = o.choices;
  if (a.streaming) {
    stream_choice_finish(static_cast<int>(choices.size()) - 1, choices.back().result, called_tools(choices.back()));
    if (a.include_usage) stream_event(usage_chunk(a.identity, usage));
    send(stream_piece(kSseDone, a.version), false);
    send(stream_end(a.version), true);
    return;
  }
  // Each choice: its text (echo: its prompt's text first) and, when asked
  // for, its tokens' log-probabilities (echo: its prompt's, scored once by
  // the prompt's first choice, first).
  const size_t count = choices.size();
  std::vector<std::string> texts(count);
  std::vector<std::vector<TokenLogprobs>> echoed_lp(count);
  std::vector<ChoiceLogprobs> lps(count);
  std::vector<ChoiceBody> bodies(count);
  for (size_t i = 0; i < count; ++i) {
    const ChoiceOutcome& c = choices[i];
    const GenerationResult& ri = c.result;
    const std::vector<TokenLogprobs>& prompt_lp = choices[i - i % static_cast<size_t>(a.n)].result.prompt_logprobs;
    texts[i] = c.echo_text + ri.text;
    lps[i] = {ri.logprobs, 0};
    if (!c.echo_text.empty() || !prompt_lp.empty()) {
      echoed_lp[i] = prompt_lp;
      echoed_lp[i].insert(echoed_lp[i].end(), ri.logprobs.begin(), ri.logprobs.end());
      lps[i] = {echoed_lp[i], 0};
    }
    bodies[i] = {texts[i], openai_finish_reason(ri.finish, called_tools(c)), a.logprobs ? &lps[i] : nullptr,
                 c.tool_reply ? &*c.tool_reply : nullptr, c.reasoning};
  }
  HttpReply reply;
  reply.body = completion_body(a.identity, bodies, usage);
  reply.headers.emplace_back("Server-Timing", server_timing(o));
  answer(reply);
}

// llama.cpp's native answer (infill_response.h): one choice. A stream ends
// with the whole object and no [DONE], as llama.cpp's native endpoints do.
void Session::complete_infill(const JobOutcome& o) {
  Active& a = *active_;
  const GenerationResult& r = o.choices.back().result;
  if (a.streaming) {
    stream_event(infill_body(a.identity.model, r, o.prompt_truncated, true));
    send(stream_end(a.version), true);
    return;
  }
  HttpReply reply;
  reply.body = infill_body(a.identity.model, r, o.prompt_truncated, false);
  reply.headers.emplace_back("Server-Timing", server_timing(o));
  answer(reply);
}

void Session::answer(const HttpReply& reply, bool close_after) {
  Active& a = *active_;
  a.done = true;
  a.record.status = reply.status;
  const bool keep = a.keep_alive && !close_after && !draining_;
  if (!keep) close_after_response_ = true;
  HttpReply r = reply;
  r.headers.emplace_back("X-Request-Id", std::to_string(a.record.id));
  send(serialize_reply(r, a.version, keep), true);
}

void Session::answer_error(const ApiError& e) {
  active_->record.error_code = e.code;
  answer(error_reply(e), e.close_connection);
}

void Session::stream_event(std::string_view data) { send(stream_piece(sse_event(data), active_->version), false); }

void Session::stream_error(const ApiError& e) {
  // The head (200) is out: the error travels as an event, as OpenAI's API
  // does (llama.cpp's native streams, /infill's, end without [DONE]).
  Active& a = *active_;
  a.done = true;
  a.record.error_code = e.code;
  if (e.close_connection) close_after_response_ = true;
  stream_event(error_body(e));
  if (a.identity.kind != ApiKind::kInfill) send(stream_piece(kSseDone, a.version), false);
  send(stream_end(a.version), true);
}

void Session::log_unanswered(CancelReason reason) {
  Active& a = *active_;
  a.done = true;
  ctx_.metrics.count_cancellation(reason);
  a.record.cancel_reason = cancel_reason_name(reason);
  a.record.status = 499;
  close_after_response_ = true;
  after_response();
}

void Session::after_response() {
  Active& a = *active_;
  RequestRecord& rec = a.record;
  rec.total_ms = ms_since(a.received);
  const bool ran = a.job && (a.outcome.engine_ms > 0 || a.outcome.queue_ms > 0);
  if (ran) {
    rec.queue_ms = a.outcome.queue_ms;
    rec.engine_ms = a.outcome.engine_ms;
    if (a.job->kind == JobKind::kGenerate) rec.prep_ms = a.outcome.prep_ms;
  }
  if (a.job && a.job->kind == JobKind::kGenerate && ran) {
    const JobOutcome& o = a.outcome;
    static const ChoiceOutcome kNone{};  // ended before its first choice
    const ChoiceOutcome& last = o.choices.empty() ? kNone : o.choices.back();  // the one that ended the request
    const GenerationResult& r = last.result;
    const GenerationResult& first = o.choices.empty() ? r : o.choices.front().result;
    const Usage usage = usage_of(o, a.n);
    rec.prompt_tokens = usage.prompt_tokens;
    rec.cached_tokens = usage.cached_tokens;
    if (!a.job->generation.tools.empty()) {
      rec.tool_calls = 0;
      for (const ChoiceOutcome& c : o.choices) rec.tool_calls += c.tool_reply ? static_cast<int>(c.tool_reply->calls.size()) : 0;
      if (rec.status == 200) ctx_.metrics.count_tool_calls(rec.tool_calls);
    }
    rec.gen_tokens = usage.completion_tokens;
    rec.choices = static_cast<int>(o.choices.size());
    if (first.n_generated > 0) rec.ttft_ms = first.ttft_ms;
    if (r.n_generated > 1) rec.tokens_per_s = r.decode_tokens_per_s();
    const bool called = called_tools(last);
    const FinishReason finish = o.cancelled ? FinishReason::kCancelled : r.finish;  // (none ran: no result says it)
    rec.finish_reason = o.error ? (finish == FinishReason::kDeadline ? "deadline" : "error")
                                : (openai_finish_reason(finish, called) ? openai_finish_reason(finish, called)
                                                                        : finish_reason_name(finish));
    if (rec.status == 200) {
      ctx_.metrics.request_duration().observe(rec.total_ms / 1000.0);
      // The daemon's own time: neither waiting for the engine thread nor in an
      // Engine call (template, tokenize, generate).
      const double own_ms = rec.total_ms - rec.queue_ms - a.outcome.prep_ms - rec.engine_ms;
      ctx_.metrics.overhead().observe(std::max(0.0, own_ms) / 1000.0);
    }
  }
  ctx_.metrics.count_request(rec.endpoint, rec.status);
  log_request(rec);
  active_.reset();
  if (closed_) return;
  if (close_after_response_) {
    close();
    return;
  }
  dispatch_next();
  read_next();
  arm_idle_timer_if_idle();  // the read posted during the request now waits on an idle connection
}

// ---- writing ---------------------------------------------------------------

void Session::send(std::string bytes, bool ends_response) {
  if (closed_) return;
  unsent_bytes_ += bytes.size();
  segments_.push_back(Segment{std::move(bytes), ends_response});
  do_write();
}

void Session::do_write() {
  if (writing_ || closed_ || segments_.empty()) return;
  out_.clear();
  out_ends_response_ = false;
  while (!segments_.empty()) {  // coalesce what is queued, up to the end of a response
    Segment& s = segments_.front();
    out_ += s.bytes;
    const bool end = s.ends_response;
    segments_.pop_front();
    if (end) {
      out_ends_response_ = true;
      break;
    }
  }
  writing_ = true;
  write_timer_.expires_after(std::chrono::milliseconds(ctx_.config.idle_timeout_ms));
  write_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (ec || self->closed_ || !self->writing_ || self->write_timer_.expiry() > Clock::now()) return;
    // A client that stopped reading: its request is cancelled, the connection dropped.
    if (self->active_ && self->active_->job && !self->active_->done) {
      self->active_->job->request_cancel(CancelReason::kSlowReader);
    }
    self->close();
  });
  net::async_write(socket_, net::buffer(out_), beast::bind_front_handler(&Session::on_write, shared_from_this()));
}

void Session::on_write(beast::error_code ec, size_t) {
  writing_ = false;
  write_timer_.cancel();
  unsent_bytes_ -= std::min(unsent_bytes_, out_.size());
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  if (out_ends_response_) after_response();
  do_write();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  read_timer_.cancel();
  write_timer_.cancel();
  deadline_timer_.cancel();
  beast::error_code ec;
  socket_.shutdown(net::socket_base::shutdown_both, ec);
  socket_.close(ec);
  pending_.clear();
  segments_.clear();
  unsent_bytes_ = 0;
  if (!active_) return;
  if (!active_->done && active_->job) {
    // Cancelled within one decode step; on_job_finished logs the outcome.
    active_->job->request_cancel(CancelReason::kClientGone);
    return;
  }
  if (active_->done) {
    // Answered, but the answer could not be delivered.
    active_->record.cancel_reason = cancel_reason_name(CancelReason::kClientGone);
    active_->record.status = 499;
    after_response();
  }
}

}  // namespace minfer::daemon
