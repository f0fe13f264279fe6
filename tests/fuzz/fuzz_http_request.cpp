// libFuzzer target: minferd's request path with no engine, as a session runs
// it (daemon/minferd/session.cpp): bytes → Beast's request parser with the
// daemon's header and body limits (pipelined requests on one connection) →
// the route table → the endpoint's body parser and validation
// (request_parse.h) → for generations, make_generation_request with a prompt
// of the length the text would roughly tokenize to → the reply bytes,
// error bodies included. Every path must end in a spec or an ApiError with a
// 4xx/5xx status; nothing may crash, throw out, leak or trip a sanitizer.
// Chat bodies are parsed twice: for a model whose chat template has no tools
// and for one that has them; completion and infill bodies too, for a
// vocabulary without FIM markers and one with them.
// Seeds: tests/fuzz/corpus/http_request (the README's and the tests' requests).
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "daemon/minferd/api_error.h"
#include "daemon/minferd/http_reply.h"
#include "daemon/minferd/request_parse.h"
#include "daemon/minferd/routes.h"

namespace {

namespace http = boost::beast::http;
using namespace minfer;
using namespace minfer::daemon;

constexpr uint32_t kHeaderLimitBytes = 16 * 1024;  // session.cpp
constexpr size_t kBodyLimitBytes = 64 * 1024;      // a small --body-limit-bytes, so 413 is reachable
const ModelLimits kLimits{256, 512};                // stories260K with --ctx-size 256
const ModelLimits kToolLimits{256, 512, "chatml", ToolStyle::kQwen25};  // the same with a chat template that has tools
const ModelLimits kFimLimits{256, 512, "chatml", ToolStyle::kNone, true};  // a code model's vocabulary (FIM markers)

void check_error(const ApiError& e) {
  if (e.status < 400 || e.status > 599) __builtin_trap();
  (void)serialize_reply(error_reply(e), 11, true);
}

void handle(const http::request<http::string_body>& req) {
  auto routed = route(std::string_view(req.method_string().data(), req.method_string().size()),
                      std::string_view(req.target().data(), req.target().size()));
  if (const ApiError* e = std::get_if<ApiError>(&routed)) return check_error(*e);
  const Route& r = std::get<Route>(routed);
  const std::string& body = req.body();
  std::optional<ApiError> err;
  GenerationSpec spec;
  switch (r.endpoint) {
    case Endpoint::kCompletions: {
      // Without FIM markers (a suffix refused), then with them.
      GenerationSpec plain;
      if (auto e = parse_completion_request(body, kLimits, &plain)) {
        check_error(*e);
      } else if (plain.suffix) {
        __builtin_trap();  // a suffix passed without the markers
      }
      err = parse_completion_request(body, kFimLimits, &spec);
      if (!err && spec.suffix && (spec.suffix->empty() || spec.echo)) __builtin_trap();
      break;
    }
    case Endpoint::kChatCompletions: {
      // Without tools in the template (tools refused), then with them.
      GenerationSpec plain;
      if (auto e = parse_chat_request(body, kLimits, &plain)) check_error(*e);
      err = parse_chat_request(body, kToolLimits, &spec);
      if (!err && spec.forced_tool_call() && spec.tool_call_schema == nullptr) __builtin_trap();
      if (!err && spec.tool_choice == ToolChoice::kNone && !spec.tools.empty()) __builtin_trap();
      break;
    }
    case Endpoint::kInfill: {
      // Without FIM markers every body is refused; then with them.
      GenerationSpec plain;
      const std::optional<ApiError> refused = parse_infill_request(body, kLimits, &plain);
      if (!refused) __builtin_trap();
      check_error(*refused);
      err = parse_infill_request(body, kFimLimits, &spec);
      // One choice, no log-probabilities: llama.cpp's answer has no place for more.
      if (!err && (spec.n != 1 || spec.best_of > 1 || spec.top_logprobs != -1 || spec.echo)) __builtin_trap();
      break;
    }
    case Endpoint::kTokenize: {
      TokenizeSpec t;
      err = parse_tokenize_request(body, &t);
      break;
    }
    case Endpoint::kDetokenize: {
      DetokenizeSpec d;
      err = parse_detokenize_request(body, kLimits, &d);
      if (!err) {
        for (int32_t id : d.tokens) {
          if (id < 0 || id >= kLimits.vocab_size) __builtin_trap();  // validated ids only
        }
      }
      break;
    }
    default: return;  // health, metrics, models: no body
  }
  if (err) return check_error(*err);
  if (r.endpoint != Endpoint::kCompletions && r.endpoint != Endpoint::kChatCompletions && r.endpoint != Endpoint::kInfill) {
    return;
  }
  // The choices a request holds: 1 to kMaxChoices in all.
  if (spec.n < 1 || spec.n_prompts() < 1 || spec.n_prompts() * spec.n > kMaxChoices) __builtin_trap();
  std::vector<std::vector<int32_t>> prompts;
  if (spec.kind == ApiKind::kChat) {
    size_t chars = 0;
    for (const ChatMessage& m : spec.messages) chars += m.content.size() + m.role.size() + 8;
    prompts.emplace_back(chars / 3 + 1, 1);
  }
  if (spec.kind == ApiKind::kInfill) {
    // Its FIM part: three markers around the text (the extra context is cut
    // to fit the context).
    const InfillInput& in = spec.infill;
    prompts.emplace_back((in.prefix.size() + in.prompt.size() + in.suffix.size()) / 3 + 3, 1);
  }
  for (const CompletionPrompt& p : spec.prompts) {
    prompts.push_back(p.is_tokens ? p.tokens : std::vector<int32_t>(p.text.size() / 3 + 1, 1));
  }
  for (std::vector<int32_t>& prompt : prompts) {
    for (int32_t id : prompt) {
      if (id < 0 || id >= kLimits.vocab_size) __builtin_trap();
    }
    GenerationRequest out;
    if (auto e = make_generation_request(spec, std::move(prompt), kLimits, 42, &out)) return check_error(*e);
    // At least one token to generate, unless the prompt is only scored (echo
    // with logprobs); the engine's limits on what it is asked.
    if (out.max_tokens < (out.prompt_logprobs ? 0 : 1)) __builtin_trap();
    if (static_cast<int>(out.prompt.size()) + out.max_tokens > kLimits.n_ctx) __builtin_trap();
    if (out.prompt_logprobs && out.top_logprobs < 0) __builtin_trap();
    if (out.top_logprobs < -1 || out.top_logprobs > kMaxTopLogprobs) __builtin_trap();
    // The line limits (n_indent, t_max_predict_ms): never negative; /infill's alone.
    if (out.min_indent < 0 || out.max_predict_ms < 0) __builtin_trap();
    if (spec.kind != ApiKind::kInfill && (out.min_indent != 0 || out.max_predict_ms != 0)) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  boost::beast::flat_buffer buffer;
  auto in = buffer.prepare(size);
  std::memcpy(in.data(), data, size);
  buffer.commit(size);
  for (int n = 0; n < 8 && buffer.size() > 0; ++n) {  // --max-pipelined 8
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimitBytes);
    parser.body_limit(kBodyLimitBytes);
    parser.eager(true);
    boost::beast::error_code ec;
    const size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      parser.put_eof(ec);  // the client closed: an incomplete request is an error
      if (!ec && parser.is_done()) handle(parser.get());
      return 0;
    }
    if (ec) return 0;  // 400/413/431 and close, as the session answers
    if (!parser.is_done()) return 0;
    handle(parser.release());
  }
  return 0;
}
