#include "daemon/minferd/info_handlers.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace minfer::daemon {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Whether `s` is valid UTF-8 (a token piece may be part of a character).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + static_cast<size_t>(n) > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0xC0) != 0x80) return false;
    }
    i += static_cast<size_t>(n);
  }
  return true;
}

Json model_object(const ServerContext& ctx) {
  Json m = {{"id", ctx.model_id}, {"object", "model"}, {"created", ctx.started_unix}, {"owned_by", "minfer"}};
  if (const ModelInfo* info = ctx.worker.info()) {
    // Beyond OpenAI's fields: what a person checking the appliance wants to see.
    m["name"] = info->name;
    m["arch"] = info->arch;
    m["chat_template"] = info->chat_template;
    // What the chat endpoint can do with it: tools (how the template writes
    // them, null when it has none) and reasoning_content.
    m["tool_calls"] = info->tool_calls.empty() ? Json(nullptr) : Json(info->tool_calls);
    m["thinking"] = info->thinking;
    m["fill_in_middle"] = info->fill_in_middle;
    m["backend"] = info->backend;
    m["backend_reason"] = info->backend_reason;
    m["backend_detail"] = info->backend_detail;
    m["n_ctx"] = info->n_ctx;
    m["n_ctx_train"] = info->n_ctx_train;
    m["kv_cells"] = info->kv_cells;
    m["vocab_size"] = info->vocab_size;
    m["weight_types"] = info->weight_types;
  }
  return m;
}

}  // namespace

HttpReply health_reply(const ServerContext& ctx) {
  const HealthInputs in = ctx.worker.health_inputs();
  const HealthVerdict v = judge_health(in);
  Json j = {{"status", v.serving ? "ok" : "unavailable"},
            {"phase", v.state},
            {"model", ctx.model_id},
            {"model_path", ctx.config.model},
            {"uptime_s", seconds_since(ctx.started)},
            {"heartbeat_age_ms", std::chrono::duration<double, std::milli>(in.heartbeat_age).count()},
            {"queue_depth", ctx.worker.queue_depth()},
            {"queue_capacity", ctx.worker.queue_capacity()},
            {"backend", nullptr},
            {"backend_reason", nullptr}};
  if (!v.reason.empty()) j["reason"] = v.reason;
  if (const ModelInfo* info = ctx.worker.info()) {
    j["backend"] = info->backend;
    j["backend_reason"] = info->backend_reason;
    j["backend_detail"] = info->backend_detail;
    j["model_name"] = info->name;
    j["chat_template"] = info->chat_template;
  }
  HttpReply r;
  r.status = v.serving ? 200 : 503;
  r.body = dump(j);
  if (!v.serving && (in.phase == DaemonPhase::kLoading || in.phase == DaemonPhase::kWarmingUp)) {
    r.headers.emplace_back("Retry-After", "1");
  }
  return r;
}

HttpReply metrics_reply(const ServerContext& ctx) {
  MetricsGauges g;
  g.queue_depth = ctx.worker.queue_depth();
  g.queue_capacity = ctx.worker.queue_capacity();
  g.connections_active = ctx.sessions.size();
  const HealthInputs in = ctx.worker.health_inputs();
  g.state = judge_health(in).state;
  g.heartbeat_age_s = std::chrono::duration<double>(in.heartbeat_age).count();
  g.uptime_s = seconds_since(ctx.started);
  g.model = ctx.model_id;
  if (const ModelInfo* info = ctx.worker.info()) {
    g.backend = info->backend;
    g.chat_template = info->chat_template;
  }
  if (const std::optional<EngineHealth> h = ctx.worker.engine_health()) {
    g.kv_cells = h->kv_cells;
    g.kv_cells_kept = h->kv_cells_kept;
    g.prefix_histories = h->prefix_histories;
  }
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";  // Prometheus text exposition
  r.body = ctx.metrics.render(g);
  return r;
}

HttpReply models_reply(const ServerContext& ctx, const std::string* model_id) {
  HttpReply r;
  if (model_id == nullptr) {
    r.body = dump(Json{{"object", "list"}, {"data", Json::array({model_object(ctx)})}});
    return r;
  }
  if (*model_id != ctx.model_id) {
    ApiError e = invalid_request("model", "model_not_found",
                                 fmt::format("The model '{}' does not exist; this server has '{}'", *model_id,
                                             ctx.model_id));
    e.status = 404;
    return error_reply(e);
  }
  r.body = dump(model_object(ctx));
  return r;
}

HttpReply tokenize_reply(const TokenizeSpec& spec, const JobOutcome& out) {
  Json tokens = Json::array();
  for (size_t i = 0; i < out.tokens.size(); ++i) {
    if (!spec.with_pieces) {
      tokens.push_back(out.tokens[i]);
      continue;
    }
    // As llama.cpp: the piece as a string when it is valid UTF-8, else its bytes.
    const std::string& piece = i < out.pieces.size() ? out.pieces[i] : std::string();
    Json p = {{"id", out.tokens[i]}};
    if (valid_utf8(piece)) {
      p["piece"] = piece;
    } else {
      Json bytes = Json::array();
      for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
      p["piece"] = std::move(bytes);
    }
    tokens.push_back(std::move(p));
  }
  HttpReply r;
  r.body = dump(Json{{"tokens", std::move(tokens)}});
  return r;
}

HttpReply detokenize_reply(const JobOutcome& out) {
  HttpReply r;
  r.body = dump(Json{{"content", out.content}});
  return r;
}

}  // namespace minfer::daemon
