// Replies that need no engine thread: GET /health, /metrics, /v1/models and
// /v1/models/{id}; and the JSON of /tokenize and /detokenize results.
#pragma once

#include <string>

#include "daemon/minferd/generation_spec.h"
#include "daemon/minferd/http_reply.h"
#include "daemon/minferd/job.h"
#include "daemon/minferd/server_context.h"

namespace minfer::daemon {

HttpReply health_reply(const ServerContext& ctx);
HttpReply metrics_reply(const ServerContext& ctx);
// model_id null: the list; otherwise the one model, or 404 model_not_found.
HttpReply models_reply(const ServerContext& ctx, const std::string* model_id);

HttpReply tokenize_reply(const TokenizeSpec& spec, const JobOutcome& out);
HttpReply detokenize_reply(const JobOutcome& out);

}  // namespace minfer::daemon
