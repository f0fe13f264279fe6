#include "daemon/minfer/get_command.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "daemon/minfer/engine_options.h"
#include "daemon/minfer/socket_client.h"

namespace minfer::cli {

int run_get_command(const std::vector<std::string>& args, const char* name, const char* path, bool pretty_json) {
  std::string socket = default_socket_path();
  po::options_description desc(fmt::format("minfer {} options", name));
  desc.add_options()("socket", po::value(&socket)->default_value(socket), "minferd's socket (MINFER_SOCKET)");
  po::variables_map vm;
  int code = 0;
  if (!parse_args(fmt::format("usage: minfer {} [--socket PATH]", name), desc, nullptr, args, vm, &code)) return code;
  auto r = SocketClient(socket).request("GET", path);
  if (!r) {
    std::cerr << "minfer: " << r.error().message << "\n";
    return 1;
  }
  if (pretty_json) {
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    std::cout << (j.is_discarded() ? r->body : j.dump(2)) << "\n";
  } else {
    std::cout << r->body;
  }
  return r->status == 200 ? 0 : 1;
}

}  // namespace minfer::cli
