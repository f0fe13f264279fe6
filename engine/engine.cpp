// Engine: composes the parts (GGUF file, config, weights, tokenizer, chat
// template, backend, runner, sampler) and runs generations. It holds no
// model logic of its own.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "engine/api.h"
#include "engine/backend/backend_select.h"
#include "engine/common/read_file.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/scheduler/prefix_cache.h"
#include "engine/scheduler/runner.h"
#include "engine/scheduler/host_pick.h"
#include "engine/scheduler/line_limits.h"
#include "engine/scheduler/stop_matcher.h"
#include "engine/tokenizer/tokenizer.h"
#include "platform/log.h"

#ifdef MINFER_HAVE_CUDA_BACKEND
#include "engine/backend/cuda/cuda_util.h"
#endif

namespace minfer {

const char* backend_choice_name(BackendChoice b) {
  switch (b) {
    case BackendChoice::kAuto: return "auto";
    case BackendChoice::kCpu: return "cpu";
    case BackendChoice::kCuda: return "cuda";
  }
  return "?";
}

bool parse_backend_choice(std::string_view s, BackendChoice* out) {
  if (s == "auto") *out = BackendChoice::kAuto;
  else if (s == "cpu") *out = BackendChoice::kCpu;
  else if (s == "cuda") *out = BackendChoice::kCuda;
  else return false;
  return true;
}

const char* engine_phase_name(EnginePhase p) {
  switch (p) {
    case EnginePhase::kLoading: return "loading";
    case EnginePhase::kReady: return "ready";
    case EnginePhase::kWedged: return "wedged";
    case EnginePhase::kFailed: return "failed";
  }
  return "?";
}

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kEos: return "stop";  // OpenAI reports EOS as "stop"
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "?";
}

double GenerationResult::prefill_tokens_per_s() const {
  return prefill_ms > 0 ? (n_prompt - n_cached) / (prefill_ms / 1000.0) : 0.0;
}
double GenerationResult::decode_tokens_per_s() const {
  // The first token comes from the prefill; decode produced the rest.
  return decode_ms > 0 && n_generated > 1 ? (n_generated - 1) / (decode_ms / 1000.0) : 0.0;
}

void EngineConfig::apply_environment() {
  auto flag = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  };
  if (flag("MINFER_NO_FUSE_QKV")) fuse_qkv = false;
  if (flag("MINFER_NO_FUSE_FFN")) fuse_ffn = false;
  if (flag("MINFER_NO_FA_PREFILL")) fa_prefill = false;
  if (flag("MINFER_NO_FUSED_GEMM")) fused_gemm = false;
  if (flag("MINFER_NO_CUDA_GRAPH")) cuda_graphs = false;
  if (flag("MINFER_NO_LOOKAHEAD")) lookahead = 0;
  if (flag("MINFER_NO_DRAW_IN_STEP")) draw_in_step = false;
  if (flag("MINFER_NO_LOGPROBS_IN_STEP")) logprobs_in_step = false;
  if (flag("MINFER_CONSTRAINED_LOOKAHEAD")) constrained_lookahead = true;
  if (flag("MINFER_NO_CONSTRAINED_CANDIDATES")) constrained_candidates = 0;
  if (const char* v = std::getenv("MINFER_CACHE_TYPE"); v != nullptr && *v != '\0') kv_type = v;
  if (const char* v = std::getenv("MINFER_TRACE"); v != nullptr && *v != '\0') trace_path = v;
  if (const char* v = std::getenv("MINFER_SCORE_ROWS"); v != nullptr && *v != '\0') {
    score_rows = std::atoi(v);  // not a positive number: refused at load
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// The speed switches a configuration or the environment turned off, by
// their option names (minferd --cuda-graphs ..., engine_switches.h), or "".
std::string switches_off(const EngineConfig& c) {
  const EngineConfig d;
  std::string off;
  auto add = [&off](bool is_off, const char* name) {
    if (is_off) off += (off.empty() ? "" : ", ") + std::string(name);
  };
  add(d.cuda_graphs && !c.cuda_graphs, "cuda-graphs");
  add(d.fuse_qkv && !c.fuse_qkv, "fuse-qkv");
  add(d.fuse_ffn && !c.fuse_ffn, "fuse-ffn");
  add(d.fa_prefill && !c.fa_prefill, "fa-prefill");
  add(d.fused_gemm && !c.fused_gemm, "fused-gemm");
  add(d.lookahead != 0 && c.lookahead == 0, "lookahead");
  add(d.draw_in_step && !c.draw_in_step, "draw-in-step");
  add(d.logprobs_in_step && !c.logprobs_in_step, "logprobs-in-step");
  add(d.constrained_candidates != 0 && c.constrained_candidates == 0, "constrained-candidates");
  add(d.prefix_cache && !c.prefix_cache, "prefix-cache");
  return off;
}

std::string describe_weight_types(const ModelWeights& w) {
  std::map<std::string, int> counts;
  for (const Weight* m : w.matrices()) ++counts[std::string(dtype_name(m->type))];
  std::string out;
  for (const auto& [name, n] : counts) out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", name, n);
  return out;
}

}  // namespace

