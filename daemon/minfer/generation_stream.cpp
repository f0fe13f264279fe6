#include "daemon/minfer/generation_stream.h"

#include <fmt/format.h>

#include <fstream>

namespace minfer::cli {
namespace po = boost::program_options;

void SamplingOptions::add_to(po::options_description& desc) {
  desc.add_options()
      ("max-tokens,n", po::value(&max_tokens)->default_value(max_tokens), "most tokens to generate")
      ("temperature", po::value(&temperature)->default_value(temperature), "temperature (0: greedy)")
      ("top-p", po::value(&top_p)->default_value(top_p), "top-p (1: off)")
      ("top-k", po::value(&top_k)->default_value(top_k), "top-k (0: off)")
      ("min-p", po::value(&min_p)->default_value(min_p), "min-p (0: off)")
      ("repeat-penalty", po::value(&repeat_penalty)->default_value(repeat_penalty), "repetition penalty (1: off)")
      ("repeat-last-n", po::value(&repeat_last_n)->default_value(repeat_last_n),
       "tokens the penalties look at (-1: the context, 0: none)")
      ("seed", po::value(&seed)->default_value(seed), "sampling seed (-1: the daemon picks one)")
      ("stop", po::value(&stop)->composing(), "stop string (repeatable)")
      ("json", po::bool_switch(&json), "JSON mode: the reply is one JSON object (response_format json_object)")
      ("schema", po::value(&schema_file), "structured output: the reply is a value of the JSON schema in this file "
                                          "(response_format json_schema)");
}

void SamplingOptions::write(nlohmann::json& body) const {
  body["max_tokens"] = max_tokens;
  body["temperature"] = temperature;
  body["top_p"] = top_p;
  body["top_k"] = top_k;
  body["min_p"] = min_p;
  body["repeat_penalty"] = repeat_penalty;
  body["repeat_last_n"] = repeat_last_n;
  if (seed >= 0) body["seed"] = seed;
  if (!stop.empty()) body["stop"] = stop;
  if (json) body["response_format"] = {{"type", "json_object"}};
  if (!schema_.is_null()) {
    body["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "schema"}, {"schema", schema_}}}};
  }
}

std::string SamplingOptions::load_schema() {
  if (schema_file.empty()) return {};
  if (json) return "--json and --schema are two output formats; give one";
  std::ifstream in(schema_file);
  if (!in) return fmt::format("cannot read the schema file {}", schema_file);
  schema_ = nlohmann::json::parse(in, nullptr, false);
  if (schema_.is_discarded()) {
    schema_ = nullptr;
    return fmt::format("the schema file {} is not JSON", schema_file);
  }
  return {};
}

Expected<StreamSummary> stream_generation(SocketClient& client, std::string_view target, nlohmann::json body,
                                          const std::function<void(const std::string& text)>& on_text) {
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  StreamSummary summary;
  std::string stream_error;
  auto r = client.stream(target, body.dump(), [&](std::string_view data) {
    const nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
    if (!j.is_object()) return true;
    if (j.contains("error")) {
      stream_error = error_message(std::string(data));
      return false;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      summary.prompt_tokens = j["usage"].value("prompt_tokens", 0);
      summary.completion_tokens = j["usage"].value("completion_tokens", 0);
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return true;
    const nlohmann::json& c = j["choices"][0];
    std::string text;
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
        c["delta"]["content"].is_string()) {
      text = c["delta"]["content"].get<std::string>();
    }
    if (!text.empty()) on_text(text);
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("tool_calls") &&
        c["delta"]["tool_calls"].is_array()) {
      for (const nlohmann::json& d : c["delta"]["tool_calls"]) {
        const size_t index = d.value("index", 0);
        if (index > 64) continue;
        while (summary.tool_calls.size() <= index) {
          summary.tool_calls.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
        }
        nlohmann::json& call = summary.tool_calls[index];
        if (d.contains("id") && d["id"].is_string()) call["id"] = d["id"];
        const nlohmann::json fn = d.value("function", nlohmann::json::object());
        if (fn.contains("name") && fn["name"].is_string()) call["function"]["name"] = fn["name"];
        if (fn.contains("arguments") && fn["arguments"].is_string()) {
          call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() + fn["arguments"].get<std::string>();
        }
      }
    }
    if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
      summary.finish_reason = c["finish_reason"].get<std::string>();
    }
    return true;
  });
  if (!r) return r.error();
  if (r->status != 200) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("minferd answered {}: {}", r->status, error_message(r->body)));
  }
  if (!stream_error.empty()) return unexpected(ErrorCode::kInternal, "minferd: " + stream_error);
  return summary;
}

}  // namespace minfer::cli
