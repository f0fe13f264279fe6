// `minfer chat`: an interactive conversation with minferd. Each line read is
// a user turn; the reply streams back and joins the conversation, which is
// sent whole every turn (the daemon keeps no session state). "/reset" starts
// over, "/quit" or end of input leaves.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "daemon/minfer/generation_stream.h"

namespace minfer::cli {

int cmd_chat(const std::vector<std::string>& args) {
  std::string socket = default_socket_path();
  std::string system;
  SamplingOptions sampling;
  po::options_description desc("minfer chat options");
  desc.add_options()
      ("socket", po::value(&socket)->default_value(socket), "minferd's socket (MINFER_SOCKET)")
      ("system", po::value(&system), "system message that opens the conversation");
  sampling.add_to(desc);
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer chat [--socket PATH] [--system TEXT] [-n N] [--temperature T ...]\n"
                  "Type a message and Enter; /reset starts over, /quit (or end of input) leaves.",
                  desc, nullptr, args, vm, &code)) {
    return code;
  }
  if (std::string e = sampling.load_schema(); !e.empty()) {
    std::cerr << "minfer: " << e << "\n";
    return 2;
  }
  const bool interactive = ::isatty(0) != 0;
  nlohmann::json messages = nlohmann::json::array();
  auto reset = [&] {
    messages = nlohmann::json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  };
  reset();
  SocketClient client(socket);
  std::string line;
  for (;;) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line) || line == "/quit") break;
    if (line.empty()) continue;
    if (line == "/reset") {
      reset();
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    nlohmann::json body = {{"messages", messages}};
    sampling.write(body);
    std::string reply;
    auto summary = stream_generation(client, "/v1/chat/completions", body, [&](const std::string& text) {
      reply += text;
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n");
    if (!summary) {
      std::cerr << "minfer: " << summary.error().message << "\n";
      messages.erase(messages.size() - 1);  // the turn did not happen
      if (!interactive) return 1;
      continue;
    }
    messages.push_back({{"role", "assistant"}, {"content", reply}});
  }
  return 0;
}

}  // namespace minfer::cli