class EngineImpl {
 public:
  EngineConfig config;
  std::unique_ptr<gguf::File> file;
  ModelConfig model;
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Runner> runner;
  // The running request's history; it joins the prefix cache when the
  // request ends (retire_history()).
  Sequence seq;
  // Earlier requests' histories kept in the cache for prefix reuse
  // (EngineConfig::prefix_cache_entries); destroyed before the runner.
  std::unique_ptr<PrefixCache> prefix;
  ModelInfo info;
  mutable std::mutex health_mutex;
  EngineHealth health;
  std::unique_ptr<TraceWriter> trace;
  // Each token's bytes (control tokens: none), for constrained output; built
  // by the first request that constrains.
  std::vector<std::string> token_text;

  // After a failed step: a backend that can no longer run marks the engine
  // wedged (health, and through it the daemon's /health and watchdog).
  void check_wedged() {
    const std::string why = backend->wedged_reason();
    if (why.empty()) return;
    std::lock_guard lock(health_mutex);
    if (health.phase == EnginePhase::kWedged) return;
    health.phase = EnginePhase::kWedged;
    health.reason = why;
    health.since = std::chrono::system_clock::now();
  }

  // The last request's history goes to the prefix cache (where it is on),
  // and `seq` is empty for the next.
  void retire_history() {
    if (config.prefix_cache) prefix->keep(seq);
    runner->cells().truncate(seq, 0);
    std::lock_guard lock(health_mutex);
    health.kv_cells = runner->cells().n_cells();
    health.kv_cells_kept = runner->cells().n_cells() - runner->cells().n_free();
    health.prefix_histories = prefix->n_entries();
  }

  void record_step() {
    std::lock_guard lock(health_mutex);
    health.last_step = Clock::now();
    ++health.steps;
  }

  GenerationResult generate(const GenerationRequest& req, const TokenCallback& on_token,
                            const std::atomic<bool>* cancel);
  Status validate(const GenerationRequest& req) const;

  // Decode steps a request keeps ahead of the host (EngineConfig::lookahead):
  // 0, each step submitted once its token is handled; 1, before (the step
  // runs while the host streams the token); 2, where steps pick their tokens
  // (greedy, or drawn in the step), the step after it too, fed with the
  // token picked on the device.
  int decode_ahead(bool picked_in_step) const {
    const bool overlap = config.lookahead > 0 || (config.lookahead < 0 && backend->overlaps_steps());
    if (!overlap) return 0;
    return std::min(picked_in_step ? 2 : 1, backend->max_in_flight());
  }
};

static_assert(kMaxTopLogprobs <= kernels::kLogprobsTop, "a step lists as many as a request may ask for");

Status EngineImpl::validate(const GenerationRequest& req) const {
  if (req.prompt.empty()) return unexpected(ErrorCode::kInvalidArgument, "the prompt is empty");
  if (static_cast<int>(req.prompt.size()) >= runner->n_ctx()) {
    return unexpected(ErrorCode::kOutOfRange,
                      fmt::format("prompt has {} tokens but the context holds {} (one more is needed to generate)",
                                  req.prompt.size(), runner->n_ctx()));
  }
  for (size_t i = 0; i < req.prompt.size(); ++i) {
    if (req.prompt[i] < 0 || req.prompt[i] >= model.vocab_size) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("prompt token {} at index {} is outside the vocabulary [0, {})", req.prompt[i], i,
                                    model.vocab_size));
    }
  }
  if (req.max_tokens < (req.prompt_logprobs ? 0 : 1)) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("max_tokens is {}; it must be at least {}", req.max_tokens, req.prompt_logprobs ? 0 : 1));
  }
  if (req.prompt_logprobs && req.top_logprobs < 0) {
    return unexpected(ErrorCode::kInvalidArgument, "prompt_logprobs needs top_logprobs of 0 or more");
  }
  if (req.prompt_logprobs_from != 0 &&
      (!req.prompt_logprobs || req.prompt_logprobs_from < 0 || static_cast<size_t>(req.prompt_logprobs_from) > req.prompt.size())) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("prompt_logprobs_from is {}; it needs prompt_logprobs and must be in [0, {}] (the "
                                  "prompt's tokens)",
                                  req.prompt_logprobs_from, req.prompt.size()));
  }
  if ((req.json_object ? 1 : 0) + (req.json_schema ? 1 : 0) + (req.tool_call_schema ? 1 : 0) > 1) {
    return unexpected(ErrorCode::kInvalidArgument,
                      "json_object, json_schema and tool_call_schema are three output formats; pick one");
  }
  if (req.tool_call_schema && req.tool_call_style == ToolStyle::kNone) {
    return unexpected(ErrorCode::kInvalidArgument, "tool_call_schema needs the tool_call_style its calls are written in");
  }
  if (req.min_indent < 0 || req.max_predict_ms < 0) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("min_indent is {} and max_predict_ms {}; each must be 0 (off) or more", req.min_indent,
                                  req.max_predict_ms));
  }
  if (req.top_logprobs < -1 || req.top_logprobs > kMaxTopLogprobs) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("top_logprobs is {}; allowed -1 (none) to {}", req.top_logprobs, kMaxTopLogprobs));
  }
  return req.sampling.validate(model.vocab_size);
}

