#include "daemon/minfer/engine_options.h"

#include <fmt/format.h>

#include <iostream>

#include "platform/log.h"

namespace minfer::cli {

void EngineOptions::add_to(po::options_description& desc) {
  desc.add_options()
      ("model,m", po::value(&model)->required(), "GGUF model file")
      ("backend", po::value(&backend)->default_value(backend), "auto | cpu | cuda (cuda: fail if the GPU cannot run the model)")
      ("ctx-size,c", po::value(&n_ctx)->default_value(n_ctx), "context size in tokens (0: the model's training context)")
      ("batch-size,b", po::value(&n_batch)->default_value(n_batch), "most prompt tokens per forward step")
      ("threads,t", po::value(&threads)->default_value(threads), "CPU threads (0: all cores)")
      ("cache-type", po::value(&kv_type)->default_value(kv_type), "KV cache type: f16 | f32")
      ("log-level", po::value(&log_level)->default_value(log_level), "trace | debug | info | warn | error | off");
  po::options_description engine("GPU deadline, switches and tracing");
  switches.add_to(engine);
  desc.add(engine);
}

Expected<EngineConfig> EngineOptions::to_config() const {
  EngineConfig c;
  c.model_path = model;
  if (!parse_backend_choice(backend, &c.backend)) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("--backend '{}': expected auto, cpu or cuda", backend));
  }
  c.n_ctx = n_ctx;
  c.n_batch = n_batch;
  c.n_threads = threads;
  c.kv_type = kv_type;
  if (std::string e = switches.check(); !e.empty()) return unexpected(ErrorCode::kInvalidArgument, e);
  switches.apply_to(&c);
  c.apply_environment();
  return c;
}

bool parse_args(const std::string& usage, const po::options_description& desc,
                const po::positional_options_description* positional, const std::vector<std::string>& args,
                po::variables_map& vm, int* exit_code) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << usage << "\n\n" << desc << "\n";
      *exit_code = 0;
      return false;
    }
  }
  try {
    po::command_line_parser parser(args);
    parser.options(desc);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "minfer: " << e.what() << "\n" << usage << "\n(--help lists the options)\n";
    *exit_code = 2;
    return false;
  }
  return true;
}

Expected<std::unique_ptr<Engine>> load_engine(const EngineOptions& opts) {
  log::Level level;
  if (!log::parse_level(opts.log_level, &level)) {
    return unexpected(ErrorCode::kInvalidArgument, fmt::format("--log-level '{}' is not a level", opts.log_level));
  }
  log::configure(log::Sink::kStderr, level);
  MINFER_ASSIGN_OR_RETURN(EngineConfig config, opts.to_config());
  return Engine::load(config);
}

}  // namespace minfer::cli
