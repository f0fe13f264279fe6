// What `minfer complete` and `minfer chat` share: the sampling options they
// send, and reading a streamed completion (text pieces as they come, then the
// finish reason and token counts).
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "daemon/minfer/socket_client.h"

namespace minfer::cli {

struct SamplingOptions {
  int max_tokens = 256;
  float temperature = 0.8f;
  float top_p = 0.95f;
  int top_k = 40;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;  // the penalties' window (-1: the context)
  long long seed = -1;  // -1: let the daemon pick
  std::vector<std::string> stop;
  bool json = false;  // response_format json_object (JSON mode)
  std::string schema_file;  // response_format json_schema, the schema read from this file

  void add_to(boost::program_options::options_description& desc);
  // Reads --schema's file: "" or an error naming the file.
  std::string load_schema();
  // Adds the fields to a request body.
  void write(nlohmann::json& body) const;

 private:
  nlohmann::json schema_;
};

struct StreamSummary {
  std::string finish_reason;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // Chat: the reply's tool calls, their deltas merged by index (id, type,
  // function.name, function.arguments appended), as OpenAI's clients do.
  nlohmann::json tool_calls = nlohmann::json::array();
};

// POSTs `body` (with "stream": true and usage asked for) to `target` and calls
// on_text with each piece of text. Errors carry the daemon's message.
Expected<StreamSummary> stream_generation(SocketClient& client, std::string_view target, nlohmann::json body,
                                          const std::function<void(const std::string& text)>& on_text);

}  // namespace minfer::cli