GenerationResult EngineImpl::generate(const GenerationRequest& req, const TokenCallback& on_token,
                                      const std::atomic<bool>* cancel) {
  GenerationResult r;
  r.n_prompt = static_cast<int>(req.prompt.size());
  retire_history();
  auto fail = [&](Error e) {
    r.finish = FinishReason::kError;
    r.error = std::move(e);
    (void)runner->drain(seq);          // steps still in flight: wait, and keep nothing of them
    runner->cells().truncate(seq, 0);  // the cache may be half-written: forget it
    check_wedged();
    return r;
  };
  if (Status st = validate(req); !st) return fail(st.error());

  const auto t0 = Clock::now();
  // Reuse a kept history's KV for the longest common prefix; at least the
  // last prompt token is evaluated again so that its logits exist.
  size_t common = 0;
  if (config.prefix_cache && !req.prompt_logprobs) {  // scoring reads every prompt position's logits
    common = static_cast<size_t>(prefix->reuse(seq, req.prompt, req.prompt.size() - 1));
  }
  r.n_cached = static_cast<int>(common);

  // Log-probabilities and JSON mode need the step's logits on the host,
  // which then picks the token too (host_pick.h).
  const bool want_logprobs = req.top_logprobs >= 0;
  const bool constrained = req.json_object || req.json_schema != nullptr || req.tool_call_schema != nullptr;
  if (constrained && token_text.empty()) token_text = token_texts(*tokenizer);
  HostPick host(req, *tokenizer, token_text, model.vocab_size);
  const bool device_argmax = req.sampling.plain_greedy() && !want_logprobs && !constrained;
  // A greedy constrained request's decode steps may take their argmax too,
  // checked by the constraint (EngineConfig::constrained_lookahead), where
  // steps run ahead (what it is for; otherwise a refusal only costs a step);
  // its first token, from the prefill's logits, is the host's.
  const bool checked_argmax = config.constrained_lookahead && constrained && !want_logprobs &&
                              req.sampling.plain_greedy() && decode_ahead(true) > 0;
  // A greedy constrained request's decode steps list their best candidates
  // (EngineConfig::constrained_candidates; Op::kLogprobs), and the host
  // takes the first the constraint allows: a few hundred bytes a step come
  // back, the logits only when it allows none of them.
  const bool list_steps = config.constrained_candidates > 0 ||
                          (config.constrained_candidates < 0 && backend->overlaps_steps());
  const bool listed = constrained && list_steps && req.sampling.plain_greedy() && backend->supports(Op::kLogprobs) &&
                      (!want_logprobs || config.logprobs_in_step);
  // A sampled request's decode steps draw their tokens themselves where they
  // can; the first token, from the prefill's logits, is the host's (the same
  // draw: the generator's numbers are taken in token order either way).
  const bool can_draw =
      config.draw_in_step && backend->supports(Op::kSample) && req.sampling.drawn_in_step(model.vocab_size);
  // A request for log-probabilities whose steps can pick its tokens (greedy,
  // or drawn) has them computed in those steps too; the first token's come
  // from the prefill's logits, on the host.
  const bool logprobs_in_step = want_logprobs && !constrained && config.logprobs_in_step &&
                                backend->supports(Op::kLogprobs) && (req.sampling.plain_greedy() || can_draw);
  StepOutput out;
  std::span<const int32_t> pending(req.prompt.data() + common, req.prompt.size() - common);
  // Heartbeat, cancellation and deadline after every prefill chunk: a long
  // prompt on a slow device neither looks stalled nor outlives its client.
  std::optional<PromptScorer> scorer;
  // A scored prompt's steps score their rows themselves (Logits::kScore, on
  // the device with CUDA) where log-probabilities are computed in the steps;
  // otherwise every row's logits come back and the host scores them.
  const bool score_in_step = req.prompt_logprobs && config.logprobs_in_step && backend->supports(Op::kLogprobs);
  if (req.prompt_logprobs) scorer.emplace(req, *tokenizer, model.vocab_size, &r.prompt_logprobs, score_in_step);
  const auto after_chunk = [&]() -> Status {
    record_step();
    if (scorer && score_in_step) MINFER_TRY(scorer->add_scored_rows(out.row_logprobs));
    if (scorer && !score_in_step) scorer->add_rows(out.logits);
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      return unexpected(ErrorCode::kCancelled, "cancelled during prefill");
    }
    if (req.deadline && Clock::now() >= *req.deadline) {
      return unexpected(ErrorCode::kTimeout, "deadline passed during prefill");
    }
    return ok_status();
  };
  // Scoring reads every row's logits: score_rows at a time (64 rows × the
  // vocabulary by default, 39 MB for Qwen's 151,936), not --batch-size rows,
  // on the device (and in pinned host memory where the host scores them) —
  // in steps of at most that many tokens, unless the backend's steps score
  // their rows in slices of it (CUDA).
  const Logits prefill_logits =
      !req.prompt_logprobs ? Logits::kLast : (score_in_step ? Logits::kScore : Logits::kAll);
  const int step_tokens =
      !req.prompt_logprobs || (score_in_step && backend->scores_in_slices()) ? 0 : config.score_rows;
  // The rows of context before the scored tokens (prompt_logprobs_from)
  // predict nothing asked for: the steps that score their rows skip them
  // (no head, no scores); the host skips them in copied logits.
  const int score_from = prefill_logits == Logits::kScore ? scorer->context() : 0;
  if (Status st = runner->eval(seq, pending, prefill_logits, device_argmax, &out, after_chunk, step_tokens, score_from);
      !st) {
    if (st.error().code == ErrorCode::kCancelled || st.error().code == ErrorCode::kTimeout) {
      // The chunks evaluated so far stay in the cache for the next request.
      r.finish = st.error().code == ErrorCode::kCancelled ? FinishReason::kCancelled : FinishReason::kDeadline;
      r.prefill_ms = ms_since(t0);
      return r;
    }
    return fail(st.error());
  }
  r.prefill_ms = ms_since(t0);
  if (req.prompt_logprobs) {
    // The last row is the next token's, as a Logits::kLast prefill gives it.
    out.logits.erase(out.logits.begin(), out.logits.end() - model.vocab_size);
    if (req.max_tokens == 0) {
      r.finish = FinishReason::kLength;
      return r;
    }
  }

  const bool draw_in_step = !device_argmax && (!want_logprobs || logprobs_in_step) && !constrained && can_draw;
  const bool step_argmax = device_argmax || checked_argmax || (logprobs_in_step && req.sampling.plain_greedy());
  const bool picked = step_argmax || draw_in_step;
  kernels::DrawArgs draw;  // read by submit() only (a backend stages it with the step)
  std::vector<int32_t> history(req.prompt.begin(), req.prompt.end());
  // A step for token t (nullopt: the one the step before picks); the tokens
  // before it are the history less its last `unseen` ones, then `then`.
  const auto submit = [&](std::optional<int32_t> t, size_t unseen, std::span<const int32_t> then) {
    if (draw_in_step) draw = host.sampler().step_draw(std::span<const int32_t>(history).first(history.size() - unseen), then);
    return runner->submit_decode(seq, t, step_argmax || listed, draw_in_step ? &draw : nullptr,
                                 logprobs_in_step || listed);
  };
  StreamDecoder decoder(*tokenizer);
  if (!req.reply_starts_text) decoder.follow(req.prompt);
  StopMatcher stops(req.stop);
  LineLimits lines(req.min_indent, req.max_predict_ms);
  const int ahead = decode_ahead(picked);
  // The step that evaluates the k-th generated token runs only if that token
  // is not the last one the request may have.
  const auto can_step = [&](int k) {
    return k < req.max_tokens && static_cast<int>(seq.cells.size()) + 1 < runner->n_ctx();
  };
  const auto pick_on_host = [&] { return host.pick(out.logits.data(), history); };
  // A listed step's pick; where its list does not settle it, its logits are
  // copied and the host picks from them.
  const auto pick_from_list = [&]() -> Expected<int32_t> {
    if (!out.logprobs) return unexpected(ErrorCode::kInternal, "a decode step listed no candidates");
    const int32_t t = host.pick_listed(*out.logprobs);
    if (t != HostPick::kNotListed) return t;
    ++r.n_logits_fetched;
    MINFER_TRY(runner->fetch_logits(&out));
    return pick_on_host();
  };
  const auto t_decode = Clock::now();
  const auto no_token = [&] {
    return Error(ErrorCode::kUnsupported,
                 fmt::format("constrained output: no token of the vocabulary continues it after {} tokens", r.n_generated));
  };
  int32_t token = device_argmax ? out.argmax.at(0) : pick_on_host();
  if (token < 0) return fail(no_token());
  for (;;) {
    const bool eos = !req.ignore_eos && tokenizer->is_end_of_generation(token);
    if (!eos && ahead > 0) {
      // The device takes the next steps before the host hands this token
      // out; a request that ends early drops them (drain, below).
      // `token` is not in the history yet.
      if (runner->in_flight() == 0 && can_step(r.n_generated + 1)) {
        if (Status st = submit(token, 0, {}); !st) return fail(st.error());
      }
      if (ahead > 1 && runner->in_flight() == 1 && can_step(r.n_generated + 2)) {
        if (Status st = submit(std::nullopt, 0, std::span<const int32_t>(&token, 1)); !st) return fail(st.error());
      }
    }
    if (eos) {
      r.finish = FinishReason::kEos;
      break;
    }
    r.tokens.push_back(token);
    history.push_back(token);
    ++r.n_generated;
    TokenEvent ev;
    ev.token = token;
    if (auto lp = host.take_logprobs()) {
      r.logprobs.push_back(*lp);
      ev.logprobs = std::move(lp);
    }
    // The line limits see the text first: a line they cut ends it before any
    // later stop string, and what the stop matcher holds back then is output.
    ev.text = stops.push(lines.push(decoder.push(token), ms_since(t_decode)));
    if (lines.stopped()) ev.text += stops.flush();
    r.text += ev.text;
    if (r.n_generated == 1) r.ttft_ms = ms_since(t0);
    const bool keep_going = !on_token || on_token(ev);
    if (stops.stopped() || host.complete()) {
      r.finish = FinishReason::kStop;
      r.stop_string = stops.matched();
      break;
    }
    if (lines.stopped()) {
      r.finish = FinishReason::kLength;
      break;
    }
    if (!keep_going || (cancel != nullptr && cancel->load(std::memory_order_relaxed))) {
      r.finish = FinishReason::kCancelled;
      break;
    }
    if (req.deadline && Clock::now() >= *req.deadline) {
      r.finish = FinishReason::kDeadline;
      break;
    }
    if (ahead == 0 && can_step(r.n_generated)) {
      if (Status st = submit(token, 1, {}); !st) return fail(st.error());  // `token` is the history's last
    }
    if (runner->in_flight() == 0) {  // no step evaluates this token: it was the last
      r.finish = FinishReason::kLength;
      break;
    }
    if (Status st = runner->collect_decode(seq, &out); !st) return fail(st.error());
    record_step();
    if (picked) {
      token = out.argmax.at(0);
    } else if (listed) {
      auto t = pick_from_list();
      if (!t) return fail(t.error());
      token = *t;
    } else {
      token = pick_on_host();
    }
    if (logprobs_in_step) {
      if (!out.logprobs) return fail(Error(ErrorCode::kInternal, "a decode step returned no log-probabilities"));
      host.took_step_logprobs(*out.logprobs);
    }
    if (checked_argmax && !host.take(token)) {
      // Refused: the steps fed with it are dropped, and the step that chose
      // it runs again (the same token, position and graph as a host-picked
      // request's) for the logits the host picks from.
      ++r.n_repicked;
      if (Status st = runner->drain(seq); !st) return fail(st.error());
      // Its list may hold the token the host would pick.
      token = listed && out.logprobs ? host.pick_listed(*out.logprobs) : HostPick::kNotListed;
      if (token == HostPick::kNotListed) {
        const int32_t last = seq.tokens.back();
        runner->cells().truncate(seq, seq.n_past() - 1);
        if (Status st = runner->submit_decode(seq, last, false); !st) return fail(st.error());
        if (Status st = runner->collect_decode(seq, &out); !st) return fail(st.error());
        record_step();
        token = pick_on_host();
      }
    }
    if (token < 0) return fail(no_token());
  }
  r.decode_ms = ms_since(t_decode);
  if (Status st = runner->drain(seq); !st) return fail(st.error());
  // Text still held back (a partial character, a partial stop string) belongs
  // to the output when generation ended for another reason; the line limits
  // still judge it (none of it follows a line they cut).
  if (r.finish != FinishReason::kStop) {
    std::string tail = stops.push(lines.push(decoder.flush(), r.decode_ms));
    tail += stops.flush();
    if (!tail.empty()) {
      r.text += tail;
      if (on_token) on_token(TokenEvent{r.tokens.empty() ? 0 : r.tokens.back(), tail, true});
    }
  }
  return r;
}

