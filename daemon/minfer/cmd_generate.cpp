// `minfer generate`: streams exactly the generated text to stdout (no prompt
// echo, no decoration) and the prompt and generation speeds to stderr.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "daemon/minfer/command.h"
#include "daemon/minfer/engine_options.h"
#include "engine/common/read_file.h"
#include "engine/sampling/json_schema.h"

namespace minfer::cli {

int cmd_generate(const std::vector<std::string>& args) {
  EngineOptions eo;
  std::string prompt, system;
  int n_predict = 128;
  float temp = 0.8f, top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int top_k = 40, repeat_last_n = 64;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  po::options_description desc("minfer generate options");
  eo.add_to(desc);
  desc.add_options()
      ("prompt,p", po::value(&prompt)->required(), "prompt text")
      ("n-predict,n", po::value(&n_predict)->default_value(n_predict), "most tokens to generate")
      ("temp", po::value(&temp)->default_value(temp), "temperature (0: greedy)")
      ("top-k", po::value(&top_k)->default_value(top_k), "top-k (0: off)")
      ("top-p", po::value(&top_p)->default_value(top_p), "top-p (1: off)")
      ("min-p", po::value(&min_p)->default_value(min_p), "min-p (0: off)")
      ("repeat-penalty", po::value(&repeat_penalty)->default_value(repeat_penalty), "repetition penalty (1: off)")
      ("repeat-last-n", po::value(&repeat_last_n)->default_value(repeat_last_n),
       "tokens the penalties look at (-1: the context, 0: none)")
      ("seed,s", po::value(&seed)->default_value(seed), "sampling seed")
      ("stop", po::value(&stops)->composing(), "stop string (repeatable)")
      ("chat", "wrap the prompt in the model's chat template (user turn)")
      ("json", "JSON mode: the output is one JSON object")
      ("schema", po::value<std::string>(), "structured output: a value of the JSON schema in this file")
      ("system", po::value(&system), "system message for --chat")
      ("no-bos", "do not add the BOS token")
      ("ignore-eos", "keep generating past end-of-generation tokens");
  po::variables_map vm;
  int code = 0;
  if (!parse_args("usage: minfer generate -m FILE -p PROMPT [-n N] [--temp T ...] [--seed S] [--chat]", desc, nullptr,
                  args, vm, &code)) {
    return code;
  }
  if (repeat_last_n < -1) {
    std::cerr << "minfer: --repeat-last-n is " << repeat_last_n << "; allowed -1 (the context) or more\n";
    return 2;
  }
  // The schema before the model: a bad one is an error at once.
  std::shared_ptr<const JsonSchema> schema;
  if (vm.count("schema")) {
    const std::string& file = vm["schema"].as<std::string>();
    auto text = read_file(file);
    auto compiled = text ? JsonSchema::compile(*text) : unexpected(text.error());
    if (!compiled) {
      std::cerr << "minfer: --schema " << file << ": " << compiled.error().message << "\n";
      return 2;
    }
    schema = std::move(*compiled);
  }
  auto engine = load_engine(eo);
  if (!engine) {
    std::cerr << "minfer: " << engine.error().message << "\n";
    return 1;
  }
  Engine& e = **engine;
  std::string text = prompt;
  bool parse_special = false;
  if (vm.count("chat")) {
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({"system", system});
    messages.push_back({"user", prompt});
    auto rendered = e.apply_chat_template(messages, true);
    if (!rendered) {
      std::cerr << "minfer: " << rendered.error().message << "\n";
      return 1;
    }
    text = *rendered;
    parse_special = true;  // the template's control tokens are meant as tokens
  }
  GenerationRequest req;
  req.prompt = e.tokenize(text, vm.count("no-bos") == 0 && e.default_add_bos(), parse_special);
  req.max_tokens = n_predict;
  req.sampling.temperature = temp;
  req.sampling.top_k = top_k;
  req.sampling.top_p = top_p;
  req.sampling.min_p = min_p;
  req.sampling.repeat_penalty = repeat_penalty;
  req.sampling.penalty_last_n = repeat_last_n == -1 ? e.info().n_ctx : repeat_last_n;
  req.sampling.seed = seed;
  req.json_object = vm.count("json") > 0;
  req.json_schema = schema;
  req.stop = stops;
  req.ignore_eos = vm.count("ignore-eos") > 0;
  req.reply_starts_text = vm.count("chat") > 0;
  GenerationResult r = e.generate(req, [](const TokenEvent& ev) {
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
    std::fflush(stdout);
    return true;
  }, nullptr);
  if (r.finish == FinishReason::kError) {
    std::cerr << "\nminfer: " << r.error->message << "\n";
    return 1;
  }
  std::cerr << fmt::format("\nminfer: prompt {} tokens in {:.1f} ms ({:.1f} tok/s); generated {} tokens in {:.1f} ms "
                           "({:.1f} tok/s); finish: {}; backend {} ({})\n",
                           r.n_prompt, r.prefill_ms, r.prefill_tokens_per_s(), r.n_generated, r.decode_ms,
                           r.decode_tokens_per_s(), finish_reason_name(r.finish), e.info().backend,
                           e.info().backend_detail);
  return 0;
}

}  // namespace minfer::cli
