// The shape of `minfer health` and `minfer metrics`: GET one path from
// minferd and print the body; exit 0 when the answer is 200.
#pragma once

#include <string>
#include <vector>

namespace minfer::cli {

// pretty_json: print the body as indented JSON.
int run_get_command(const std::vector<std::string>& args, const char* name, const char* path, bool pretty_json);

}  // namespace minfer::cli