Expected<double> measure_device_copy_bandwidth_gbps() {
#ifdef MINFER_HAVE_CUDA_BACKEND
  return cuda::measure_copy_bandwidth_gbps();
#else
  return unexpected(ErrorCode::kUnsupported, "this build has no CUDA backend");
#endif
}

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Expected<std::unique_ptr<Engine>> Engine::load(const EngineConfig& config) {
  auto impl = std::make_unique<EngineImpl>();
  impl->config = config;
  {
    std::lock_guard lock(impl->health_mutex);
    impl->health.phase = EnginePhase::kLoading;
    impl->health.since = std::chrono::system_clock::now();
  }
  using Clock = std::chrono::steady_clock;
  const auto t_file = Clock::now();
  MINFER_ASSIGN_OR_RETURN(impl->file, gguf::File::open(config.model_path));
  const gguf::File& f = *impl->file;
  MINFER_ASSIGN_OR_RETURN(impl->model, ModelConfig::from_gguf(f));
  MINFER_ASSIGN_OR_RETURN(impl->weights, ModelWeights::from_gguf(f, impl->model));
  MINFER_ASSIGN_OR_RETURN(impl->tokenizer, Tokenizer::from_gguf(f));
  if (config.chat_template_file.empty()) {
    impl->chat = ChatTemplate::from_gguf(f);
  } else {
    auto text = read_file(config.chat_template_file);
    if (!text) return unexpected(text.error().code, "chat template file: " + text.error().message);
    if (text->empty())
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("chat template file {} is empty", config.chat_template_file));
    impl->chat = ChatTemplate::from_gguf(f, *text);
    log::info("chat template from {}: {}", config.chat_template_file, impl->chat->name());
  }
  const ModelConfig& m = impl->model;
  const double file_ms = ms_since(t_file);

  const std::optional<DType> kv_type = dtype_from_name(config.kv_type);
  if (!kv_type || (*kv_type != DType::kF16 && *kv_type != DType::kF32)) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("KV cache type '{}' is not supported; use f16 or f32", config.kv_type));
  }
  if (config.n_ctx < 0 || config.n_batch <= 0) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("n_ctx {} must be >= 0 and n_batch {} > 0", config.n_ctx, config.n_batch));
  }
  if (config.prefix_cache_entries < 1 || config.prefix_cache_entries > kMaxPrefixCacheEntries) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("prefix_cache_entries {} must be in [1, {}]", config.prefix_cache_entries,
                                  kMaxPrefixCacheEntries));
  }
  if (config.score_rows <= 0) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("score_rows {} (MINFER_SCORE_ROWS) must be > 0", config.score_rows));
  }
  if (!std::isfinite(config.step_timeout_ms) || config.step_timeout_ms <= 0 ||
      !std::isfinite(config.step_timeout_per_token_ms) || config.step_timeout_per_token_ms < 0) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("step deadline {} ms + {} ms a token: the base must be positive and the per-token "
                                  "part zero or positive",
                                  config.step_timeout_ms, config.step_timeout_per_token_ms));
  }
  if (std::string off = switches_off(config); !off.empty()) {
    log::warn("engine switches off: {} (for A/B runs: expect slower steps)", off);
  }
  const int n_ctx = config.n_ctx == 0 ? m.n_ctx_train : std::min(config.n_ctx, m.n_ctx_train);
  if (config.kv_cells != 0 && (config.kv_cells < n_ctx || config.kv_cells > kMaxKvCells)) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("kv_cells {} must be 0 (the context) or from the context, {} tokens, to {}",
                                  config.kv_cells, n_ctx, kMaxKvCells));
  }
  const int n_cells = config.kv_cells == 0 ? n_ctx : config.kv_cells;
  BackendOptions bo;
  bo.n_ctx = n_cells;
  bo.max_tokens = std::min(config.n_batch, n_ctx);
  bo.kv_type = *kv_type;
  bo.n_threads = config.n_threads;
  bo.score_rows = config.score_rows;
  bo.cuda_graphs = config.cuda_graphs;
  bo.fa_prefill = config.fa_prefill;
  if (!config.fused_gemm) bo.fused_gemm_rows = 0;
  bo.step_timeout_ms = config.step_timeout_ms;
  bo.step_timeout_per_token_ms = config.step_timeout_per_token_ms;
  bo.debug_gpu_stall_at_step = config.debug_gpu_stall_at_step;
  const auto t_backend = Clock::now();
  MINFER_ASSIGN_OR_RETURN(BackendSelection sel, select_backend(config.backend, m, *impl->weights));
  impl->backend = std::move(sel.backend);
  if (Status st = impl->backend->prepare(m, *impl->weights, bo); !st) {
    // A device that passed the gate but cannot hold the model: with `auto`,
    // the whole model moves to the CPU, loudly; with `cuda`, this is fatal.
    if (impl->backend->name() == "cpu" || config.backend == BackendChoice::kCuda) return st.error();
    log::warn("running the whole model on the CPU: the cuda backend failed to prepare: {}", st.error().message);
    impl->backend = make_cpu_backend();
    sel.reason = "cpu: cuda backend failed to prepare: " + st.error().message;
    MINFER_TRY(impl->backend->prepare(m, *impl->weights, bo));
  }
  impl->runner = std::make_unique<Runner>(m, *impl->weights, *impl->backend, n_ctx, bo.max_tokens,
                                          FusionOptions{config.fuse_qkv, config.fuse_ffn}, n_cells);
  impl->prefix = std::make_unique<PrefixCache>(impl->runner->cells(), config.prefix_cache ? config.prefix_cache_entries : 0);
  const double backend_ms = ms_since(t_backend);
  // The GPU holds the weights now: drop the mapped copy's pages, so that no
  // second copy stays resident (on Jetson both live in the same DRAM).
  uint64_t released = 0;
  if (impl->backend->name() == "cuda") released = impl->file->release_tensor_pages();
  if (!config.trace_path.empty()) {
    MINFER_ASSIGN_OR_RETURN(impl->trace, TraceWriter::open(config.trace_path));
    impl->backend->set_trace(impl->trace.get());
    log::warn("tracing every node to {}: steps run eagerly (no CUDA graph replay) and read every output back",
              config.trace_path);
  }
  // Warm-up: a short greedy generation, a sampled one whose steps draw their
  // tokens and one the host samples (no top-k), so that the three decode
  // graphs (device argmax, draw, logits) are captured before the engine
  // reports ready; on a device backend also the first two with
  // log-probabilities (their steps' graphs end with kLogprobs).
  const auto t_warmup = Clock::now();
  int greedy_launches = -1;
  if (config.warmup && !config.trace_path.empty()) {
    log::info("warm-up skipped while tracing");
  } else if (config.warmup) {
    GenerationRequest w;
    w.prompt = {impl->tokenizer->special().bos.value_or(0)};
    w.max_tokens = std::min(4, n_ctx - 2);
    w.ignore_eos = true;
    const bool logprobs_graphs = impl->config.logprobs_in_step && impl->backend->overlaps_steps() &&
                                 impl->backend->supports(Op::kLogprobs);
    for (int pass = 0; pass < (logprobs_graphs ? 5 : 3) && w.max_tokens > 0; ++pass) {
      w.sampling.temperature = pass == 0 || pass == 3 ? 0.0f : 0.8f;
      w.sampling.top_k = pass == 2 ? 0 : 40;
      w.top_logprobs = pass >= 3 ? 0 : -1;
      GenerationResult r = impl->generate(w, nullptr, nullptr);
      if (r.finish == FinishReason::kError) {
        return unexpected(r.error->code, "warm-up generation failed: " + r.error->message);
      }
      // The greedy step's launches are the ones the info reports, not
      // those of the graph captured last.
      if (pass == 0) greedy_launches = impl->backend->decode_launches();
    }
    impl->runner->cells().truncate(impl->seq, 0);
    impl->prefix->clear();  // the warm-up's prompts are no one's
  }
  impl->retire_history();  // nothing to keep: the cache's figures

  ModelInfo& info = impl->info;
  info.path = config.model_path;
  info.name = m.name.empty() ? std::filesystem::path(config.model_path).filename().string() : m.name;
  info.arch = m.arch_name;
  info.n_layers = m.n_layers;
  info.d_model = m.d_model;
  info.n_heads = m.n_heads;
  info.n_kv_heads = m.n_kv_heads;
  info.head_dim = m.head_dim;
  info.d_ff = m.d_ff;
  info.vocab_size = m.vocab_size;
  info.n_ctx = n_ctx;
  info.kv_cells = n_cells;
  info.n_ctx_train = m.n_ctx_train;
  info.weight_bytes = impl->weights->total_bytes();
  for (const LayerWeights& l : impl->weights->layers) {
    for (const Weight* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) info.decode_bytes_per_token += w->size_bytes();
  }
  info.decode_bytes_per_token += impl->weights->output.size_bytes();
  info.weight_types = describe_weight_types(*impl->weights);
  info.chat_template = std::string(impl->chat->name());
  info.tool_calls = std::string(impl->chat->tool_style_name());
  info.thinking = impl->chat->thinks();
  {
    const SpecialTokens& s = impl->tokenizer->special();
    info.fill_in_middle = s.fim_pre && s.fim_suf && s.fim_mid;
  }
  info.backend = std::string(impl->backend->name());
  info.backend_reason = sel.reason;
  info.backend_detail = impl->backend->description();
  info.load_file_ms = file_ms;
  info.load_backend_ms = backend_ms;
  info.load_warmup_ms = ms_since(t_warmup);
  info.load_capture_ms = impl->backend->capture_ms();
  info.decode_launches = greedy_launches >= 0 ? greedy_launches : impl->backend->decode_launches();
  info.released_weight_bytes = released;
  info.rss_after_load_bytes = resident_bytes();
  {
    std::lock_guard lock(impl->health_mutex);
    impl->health.phase = EnginePhase::kReady;
    impl->health.since = std::chrono::system_clock::now();
    impl->health.last_step = Clock::now();
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const ModelInfo& Engine::info() const { return impl_->info; }

EngineHealth Engine::health() const {
  std::lock_guard lock(impl_->health_mutex);
  return impl_->health;
}

std::vector<TokenId> Engine::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  EncodeOptions o;
  o.add_bos = false;
  o.parse_special = parse_special;
  std::vector<TokenId> ids = impl_->tokenizer->encode(text, o);
  // BOS once: a chat template may already have written it as text.
  const std::optional<TokenId> bos = impl_->tokenizer->special().bos;
  if (add_bos && bos && (ids.empty() || ids.front() != *bos)) ids.insert(ids.begin(), *bos);
  return ids;
}

