// `minfer`: the client, benchmark and model tool. Dispatches to subcommands;
// each subcommand parses its own options.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "daemon/minfer/command.h"

namespace minfer::cli {
// Subcommands, one file each (cmd_<name>.cpp).
int cmd_generate(const std::vector<std::string>& args);
int cmd_tokenize(const std::vector<std::string>& args);
int cmd_bench(const std::vector<std::string>& args);
int cmd_perplexity(const std::vector<std::string>& args);
int cmd_gguf(const std::vector<std::string>& args);
int cmd_synth(const std::vector<std::string>& args);
// Clients of minferd over its socket.
int cmd_complete(const std::vector<std::string>& args);
int cmd_chat(const std::vector<std::string>& args);
int cmd_health(const std::vector<std::string>& args);
int cmd_metrics(const std::vector<std::string>& args);
}  // namespace minfer::cli

namespace {

using minfer::cli::Command;

const Command kCommands[] = {
    {"generate", "generate text from a prompt with a local model", minfer::cli::cmd_generate},
    {"tokenize", "print the token ids of a text", minfer::cli::cmd_tokenize},
    {"bench", "measure prefill and decode speed (like llama-bench)", minfer::cli::cmd_bench},
    {"perplexity", "a model's perplexity over a text file (like llama-perplexity)", minfer::cli::cmd_perplexity},
    {"gguf", "show what a GGUF file holds (gguf info FILE)", minfer::cli::cmd_gguf},
    {"synth", "write a synthetic model: real shapes, random weights", minfer::cli::cmd_synth},
    {"complete", "stream a completion from minferd (over its socket)", minfer::cli::cmd_complete},
    {"chat", "chat with minferd interactively", minfer::cli::cmd_chat},
    {"health", "print minferd's health; exit 0 when it serves", minfer::cli::cmd_health},
    {"metrics", "print minferd's Prometheus metrics", minfer::cli::cmd_metrics},
    {"version", "print the version", [](const std::vector<std::string>&) {
       std::printf("minfer %s\n", MINFER_VERSION);
       return 0;
     }},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: minfer <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'minfer <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  std::fprintf(stderr, "minfer: unknown command '%s'\n\n", name.c_str());
  usage(stderr);
  return 2;
}
