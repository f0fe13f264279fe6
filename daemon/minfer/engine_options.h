// Command-line options shared by the subcommands that load a model
// (generate, tokenize, bench): model path, backend, context, threads, KV type,
// and the engine switches minferd's configuration has too (engine_switches.h).
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "daemon/engine_switches.h"
#include "engine/api.h"

namespace minfer::cli {

namespace po = boost::program_options;

struct EngineOptions {
  std::string model;
  std::string backend = "auto";
  int n_ctx = 4096;
  int n_batch = 512;
  int threads = 0;
  std::string kv_type = "f16";
  EngineSwitches switches;  // --cuda-graphs, --step-timeout-ms, the A/B switches, --trace
  std::string log_level = "warn";

  void add_to(po::options_description& desc);
  // Builds the EngineConfig (environment switches applied); an error names the bad option.
  Expected<EngineConfig> to_config() const;
};

// Parses `args` into `vm`; on --help prints the usage and returns 0 through
// *exit_code; on a bad option prints the error and returns 2. Returns true
// when the caller should go on.
bool parse_args(const std::string& usage, const po::options_description& desc,
                const po::positional_options_description* positional, const std::vector<std::string>& args,
                po::variables_map& vm, int* exit_code);

// Loads the engine, printing a clear error on failure.
Expected<std::unique_ptr<Engine>> load_engine(const EngineOptions& opts);

}  // namespace minfer::cli
