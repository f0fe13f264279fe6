#include "daemon/minferd/engine_worker.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "daemon/minferd/request_parse.h"
#include "platform/log.h"

namespace minfer::daemon {
namespace {

// "</tool_call>" of "\n</tool_call>": the stop that ends a reply at its first call.
std::string lstrip_newline(std::string_view s) { return std::string(s.substr(std::min(s.size(), s.find_first_not_of('\n')))); }

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// An engine error caused by the request is the client's (400); anything else is ours (500).
ApiError engine_error(const Error& e, const char* param) {
  if (e.code == ErrorCode::kInvalidArgument || e.code == ErrorCode::kOutOfRange) {
    return invalid_request(param, "invalid_value", e.message);
  }
  return server_error(500, "engine_error", e.message);
}

// A candidate's log-probability per generated token: best_of's rank (a
// candidate without tokens ranks last).
double per_token_logprob(const GenerationResult& r) {
  if (r.logprobs.empty()) return -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (const TokenLogprobs& t : r.logprobs) sum += t.chosen.logprob;
  return sum / static_cast<double>(r.logprobs.size());
}

// best_of: a prompt's n best candidates into the outcome, best first (ties
// in their order). What belongs to the prompt rather than a candidate — its
// scored tokens (echo), its reuse of earlier requests' KV, the request's time
// to the first token — goes with the first answered, as the first choice
// carries it; the others' generated tokens stay in the usage. Their tokens'
// log-probabilities were computed to rank them: kept only when asked for.
void keep_best(std::vector<ChoiceOutcome> pool, int n, bool logprobs_asked, JobOutcome& out) {
  std::vector<size_t> order(pool.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<double> score(pool.size());
  for (size_t i = 0; i < pool.size(); ++i) score[i] = per_token_logprob(pool[i].result);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  GenerationResult& first = pool.front().result;
  const int n_cached = first.n_cached;
  const double ttft_ms = first.ttft_ms;
  std::vector<TokenLogprobs> prompt_logprobs = std::move(first.prompt_logprobs);
  for (size_t k = static_cast<size_t>(n); k < order.size(); ++k) out.unanswered_tokens += pool[order[k]].result.n_generated;
  for (size_t k = 0; k < static_cast<size_t>(n); ++k) {
    GenerationResult& r = out.choices.emplace_back(std::move(pool[order[k]])).result;
    if (k == 0) {
      r.n_cached = n_cached;
      r.ttft_ms = ttft_ms;
      r.prompt_logprobs = std::move(prompt_logprobs);
    }
    if (!logprobs_asked) r.logprobs.clear();
  }
}

}  // namespace

EngineWorker::EngineWorker(const DaemonConfig& config, Metrics& metrics, std::chrono::milliseconds heartbeat_timeout,
                           Hooks hooks)
    : config_(config),
      metrics_(metrics),
      heartbeat_timeout_(heartbeat_timeout),
      // A few ticks per heartbeat timeout, so an idle engine never looks
      // stalled; at most 4 wake-ups a second.
      idle_tick_(std::clamp(heartbeat_timeout / 4, std::chrono::milliseconds(10), std::chrono::milliseconds(250))),
      hooks_(std::move(hooks)),
      queue_(static_cast<size_t>(config.queue_size)) {
  beat();
}

EngineWorker::~EngineWorker() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void EngineWorker::start() { thread_ = std::thread([this] { run(); }); }

void EngineWorker::beat() {
  heartbeat_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

HealthInputs EngineWorker::health_inputs() const {
  HealthInputs in;
  in.phase = phase_.load();
  Clock::time_point last{Clock::duration(heartbeat_ns_.load(std::memory_order_relaxed))};
  if (loaded_.load(std::memory_order_acquire)) {
    const EngineHealth h = engine_->health();
    in.engine_phase = h.phase;
    in.engine_reason = h.reason;
    last = std::max(last, h.last_step);  // the engine's own steps count too (a long prefill)
  }
  if (in.phase == DaemonPhase::kFailed) in.engine_reason = failure();
  in.heartbeat_age = Clock::now() - last;
  in.heartbeat_timeout = heartbeat_timeout_;
  return in;
}

std::string EngineWorker::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void EngineWorker::fail(std::string error) {
  {
    std::lock_guard lock(mutex_);
    failure_ = error;
  }
  phase_.store(DaemonPhase::kFailed);
  log::error("{}", error);
  if (hooks_.on_failed) hooks_.on_failed(error);
}

bool EngineWorker::load_and_warm_up() {
  EngineConfig ec;
  ec.model_path = config_.model;
  parse_backend_choice(config_.backend, &ec.backend);  // checked by the configuration parser
  ec.n_ctx = config_.ctx_size;
  ec.n_batch = config_.batch_size;
  ec.kv_type = config_.kv_type;
  ec.n_threads = config_.threads;
  config_.engine.apply_to(&ec);
  ec.apply_environment();
  if (hooks_.on_progress) hooks_.on_progress(fmt::format("loading model {}", config_.model));
  if (config_.debug_load_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(config_.debug_load_delay_ms));
  const auto t0 = Clock::now();
  auto loaded = Engine::load(ec);
  if (!loaded) {
    fail(fmt::format("cannot load model {}: {}", config_.model, loaded.error().message));
    return false;
  }
  engine_ = std::move(*loaded);
  info_ = engine_->info();
  limits_ = ModelLimits{info_.n_ctx, info_.vocab_size, info_.chat_template, engine_->chat_template().tool_style(),
                        info_.fill_in_middle};
  loaded_.store(true, std::memory_order_release);
  beat();
  log::info("loaded {} ({}, {} layers, n_ctx {}, {} KV cells) in {:.0f} ms on {} ({}){}", info_.name, info_.arch,
            info_.n_layers, info_.n_ctx, info_.kv_cells, ms_between(t0, Clock::now()), info_.backend, info_.backend_detail,
            info_.backend_reason.empty() ? "" : ": " + info_.backend_reason);

  // READY=1 promises a working engine: one short greedy generation must
  // produce tokens (with CUDA, Engine::load has captured its graphs already).
  phase_.store(DaemonPhase::kWarmingUp);
  if (hooks_.on_progress) hooks_.on_progress(fmt::format("warming up on {}", info_.backend));
  GenerationRequest warm;
  warm.prompt = engine_->tokenize("Hello", engine_->default_add_bos(), false);
  if (warm.prompt.empty()) warm.prompt.push_back(0);
  warm.max_tokens = 4;
  warm.sampling.temperature = 0.0f;
  warm.ignore_eos = true;
  const auto t1 = Clock::now();
  const GenerationResult r = engine_->generate(warm, nullptr, nullptr);
  beat();
  if (r.finish == FinishReason::kError || r.n_generated == 0) {
    fail(fmt::format("warm-up generation failed: {}", r.error ? r.error->message : "it produced no tokens"));
    return false;
  }
  log::info("warm-up generated {} tokens in {:.1f} ms", r.n_generated, ms_between(t1, Clock::now()));
  // Its prompt is no client's: the first request reuses nothing of it (its
  // usage would count the BOS as cached).
  engine_->forget_histories();
  phase_.store(DaemonPhase::kReady);
  if (hooks_.on_ready) hooks_.on_ready(info_);
  return true;
}

void EngineWorker::run() {
  if (load_and_warm_up()) {
    while (!stop_.load()) {
      std::shared_ptr<Job> job = queue_.pop_for(idle_tick_);
      beat();
      if (job) serve(job);
    }
  }
  // Whatever still waits gets its outcome.
  for (auto& job : queue_.take_all()) {
    job->request_cancel(CancelReason::kShutdown);
    finish_cancelled(job);
  }
  std::lock_guard lock(mutex_);
  thread_done_ = true;
  done_cv_.notify_all();
}

EngineWorker::Admit EngineWorker::submit(std::shared_ptr<Job> job) {
  switch (phase_.load()) {
    case DaemonPhase::kLoading:
    case DaemonPhase::kWarmingUp: return Admit::kNotReady;
    case DaemonPhase::kFailed: return Admit::kFailed;
    case DaemonPhase::kStopping: return Admit::kStopping;
    case DaemonPhase::kReady: break;
  }
  std::vector<std::shared_ptr<Job>> dropped;
  const bool queued = queue_.try_push(std::move(job), &dropped);
  for (auto& d : dropped) finish_cancelled(d);
  return queued ? Admit::kQueued : Admit::kFull;
}

void EngineWorker::stop_accepting() {
  if (phase_.load() == DaemonPhase::kReady) phase_.store(DaemonPhase::kStopping);
}

void EngineWorker::cancel_all(CancelReason reason) {
  for (auto& job : queue_.take_all()) {
    job->request_cancel(reason);
    finish_cancelled(job);
  }
  std::lock_guard lock(mutex_);
  if (running_) running_->request_cancel(reason);
}

void EngineWorker::stop() {
  stop_.store(true);
  queue_.close();
}

bool EngineWorker::join_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!thread_.joinable()) return true;
  if (!done_cv_.wait_for(lock, timeout, [&] { return thread_done_; })) return false;
  lock.unlock();
  thread_.join();
  return true;
}

bool EngineWorker::idle() const {
  std::lock_guard lock(mutex_);
  return running_ == nullptr && queue_.depth() == 0;
}

void EngineWorker::finish_cancelled(const std::shared_ptr<Job>& job) {
  JobOutcome out;
  out.cancelled = true;
  out.queue_ms = ms_between(job->received, Clock::now());
  job->sink->finished(std::move(out));
}

void EngineWorker::serve(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard lock(mutex_);
    running_ = job;
  }
  JobOutcome out;
  const auto now = Clock::now();
  out.queue_ms = ms_between(job->received, now);
  metrics_.queue_wait().observe(out.queue_ms / 1000.0);
  if (job->cancelled()) {
    out.cancelled = true;  // its client left while it waited
  } else if (now >= job->deadline) {
    out.error = server_error(504, "deadline_exceeded",
                             fmt::format("the request waited {:.0f} ms for the engine, past its deadline of {} ms",
                                         out.queue_ms, config_.request_timeout_ms));
  } else {
    switch (job->kind) {
      case JobKind::kGenerate: run_generation(*job, out); break;
      case JobKind::kTokenize: run_tokenize(*job, out); break;
      case JobKind::kDetokenize: run_detokenize(*job, out); break;
    }
  }
  {
    std::lock_guard lock(mutex_);
    running_.reset();
  }
  job->sink->finished(std::move(out));
}

