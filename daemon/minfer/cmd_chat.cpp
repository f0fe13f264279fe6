// `minfer chat`: an interactive conversation with minferd. Each line read is
// a user turn; the reply streams back and joins the conversation, which is
// sent whole every turn (the daemon keeps no session state). "/reset" starts
// over, "/quit" or end of input leaves. With --tools FILE (an OpenAI "tools"
// array) the model may call them: each call is printed and the next line
// read is its result, after which the model goes on (with tool_choice auto:
// --tool-choice applies to the reply to your message).
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "daemon/minfer/generation_stream.h"
#include "engine/common/read_file.h"

namespace minfer::cli {

int cmd_chat(const std::vector<std::string>& args) {
  std::string socket = default_socket_path();
  std::string system, tools_file, tool_choice = "auto";
  SamplingOptions sampling;
  po::options_description desc("minfer chat options");
  desc.add_options()
      ("socket", po::value(&socket)->default_value(socket), "minferd's socket (MINFER_SOCKET)")
      ("system", po::value(&system), "system message that opens the conversation")
      ("tools", po::value(&tools_file), "a JSON file with the tools the model may call (OpenAI's \"tools\" array)")
      ("tool-choice", po::value(&tool_choice)->default_value(tool_choice),
       "auto | none | required | a tool's name (forces a call to it) for the reply to each message");
  sampling.add_to(desc);
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer chat [--socket PATH] [--system TEXT] [--tools FILE] [-n N] [--temperature T ...]\n"
                  "Type a message and Enter; /reset starts over, /quit (or end of input) leaves.\n"
                  "With --tools, a call the model makes is shown and the next line is its result.",
                  desc, nullptr, args, vm, &code)) {
    return code;
  }
  if (std::string e = sampling.load_schema(); !e.empty()) {
    std::cerr << "minfer: " << e << "\n";
    return 2;
  }
  nlohmann::json tools;
  if (!tools_file.empty()) {
    auto text = read_file(tools_file);
    tools = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
    if (!tools.is_array()) {
      std::cerr << "minfer: --tools " << tools_file << ": "
                << (text ? "not a JSON array of tools" : text.error().message) << "\n";
      return 2;
    }
  }
  nlohmann::json choice = tool_choice;
  if (tool_choice != "auto" && tool_choice != "none" && tool_choice != "required") {
    choice = {{"type", "function"}, {"function", {{"name", tool_choice}}}};
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
    const size_t turn_start = messages.size() - 1;
    // The reply, and while it calls tools, their results and the next reply.
    for (bool first = true;; first = false) {
      nlohmann::json body = {{"messages", messages}};
      sampling.write(body);
      if (!tools.empty()) {
        body["tools"] = tools;
        body["tool_choice"] = first ? choice : nlohmann::json("auto");
      }
      std::string reply;
      auto summary = stream_generation(client, "/v1/chat/completions", body, [&](const std::string& text) {
        reply += text;
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      });
      std::printf("\n");
      if (!summary) {
        std::cerr << "minfer: " << summary.error().message << "\n";
        messages.erase(messages.begin() + static_cast<std::ptrdiff_t>(turn_start), messages.end());  // the turn did not happen
        if (!interactive) return 1;
        break;
      }
      if (summary->tool_calls.empty()) {
        messages.push_back({{"role", "assistant"}, {"content", reply}});
        break;
      }
      messages.push_back({{"role", "assistant"},
                          {"content", reply.empty() ? nlohmann::json() : nlohmann::json(reply)},
                          {"tool_calls", summary->tool_calls}});
      for (const nlohmann::json& call : summary->tool_calls) {
        std::printf("[tool call %s %s(%s)]\n", call["id"].get<std::string>().c_str(),
                    call["function"]["name"].get<std::string>().c_str(),
                    call["function"]["arguments"].get<std::string>().c_str());
        if (interactive) {
          std::fputs("result> ", stdout);
          std::fflush(stdout);
        }
        std::string result;
        if (!std::getline(std::cin, result)) return 0;
        messages.push_back({{"role", "tool"}, {"tool_call_id", call["id"]}, {"content", result}});
      }
    }
  }
  return 0;
}

}  // namespace minfer::cli
