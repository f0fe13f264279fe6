// `minfer complete "prompt"`: asks minferd for a completion over its socket
// (with --suffix, the middle between the prompt and the suffix, for code
// models) and streams the text to stdout as it is generated; token counts and
// the finish reason go to stderr.
#include <cstdio>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "daemon/minfer/generation_stream.h"

namespace minfer::cli {

int cmd_complete(const std::vector<std::string>& args) {
  std::string socket = default_socket_path();
  std::string prompt;
  std::string suffix;
  SamplingOptions sampling;
  po::options_description desc("minfer complete options");
  desc.add_options()
      ("socket", po::value(&socket)->default_value(socket), "minferd's socket (MINFER_SOCKET)")
      ("prompt,p", po::value(&prompt)->required(), "the text to continue")
      ("suffix", po::value(&suffix), "fill-in-the-middle (code models): the text after the completion");
  sampling.add_to(desc);
  po::positional_options_description positional;
  positional.add("prompt", 1);
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer complete [--socket PATH] [-n N] [--temperature T ...] [--suffix TEXT] PROMPT", desc,
                  &positional, args, vm, &code)) {
    return code;
  }
  if (std::string e = sampling.load_schema(); !e.empty()) {
    std::cerr << "minfer: " << e << "\n";
    return 2;
  }
  nlohmann::json body = {{"prompt", prompt}};
  if (!suffix.empty()) body["suffix"] = suffix;
  sampling.write(body);
  SocketClient client(socket);
  auto summary = stream_generation(client, "/v1/completions", body, [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n");
  if (!summary) {
    std::cerr << "minfer: " << summary.error().message << "\n";
    return 1;
  }
  std::cerr << "minfer: " << summary->prompt_tokens << " prompt tokens, " << summary->completion_tokens
            << " generated; finish: " << summary->finish_reason << "\n";
  return 0;
}

}  // namespace minfer::cli