void EngineWorker::run_tokenize(Job& job, JobOutcome& out) {
  const auto t0 = Clock::now();
  const TokenizeSpec& t = job.tokenize;
  out.tokens = engine_->tokenize(t.content, t.add_special && engine_->default_add_bos(), t.parse_special);
  if (t.with_pieces) {
    for (const int32_t id : out.tokens) {
      auto piece = engine_->detokenize({id});
      out.pieces.push_back(piece ? std::move(*piece) : std::string());
    }
  }
  out.engine_ms = ms_between(t0, Clock::now());
}

void EngineWorker::run_detokenize(Job& job, JobOutcome& out) {
  const auto t0 = Clock::now();
  auto text = engine_->detokenize(job.detokenize.tokens);
  out.engine_ms = ms_between(t0, Clock::now());
  if (!text) {
    out.error = engine_error(text.error(), "tokens");
    return;
  }
  out.content = std::move(*text);
}

void EngineWorker::run_generation(Job& job, JobOutcome& out) {
  const GenerationSpec& spec = job.generation;
  const auto t_prep = Clock::now();
  const ChatTemplate& chat = engine_->chat_template();
  // Every prompt is tokenized and checked before any is generated for: a bad
  // one is a 400 for the request, with no work spent.
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo_texts(static_cast<size_t>(spec.n_prompts()));
  if (spec.kind == ApiKind::kInfill) {
    // The context left for the prompt: all but n_predict's tokens, or but
    // one when it has no limit; the extra context is cut to fit it.
    const InfillInput& in = spec.infill;
    auto infill = engine_->infill_prompt(in.prefix, in.suffix, in.prompt, in.extra,
                                         limits_.n_ctx - spec.max_tokens.value_or(1));
    if (!infill) {
      out.error = engine_error(infill.error(), "input_suffix");  // the parser's param for a model without FIM
      return;
    }
    out.prompt_truncated = infill->n_extra_dropped > 0;
    prompts.push_back(std::move(infill->tokens));
  } else if (spec.kind == ApiKind::kChat) {
    auto rendered = engine_->apply_chat_template(spec.messages, true, spec.tools, spec.enable_thinking);
    if (!rendered) {
      out.error = engine_error(rendered.error(), "messages");
      return;
    }
    // A forced call: the assistant's turn opens with a call, whose JSON the
    // model writes under tool_call_schema.
    if (spec.forced_tool_call()) *rendered += chat.tool_call_opener();
    // The template writes control tokens as text: parse them as tokens.
    prompts.push_back(engine_->tokenize(*rendered, engine_->default_add_bos(), true));
  } else {
    for (size_t p = 0; p < spec.prompts.size(); ++p) {
      const CompletionPrompt& cp = spec.prompts[p];
      // Token prompts are taken exactly as given.
      if (!spec.suffix) {
        prompts.push_back(cp.is_tokens ? cp.tokens : engine_->tokenize(cp.text, engine_->default_add_bos(), false));
      } else {
        auto fim = engine_->fill_in_middle_prompt(cp.is_tokens ? cp.tokens : engine_->tokenize(cp.text, false, false),
                                                  *spec.suffix);
        if (!fim) {
          out.error = engine_error(fim.error(), "suffix");
          return;
        }
        prompts.push_back(std::move(*fim));
      }
      if (!spec.echo) continue;
      // The prompt as the client wrote it; token prompts as their text.
      if (!cp.is_tokens) {
        echo_texts[p] = cp.text;
      } else if (auto text = engine_->detokenize(cp.tokens)) {  // ids checked by the parser
        echo_texts[p] = std::move(*text);
      }
    }
  }
  std::vector<GenerationRequest> requests(prompts.size());
  int n_prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    GenerationRequest& req = requests[p];
    if (auto e = make_generation_request(spec, std::move(prompts[p]), limits_, job.seed, &req)) {
      if (prompts.size() > 1) e->message = fmt::format("prompt {} of {}: {}", p, prompts.size(), e->message);
      out.error = std::move(*e);
      return;
    }
    req.deadline = job.deadline;
    req.reply_starts_text = spec.kind == ApiKind::kChat;
    if (spec.forced_tool_call()) {
      req.json_schema = spec.tool_call_schema;
    } else if (spec.tool_call_schema) {
      req.tool_call_schema = spec.tool_call_schema;
      req.tool_call_style = chat.tool_style();
    }
    if (!spec.forced_tool_call() && !spec.tools.empty() && !spec.parallel_tool_calls &&
        !chat.tool_call_closer().empty()) {
      req.stop.emplace_back(lstrip_newline(chat.tool_call_closer()));  // "</tool_call>": one call at most
    }
    n_prompt_tokens += static_cast<int>(req.prompt.size());
  }
  out.prep_ms = ms_between(t_prep, Clock::now());
  metrics_.count_prompt_tokens(n_prompt_tokens);
  job.sink->started(n_prompt_tokens);

  // Each prompt's n choices, one after another (choice index p * n + i).
  // Choice i is sampled with the seed + i; each after a prompt's first
  // reuses the prompt's KV that the one before it kept (the prefix cache),
  // and an echoed prompt is scored once, by its first choice. best_of: its
  // candidates so, their tokens scored, then the best n (keep_best).
  const int n_choices = static_cast<int>(requests.size()) * spec.n;
  const int candidates = std::max(spec.n, spec.best_of);
  const bool choose = candidates > spec.n;
  out.choices.reserve(static_cast<size_t>(n_choices));
  for (size_t p = 0; p < requests.size(); ++p) {
    GenerationRequest& req = requests[p];
    const uint64_t seed = req.sampling.seed;
    if (choose) req.top_logprobs = std::max(req.top_logprobs, 0);
    std::vector<ChoiceOutcome> pool;
    pool.reserve(choose ? static_cast<size_t>(candidates) : 0);
    for (int i = 0; i < candidates; ++i) {
      req.sampling.seed = seed + static_cast<uint64_t>(i);
      if (i > 0) req.prompt_logprobs = false;
      const int choice = static_cast<int>(out.choices.size() + pool.size());
      ChoiceOutcome& c = choose ? pool.emplace_back() : out.choices.emplace_back();
      c.echo_text = echo_texts[p];
      run_choice(job, req, choice, out, c);
      // As usage counts them: a prompt's reuse of earlier requests' KV, once.
      if (i == 0) metrics_.count_cached_prompt_tokens(c.result.n_cached);
      if (out.error || out.cancelled) return;
      // A stream's choice ends here unless it is the last, which ends with
      // the outcome.
      if (spec.stream && choice + 1 < n_choices) job.sink->choice_finished(choice, c);
    }
    if (choose) keep_best(std::move(pool), spec.n, spec.top_logprobs >= 0, out);
  }
}

