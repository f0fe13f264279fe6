// `minfer tokenize`: prints the token ids of TEXT, space-separated, on one line.
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"

namespace minfer::cli {

int cmd_tokenize(const std::vector<std::string>& args) {
  EngineOptions eo;
  eo.n_ctx = 256;  // tokenizing needs no context; keep the KV cache small
  std::string text;
  po::options_description desc("minfer tokenize options");
  eo.add_to(desc);
  desc.add_options()
      ("text", po::value(&text)->required(), "text to tokenize")
      ("no-bos", "do not add BOS (default: per the model's metadata)")
      ("no-special", "treat special-token text as plain text");
  po::positional_options_description pos;
  pos.add("text", 1);
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer tokenize -m FILE [--no-bos] [--no-special] TEXT", desc, &pos, args, vm, &code)) {
    return code;
  }
  eo.backend = "cpu";  // no device needed to tokenize
  auto engine = load_engine(eo);
  if (!engine) {
    std::cerr << "minfer: " << engine.error().message << "\n";
    return 1;
  }
  const Engine& e = **engine;
  const std::vector<TokenId> ids =
      e.tokenize(text, vm.count("no-bos") == 0 && e.default_add_bos(), vm.count("no-special") == 0);
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? " " : "") << ids[i];
  std::cout << "\n";
  return 0;
}

}  // namespace minfer::cli