void Engine::debug_release_gpu_stall() { impl_->backend->debug_release_stall(); }

void Engine::set_profiling(bool on) {
  impl_->backend->set_profiling(on);
  impl_->backend->reset_profile();
}

std::vector<std::tuple<std::string, double, int64_t>> Engine::profile() const {
  std::vector<std::tuple<std::string, double, int64_t>> out;
  const OpProfile& p = impl_->backend->profile();
  for (size_t i = 0; i < p.ms.size(); ++i) {
    if (p.calls[i] > 0) out.emplace_back(op_name(static_cast<Op>(i)), p.ms[i], p.calls[i]);
  }
  return out;
}

bool Engine::default_add_bos() const { return impl_->tokenizer->special().add_bos; }

Expected<std::vector<TokenId>> Engine::fill_in_middle_prompt(const std::vector<TokenId>& prefix,
                                                            std::string_view suffix) const {
  const SpecialTokens& s = impl_->tokenizer->special();
  if (!s.fim_pre || !s.fim_suf || !s.fim_mid) {
    return unexpected(ErrorCode::kInvalidArgument,
                      "the model's vocabulary has no fill-in-the-middle markers (prefix, suffix and middle)");
  }
  std::vector<TokenId> out;
  if (s.add_bos && s.bos) out.push_back(*s.bos);
  out.push_back(*s.fim_pre);
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.push_back(*s.fim_suf);
  const std::vector<TokenId> tail = tokenize(suffix, false, false);
  out.insert(out.end(), tail.begin(), tail.end());
  out.push_back(*s.fim_mid);
  return out;
}