void EngineWorker::run_choice(Job& job, const GenerationRequest& req, int choice, JobOutcome& out, ChoiceOutcome& c) {
  const GenerationSpec& spec = job.generation;
  const ChatTemplate& chat = engine_->chat_template();
  // The engine calls back once per token and, when text was still held back
  // at the end (a partial character or stop string), once more with that
  // tail. Only the result tells which, so each call's token is counted when
  // the next call comes, and the last one from the result.
  Clock::time_point last{};
  int calls = 0;
  std::optional<double> pending_latency_s;
  auto account_previous = [&] {
    metrics_.count_generated_token();
    if (pending_latency_s) metrics_.token_latency().observe(*pending_latency_s);
  };
  const bool stream = spec.stream;
  int n_generated = 0;  // tokens so far (a tail event carries none)
  std::vector<TokenLogprobs> unsent_logprobs;  // streamed with the next piece of text
  // A chat reply is taken apart (a thinking model's reasoning, tool calls):
  // the parts stream as they come, and the outcome keeps them apart.
  ReplyParser parser({.reasoning = spec.kind == ApiKind::kChat && spec.split_reasoning && chat.thinks(),
                      .tools = spec.tools.empty() ? ToolStyle::kNone : chat.tool_style(),
                      .forced_call = spec.forced_tool_call()});
  if (parser.active()) c.tool_reply.emplace();
  auto deliver = [&](std::vector<ReplyParser::Event> events) {
    for (ReplyParser::Event& e : events) {
      switch (e.kind) {
        case ReplyParser::Event::Kind::kText:
          if (stream) job.sink->text(choice, e.text, n_generated, std::exchange(unsent_logprobs, {}));
          c.tool_reply->content += e.text;
          break;
        case ReplyParser::Event::Kind::kReasoning:
          c.reasoning += e.text;
          if (stream) job.sink->reasoning(choice, std::move(e.text));
          break;
        case ReplyParser::Event::Kind::kCall:
          if (stream) job.sink->tool_call(choice, static_cast<int>(c.tool_reply->calls.size()), *e.call);
          c.tool_reply->calls.push_back(std::move(*e.call));
          break;
      }
    }
  };
  // The time to the first token is the request's: its first choice's.
  std::optional<double> ttft_ms;
  auto on_token = [&](const TokenEvent& ev) {
    const auto now = Clock::now();
    beat();
    if (calls == 0) {
      if (choice == 0) {
        ttft_ms = ms_between(job.received, now);  // from receipt: what the client waits
        metrics_.ttft().observe(*ttft_ms / 1000.0);
      }
    } else {
      account_previous();
      pending_latency_s = std::chrono::duration<double>(now - last).count();
    }
    ++calls;
    if (!ev.tail) ++n_generated;
    last = now;
    on_generated_token();
    if (stream && ev.logprobs) unsent_logprobs.push_back(*ev.logprobs);
    if (parser.active()) {
      deliver(parser.feed(ev.text));
    } else if (stream && !ev.text.empty()) {
      job.sink->text(choice, ev.text, n_generated, std::exchange(unsent_logprobs, {}));
    }
    return !job.cancelled();
  };
  const auto t_gen = Clock::now();
  GenerationResult r = engine_->generate(req, on_token, &job.cancel);
  out.engine_ms += ms_between(t_gen, Clock::now());
  if (parser.active()) {
    // A reply that stopped where a call closes (a forced call's JSON done,
    // or the stop at "</tool_call>") ends inside that call.
    deliver(parser.finish(r.finish == FinishReason::kStop && (spec.forced_tool_call() || !spec.parallel_tool_calls)));
  }
  if (calls > 0 && calls == r.n_generated) account_previous();  // the last call was a token, not a tail
  r.ttft_ms = ttft_ms.value_or(0);  // the session reports the first choice's
  c.result = std::move(r);
  if (c.result.n_generated > 1) metrics_.set_decode_rate(c.result.decode_tokens_per_s());
  switch (c.result.finish) {
    case FinishReason::kError:
      out.error = engine_error(c.result.error.value_or(Error(ErrorCode::kInternal, "unknown engine error")),
                               prompt_param(spec.kind));
      break;
    case FinishReason::kDeadline:
      out.error = server_error(504, "deadline_exceeded",
                               fmt::format("the request passed its deadline of {} ms after {} generated tokens",
                                           config_.request_timeout_ms, c.result.n_generated));
      break;
    case FinishReason::kCancelled: out.cancelled = true; break;
    case FinishReason::kLength:
    case FinishReason::kStop:
    case FinishReason::kEos: break;
  }
}

void EngineWorker::on_generated_token() {
  ++tokens_generated_;
  if (config_.debug_token_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.debug_token_delay_ms));  // test hook: a slow model
    beat();
  }
  const int stall_after = config_.debug_stall_engine_after_tokens;
  if (stall_after <= 0 || tokens_generated_ < static_cast<uint64_t>(stall_after)) return;
  // Test hook: behave like a hung GPU. The heartbeat stops, /health turns
  // 503 and the watchdog pings stop, which is what the tests prove.
  log::warn("debug-stall-engine-after-tokens={}: the engine thread now hangs (test hook)", stall_after);
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace minfer::daemon
