// The `minfer` program's subcommands. Each lives in its own cmd_<name>.cpp
// and is listed once in main.cpp.
#pragma once

#include <string>
#include <vector>

namespace minfer::cli {

// argv-style arguments after the subcommand name; returns the exit code.
using CommandFn = int (*)(const std::vector<std::string>& args);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

}  // namespace minfer::cli