Expected<InfillPrompt> Engine::infill_prompt(std::string_view prefix, std::string_view suffix, std::string_view prompt,
                                             const std::vector<InfillChunk>& extra, int max_prompt_tokens) const {
  const SpecialTokens& s = impl_->tokenizer->special();
  if (!s.fim_pre || !s.fim_suf || !s.fim_mid) {
    return unexpected(ErrorCode::kInvalidArgument,
                      "the model's vocabulary has no fill-in-the-middle markers (prefix, suffix and middle)");
  }
  const auto append_text = [&](std::vector<TokenId>& to, std::string_view text) {
    const std::vector<TokenId> t = tokenize(text, false, false);
    to.insert(to.end(), t.begin(), t.end());
  };
  // llama.cpp writes its separator in bytes "to avoid confusing the AI"; it
  // is this text.
  constexpr std::string_view kSnippetSeparator = "\n\n--- snippet ---\n\n";
  std::vector<TokenId> context;
  if (s.fim_rep) {
    context.push_back(*s.fim_rep);
    append_text(context, "myproject\n");
  }
  for (const InfillChunk& chunk : extra) {
    if (s.fim_sep) {
      context.push_back(*s.fim_sep);
      append_text(context, chunk.filename + "\n");
    } else {
      append_text(context, kSnippetSeparator);
    }
    append_text(context, chunk.text);
  }
  if (s.fim_sep) {
    context.push_back(*s.fim_sep);
    append_text(context, "filename\n");
  }
  std::vector<TokenId> fim{*s.fim_pre};
  append_text(fim, prefix);
  append_text(fim, prompt);
  fim.push_back(*s.fim_suf);
  append_text(fim, suffix);
  fim.push_back(*s.fim_mid);

  // BOS opens the whole prompt, where a model that adds one was trained to
  // see it. llama.cpp puts the extra context before its BOS; we do not.
  const bool bos = s.add_bos && s.bos;
  const int room = max_prompt_tokens - static_cast<int>(fim.size()) - (bos ? 1 : 0);
  const size_t kept = std::min(context.size(), static_cast<size_t>(std::max(0, room)));
  InfillPrompt out;
  out.n_extra_dropped = static_cast<int>(context.size() - kept);
  out.tokens.reserve((bos ? 1 : 0) + kept + fim.size());
  if (bos) out.tokens.push_back(*s.bos);
  out.tokens.insert(out.tokens.end(), context.end() - static_cast<std::ptrdiff_t>(kept), context.end());
  out.tokens.insert(out.tokens.end(), fim.begin(), fim.end());
  return out;
}

