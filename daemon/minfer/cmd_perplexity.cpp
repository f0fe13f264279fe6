// `minfer perplexity`: a model's perplexity over a text file, as
// llama-perplexity computes it, so that a file can be compared across
// engines and quantizations. The text's tokens (BOS first where the model
// adds one) are cut into chunks of --chunk tokens, the last partial chunk
// dropped; each chunk is evaluated alone, its first token BOS, and the
// second half of its tokens is scored, each predicted from the tokens before
// it in the chunk (the first half is context only). Perplexity is
// exp(mean negative log-likelihood) over every scored token; its uncertainty
// is the standard error of that mean, times the perplexity. The chunks are
// scored prompts (GenerationRequest::prompt_logprobs, max_tokens 0) whose
// first half is context (prompt_logprobs_from: evaluated without the output
// head, its rows not scored): on CUDA the prefill steps score their rows on
// the device.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "engine/common/read_file.h"

namespace minfer::cli {

namespace {

// Running sums of the scored tokens' negative log-likelihoods.
struct NllSums {
  double sum = 0.0, sum_sq = 0.0;
  int64_t count = 0;

  void add(double nll) {
    sum += nll;
    sum_sq += nll * nll;
    ++count;
  }
  double mean() const { return sum / static_cast<double>(count); }
  double perplexity() const { return std::exp(mean()); }
  // The standard error of the mean, as llama-perplexity's.
  double stderr_of_mean() const {
    if (count < 2) return 0.0;
    const double m = mean();
    return std::sqrt(std::max(0.0, sum_sq / static_cast<double>(count) - m * m) / static_cast<double>(count - 1));
  }
};

}  // namespace

int cmd_perplexity(const std::vector<std::string>& args) {
  EngineOptions eo;
  std::string file, output = "text";
  int chunk = 512, max_chunks = 0;
  po::options_description desc("minfer perplexity options");
  eo.add_to(desc);
  desc.add_options()
      ("file,f", po::value(&file)->required(), "the text to score (UTF-8)")
      ("chunk", po::value(&chunk)->default_value(chunk), "tokens a chunk: its second half is scored")
      ("chunks", po::value(&max_chunks)->default_value(max_chunks), "most chunks to score (0: all)")
      ("output,o", po::value(&output)->default_value(output), "text or json");
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer perplexity -m FILE -f TEXT [--chunk N] [--chunks K] [-o text|json]", desc, nullptr,
                  args, vm, &code)) {
    return code;
  }
  if (chunk < 3) {
    std::cerr << "minfer: --chunk is " << chunk << "; it must be at least 3 (its first half is context, the rest scored)\n";
    return 2;
  }
  if (max_chunks < 0) {
    std::cerr << "minfer: --chunks is " << max_chunks << "; allowed 0 (all) or more\n";
    return 2;
  }
  if (output != "text" && output != "json") {
    std::cerr << "minfer: -o is '" << output << "'; allowed text or json\n";
    return 2;
  }
  auto text = read_file(file);
  if (!text) {
    std::cerr << "minfer: " << text.error().message << "\n";
    return 1;
  }
  auto engine = load_engine(eo);
  if (!engine) {
    std::cerr << "minfer: " << engine.error().message << "\n";
    return 1;
  }
  Engine& e = **engine;
  if (chunk > e.info().n_ctx) {
    std::cerr << fmt::format("minfer: --chunk {} is longer than the context, {} tokens (-c)\n", chunk, e.info().n_ctx);
    return 1;
  }
  const bool bos = e.default_add_bos();
  const std::vector<int32_t> tokens = e.tokenize(*text, bos, false);
  int n_chunks = static_cast<int>(tokens.size() / static_cast<size_t>(chunk));
  if (n_chunks == 0) {
    std::cerr << fmt::format("minfer: {} holds {} tokens; a chunk needs {}\n", file, tokens.size(), chunk);
    return 1;
  }
  if (max_chunks > 0) n_chunks = std::min(n_chunks, max_chunks);

  const int first = chunk / 2;  // rows [first, chunk - 1) predict the scored tokens
  NllSums sums;
  nlohmann::json running = nlohmann::json::array();
  const auto t0 = std::chrono::steady_clock::now();
  for (int c = 0; c < n_chunks; ++c) {
    GenerationRequest req;
    req.prompt.assign(tokens.begin() + static_cast<ptrdiff_t>(c) * chunk,
                      tokens.begin() + static_cast<ptrdiff_t>(c + 1) * chunk);
    if (bos) req.prompt[0] = tokens[0];  // the BOS the tokenizer put first
    req.max_tokens = 0;
    req.top_logprobs = 0;
    req.prompt_logprobs = true;
    req.prompt_logprobs_from = first + 1;  // the context half without the output head
    const GenerationResult r = e.generate(req, nullptr, nullptr);
    if (r.finish == FinishReason::kError) {
      std::cerr << fmt::format("\nminfer: chunk {}: {}\n", c + 1, r.error->message);
      return 1;
    }
    // prompt_logprobs[j]: token j given the ones before it.
    for (int j = first + 1; j < chunk; ++j) sums.add(-static_cast<double>(r.prompt_logprobs[static_cast<size_t>(j)].chosen.logprob));
    running.push_back(sums.perplexity());
    if (output == "text") {
      std::printf("%s[%d]%.4f", c == 0 ? "" : ",", c + 1, sums.perplexity());
      std::fflush(stdout);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ppl = sums.perplexity(), ppl_error = ppl * sums.stderr_of_mean();
  if (output == "text") {
    std::printf("\nPPL = %.4f +/- %.5f\n", ppl, ppl_error);
  } else {
    const nlohmann::json j = {{"model", eo.model},
                              {"file", file},
                              {"backend", e.info().backend},
                              {"chunk", chunk},
                              {"chunks", n_chunks},
                              {"tokens_scored", sums.count},
                              {"nll_mean", sums.mean()},
                              {"ppl", ppl},
                              {"ppl_error", ppl_error},
                              {"running_ppl", running},
                              {"seconds", seconds}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  std::cerr << fmt::format("minfer: {} chunks of {} tokens ({} scored) in {:.2f} s ({:.1f} tok/s); backend {} ({})\n",
                           n_chunks, chunk, sums.count, seconds, static_cast<double>(n_chunks) * chunk / seconds,
                           e.info().backend, e.info().backend_detail);
  return 0;
}

}  // namespace minfer::cli