Expected<std::string> Engine::detokenize(const std::vector<TokenId>& ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= impl_->tokenizer->vocab_size()) {
      return unexpected(ErrorCode::kInvalidArgument,
                        fmt::format("token {} at index {} is outside the vocabulary [0, {})", ids[i], i,
                                    impl_->tokenizer->vocab_size()));
    }
  }
  return impl_->tokenizer->decode(ids);
}

Expected<std::string> Engine::apply_chat_template(const std::vector<ChatMessage>& messages,
                                                  bool add_generation_prompt,
                                                  const std::vector<std::string>& tools,
                                                  std::optional<bool> enable_thinking) const {
  return impl_->chat->apply(messages, add_generation_prompt, tools, enable_thinking);
}

const ChatTemplate& Engine::chat_template() const { return *impl_->chat; }

GenerationResult Engine::generate(const GenerationRequest& request, const TokenCallback& on_token,
                                  const std::atomic<bool>* cancel) {
  GenerationResult r = impl_->generate(request, on_token, cancel);
  // Its history joins the prefix cache now, not when the next request
  // starts, so that what the engine reports between requests is the cache.
  impl_->retire_history();
  return r;
}

void Engine::forget_histories() {
  impl_->prefix->clear();
  impl_->retire_history();  // the cache's figures
}

Expected<std::vector<float>> Engine::eval_logits(const std::vector<TokenId>& tokens) {
  EngineImpl& e = *impl_;
  if (tokens.empty() || static_cast<int>(tokens.size()) > e.runner->max_tokens()) {
    return unexpected(ErrorCode::kInvalidArgument,
                      fmt::format("eval_logits takes 1..{} tokens, got {}", e.runner->max_tokens(), tokens.size()));
  }
  e.retire_history();
  StepOutput out;
  Status st = e.runner->eval(e.seq, tokens, Logits::kAll, false, &out);
  e.runner->cells().truncate(e.seq, 0);
  if (!st) return st.error();
  return std::move(out.logits);
}

}  // namespace minfer
