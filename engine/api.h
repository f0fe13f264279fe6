// The Engine API: everything the daemon and the `minfer` tool use. Nothing
// here exposes a tensor, a backend or the GGUF file.
//
// generate() and eval_logits() are driven by one thread at a time (the
// daemon's engine thread). info(), health(), tokenize(), detokenize(),
// apply_chat_template() and default_add_bos() read only immutable state (or
// the health mutex) and may be called from any thread, also while generate()
// runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "engine/chat/chat_template.h"
#include "engine/common/expected.h"
#include "engine/sampling/sampler.h"

namespace minfer {

class JsonSchema;  // engine/sampling/json_schema.h

using TokenId = int32_t;

enum class BackendChoice { kAuto, kCpu, kCuda };
const char* backend_choice_name(BackendChoice b);
bool parse_backend_choice(std::string_view s, BackendChoice* out);

// The most histories EngineConfig::prefix_cache_entries may keep (each
// request scans them).
inline constexpr int kMaxPrefixCacheEntries = 1024;
// The most cells EngineConfig::kv_cells may ask for.
inline constexpr int kMaxKvCells = 1 << 22;

struct EngineConfig {
  std::string model_path;
  BackendChoice backend = BackendChoice::kAuto;  // kCuda: a failed weight gate is a start-up error
  int n_ctx = 4096;          // tokens a request may hold; clamped to the model's training context; 0: the training context
  // KV cache cells: 0, as many as the context; more (up to kMaxKvCells)
  // leave room for the prefix cache's kept histories beside a request of the
  // whole context, at kv_cells × the model's K/V row of memory.
  int kv_cells = 0;
  int n_batch = 512;         // most prompt tokens per forward step
  // A scored prompt's (prompt_logprobs) rows of logits held at once (rows ×
  // the vocabulary): the CUDA backend computes and scores its steps' rows in
  // slices of this many; the CPU backend, and the host's scoring from copied
  // logits, take steps of at most this many tokens. MINFER_SCORE_ROWS=N.
  int score_rows = 64;
  std::string kv_type = "f16";  // f16 | f32
  int n_threads = 0;         // CPU threads; 0: all cores
  bool fuse_qkv = true;      // A/B switches (MINFER_NO_FUSE_QKV=1 ...); output must not change
  bool fuse_ffn = true;
  bool fa_prefill = true;    // CUDA: flash-attention prefill kernel (MINFER_NO_FA_PREFILL=1: generic kernel)
  // CUDA: prefill steps of few tokens multiply the quantized weights on the
  // fused kernel (MINFER_NO_FUSED_GEMM=1: every weight dequantized to f16,
  // then cuBLAS, at every step size).
  bool fused_gemm = true;
  bool cuda_graphs = true;   // CUDA: capture and replay decode steps (MINFER_NO_CUDA_GRAPH=1: eager launches)
  double step_timeout_ms = 10000.0;          // CUDA bounded wait per step: base ...
  double step_timeout_per_token_ms = 20.0;   // ... plus this per token of the step
  // Reuse the KV of an earlier request's common prefix: the histories of the
  // last prefix_cache_entries requests stay in the cache's cells until a
  // request needs the cells (least recently used first), and a request
  // evaluates only what follows the longest prefix of its prompt that one of
  // them holds. 1: the previous request's alone.
  bool prefix_cache = true;
  int prefix_cache_entries = 16;
  // Decode steps submitted before the host has handled the token before them
  // (the device evaluates token t while the host streams token t - 1; greedy
  // requests also queue step t + 1, fed with t's argmax on the device): -1
  // where the backend runs steps asynchronously (CUDA), 0 never
  // (MINFER_NO_LOOKAHEAD=1), 1 on every backend (tests: the CPU backend runs
  // the same order synchronously). Tokens are the same either way.
  int lookahead = -1;
  // Sampled decode steps draw their token themselves (Op::kSample, on the
  // device with CUDA) where the request allows it (SamplingParams::
  // drawn_in_step: top-k, no penalties) and the backend supports it, so that
  // no logits travel to the host and the next step can be queued behind;
  // false (MINFER_NO_DRAW_IN_STEP=1): the host sampler draws from the copied
  // logits. Tokens are the same either way (kernels/draw.h).
  bool draw_in_step = true;
  // A request for log-probabilities (GenerationRequest::top_logprobs) whose
  // tokens the decode steps pick (greedy without bias or penalties, or drawn
  // in the step) has the steps compute them too (Op::kLogprobs, on the
  // device with CUDA): a few hundred bytes a step come back instead of the
  // logits, and steps are queued ahead as without (on the H200, tg128 with
  // top 5 listed: 0.5B Q8_0 394 -> 2,012 tok/s, 7B Q4_K_M 313 -> 582).
  // false (MINFER_NO_LOGPROBS_IN_STEP=1): the host computes them from the
  // copied logits and picks the token. The same tokens and top lists either
  // way, log-probabilities within the rounding of a sum in double taken in
  // another order on the device.
  bool logprobs_in_step = true;
  // Greedy constrained requests (JSON mode, structured output, tool calls)
  // take the decode step's argmax, with the steps queued ahead, whenever
  // the constraint allows it; a refused argmax's step is evaluated again for
  // its logits and the host picks from them (GenerationResult::n_repicked),
  // unless the step's list (constrained_candidates) holds a token the
  // constraint allows. Only where steps run ahead (lookahead: CUDA; the CPU
  // when forced). Off (the default; MINFER_CONSTRAINED_LOOKAHEAD=1 turns it
  // on): no step runs ahead of the host's pick. Tokens are the same either
  // way.
  bool constrained_lookahead = false;
  // Greedy constrained requests have each decode step list its best
  // candidates (Op::kLogprobs: its kLogprobsTop best tokens, the larger logit
  // first, the lower id on ties), and the host takes the first the
  // constraint allows — the token it would pick from the whole logits —
  // copying the logits only when it allows none of them
  // (GenerationResult::n_logits_fetched). -1: where the steps run on a
  // device (CUDA: the logits stay there); the CPU backend's are in host
  // memory already, where listing cost 5% of a 0.5B JSON-mode token (2-core
  // machine). 0 never (MINFER_NO_CONSTRAINED_CANDIDATES=1): every step's
  // logits are copied and the host picks from them. 1 on every backend
  // (tests). Tokens are the same either way.
  int constrained_candidates = -1;
  bool warmup = true;        // run a short generation at load (captures the CUDA decode graphs)
  std::string trace_path;    // MINFER_TRACE: Chrome trace of every node of every step (debugging; slow)
  // A Jinja chat template file used instead of the model's
  // tokenizer.chat_template (recognised by its text, as the model's would be);
  // empty: the model's. An unreadable file is a load error.
  std::string chat_template_file;
  // Fault injection for tests; the service never sets it. The CUDA backend
  // makes the decode step with this index (counted from load) spin on the
  // GPU until debug_release_gpu_stall() or 30 s, so that a test can watch the
  // bounded wait expire and the engine turn wedged.
  int debug_gpu_stall_at_step = -1;

  // Applies the MINFER_* environment switches (MINFER_NO_FUSE_QKV,
  // MINFER_NO_FUSE_FFN, MINFER_NO_FA_PREFILL, MINFER_NO_FUSED_GEMM, MINFER_NO_CUDA_GRAPH, MINFER_NO_LOOKAHEAD,
  // MINFER_NO_DRAW_IN_STEP, MINFER_NO_LOGPROBS_IN_STEP, MINFER_CONSTRAINED_LOOKAHEAD, MINFER_NO_CONSTRAINED_CANDIDATES,
  // MINFER_CACHE_TYPE, MINFER_TRACE, MINFER_SCORE_ROWS) on top of the
  // configured values.
  void apply_environment();
};

struct ModelInfo {
  std::string path;
  std::string name;          // general.name, or the file name
  std::string arch;          // llama | qwen2 | qwen3
  int n_layers = 0, d_model = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, d_ff = 0;
  int vocab_size = 0;
  int n_ctx = 0;             // the engine's context: tokens a request may hold
  int kv_cells = 0;          // the KV cache's cells (EngineConfig::kv_cells)
  int n_ctx_train = 0;
  uint64_t weight_bytes = 0;
  uint64_t decode_bytes_per_token = 0;  // weight bytes one decode step reads (layers + output head)
  std::string weight_types;  // "q8_0 ×169, f32 ×49"
  std::string chat_template; // "chatml", "llama3", "chatml (fallback)"
  std::string tool_calls;     // how the template writes tools: "qwen2.5", "qwen3", "llama3"; "" none
  bool thinking = false;      // the template has a reasoning block (reasoning_content)
  bool fill_in_middle = false;  // the vocabulary has FIM prefix, suffix and middle markers (code models)
  std::string backend;       // cpu | cuda
  std::string backend_reason;  // why this backend (e.g. the weight that failed the CUDA gate)
  std::string backend_detail;  // "2 threads, avx512" / the GPU's name
  // Start-up, split (ms): open and parse the file, prepare the backend
  // (upload weights), the warm-up generation (includes graph capture), and
  // the graph capture alone.
  double load_file_ms = 0, load_backend_ms = 0, load_warmup_ms = 0, load_capture_ms = 0;
  int decode_launches = 0;  // kernel launches per greedy decode step (CUDA; the warm-up's)
  uint64_t rss_after_load_bytes = 0;  // resident memory of the process once loaded (/proc/self/statm)
  uint64_t released_weight_bytes = 0;  // mapped weight bytes dropped from memory after the GPU upload
};

enum class EnginePhase { kLoading, kReady, kWedged, kFailed };
const char* engine_phase_name(EnginePhase p);

struct EngineHealth {
  EnginePhase phase = EnginePhase::kLoading;
  std::string reason;  // why wedged / failed
  std::chrono::system_clock::time_point since{};           // when the phase began
  std::chrono::steady_clock::time_point last_step{};       // heartbeat: last completed forward step
  uint64_t steps = 0;
  // The KV cache between requests (as of the last one's end): its cells, how
  // many hold earlier requests' histories for prefix reuse, and how many
  // histories (EngineConfig::prefix_cache_entries).
  int kv_cells = 0;
  int kv_cells_kept = 0;
  int prefix_histories = 0;
};

// A token with its log-probability under the model: the log-softmax of the
// step's raw logits, before temperature, penalties, bias and the sampler's
// filters (engine/sampling/logprobs.h).
struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
  std::string bytes;  // what it decodes to, control tokens rendered; may be part of a UTF-8 sequence
};
// A generated token's: its own, and the most likely tokens of its step, best
// first (GenerationRequest::top_logprobs of them).
struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};
inline constexpr int kMaxTopLogprobs = 20;

struct GenerationRequest {
  std::vector<TokenId> prompt;   // already tokenized (see Engine::tokenize)
  int max_tokens = 128;
  SamplingParams sampling;
  // -1: none. 0..kMaxTopLogprobs: each generated token comes with its
  // log-probability and this many of its step's most likely tokens; the
  // steps' logits then go to the host, which picks the tokens (the same
  // tokens as the device would: kernels/draw.h), so decode is slower.
  int top_logprobs = -1;
  // With top_logprobs ≥ 0: the prompt's tokens' too (GenerationResult::
  // prompt_logprobs), for scoring text. The prompt is then evaluated whole
  // (no prefix reuse), every position's logits read; max_tokens may be 0
  // (score only, generate nothing).
  bool prompt_logprobs = false;
  // With prompt_logprobs: the prompt's tokens from this index on are scored;
  // those before it are context (their entries NaN, with no top list, as the
  // first token's), evaluated without the output head — the second half of
  // a perplexity chunk costs half the head and the scoring. 0 or 1: every
  // token (the first has no context); at most the prompt's length.
  int prompt_logprobs_from = 0;
  // JSON mode (OpenAI's response_format json_object): every token keeps the
  // output a prefix of one JSON object (JsonSchema::any_object()), and
  // generation ends when the object closes (finish kStop) — or at max_tokens,
  // possibly mid-object. The host picks the tokens (greedy: from the steps'
  // lists of their best, EngineConfig::constrained_candidates; otherwise
  // from copied logits).
  bool json_object = false;
  // Structured output (response_format json_schema): the output is one value
  // the compiled schema describes (engine/sampling/json_schema.h), ending as
  // JSON mode does. Not with json_object.
  std::shared_ptr<const JsonSchema> json_schema;
  // Tool calls in free text (chat's tool_choice "auto"): once the reply opens
  // a call the way `tool_call_style` writes them (engine/chat/tool_calls.h),
  // the call is held to this schema (compile_tool_call_schema) and closed;
  // the text around calls is free. The host picks the tokens. Not with the
  // two above.
  std::shared_ptr<const JsonSchema> tool_call_schema;
  ToolStyle tool_call_style = ToolStyle::kNone;
  std::vector<std::string> stop; // stop strings (not included in the output)
  // An editor's completion (llama.cpp's /infill n_indent and
  // t_max_predict_ms; engine/scheduler/line_limits.h), each 0 for off: a
  // line after a generated newline indented by fewer than min_indent blanks
  // ends generation just before its first other character; a token that
  // brings a newline more than max_predict_ms after the decode began (the
  // prefill's end) ends it after its text. Either ends it with finish
  // kLength, as llama.cpp's "limit".
  int min_indent = 0;
  int max_predict_ms = 0;
  bool ignore_eos = false;
  // The reply starts a text of its own (a chat message) instead of going on
  // from the prompt's (a completion). Where the encoder puts a space in front
  // of a text (SPM, WordPiece), the reply's first piece then loses it, as at
  // the start of a document; a completion keeps it, so that the prompt and
  // the reply make the text ("Once upon" + " a time").
  bool reply_starts_text = false;
  // A request that runs past this fails with finish kDeadline.
  std::optional<std::chrono::steady_clock::time_point> deadline;
};

enum class FinishReason { kLength, kStop, kEos, kCancelled, kDeadline, kError };
const char* finish_reason_name(FinishReason r);  // OpenAI words: length, stop, ...

// One streamed piece: complete UTF-8 text (possibly empty while a character
// or a stop string is pending) and the token that produced it.
struct TokenEvent {
  TokenId token = 0;
  std::string text;
  // The last event of a generation that ended for another reason than a stop
  // string may carry only held-back text (a partial character or a partial
  // stop string): then tail is set and `token` repeats the last token.
  bool tail = false;
  std::optional<TokenLogprobs> logprobs;  // when asked for (GenerationRequest::top_logprobs), on each token's event
};

struct GenerationResult {
  FinishReason finish = FinishReason::kLength;
  std::string text;                 // everything emitted (stop string excluded)
  // Finish kStop by a stop string: the string (GenerationRequest::stop);
  // empty otherwise (a constrained output that closed, any other finish).
  std::string stop_string;
  std::vector<TokenId> tokens;      // generated token ids
  int n_prompt = 0;
  int n_cached = 0;                 // prompt tokens whose KV was reused
  int n_generated = 0;
  std::vector<TokenLogprobs> logprobs;  // one per generated token, when asked for
  // One per prompt token, when asked for (GenerationRequest::prompt_logprobs):
  // the first has no context, so its logprob is NaN and its top list empty.
  std::vector<TokenLogprobs> prompt_logprobs;
  double prefill_ms = 0, decode_ms = 0, ttft_ms = 0;
  int n_repicked = 0;               // EngineConfig::constrained_lookahead: argmaxes refused, picked again
  // EngineConfig::constrained_candidates: decode steps none of whose listed
  // candidates the constraint allowed, whose logits were copied for the host.
  int n_logits_fetched = 0;
  std::optional<Error> error;       // set when finish == kError

  double prefill_tokens_per_s() const;
  double decode_tokens_per_s() const;
};

// One piece of extra context for an infill prompt (Engine::infill_prompt):
// another file of the project, as llama.cpp's /infill takes it (input_extra).
struct InfillChunk {
  std::string filename = "tmp";  // llama.cpp's default
  std::string text;
};

// What Engine::infill_prompt builds.
struct InfillPrompt {
  std::vector<TokenId> tokens;
  int n_extra_dropped = 0;  // extra-context tokens cut from the front to fit (0: none)
};

// Return false to cancel the generation (e.g. the client went away).
using TokenCallback = std::function<bool(const TokenEvent&)>;

class EngineImpl;

// Device-to-device copy bandwidth of the first CUDA device in GB/s (bytes
// read + bytes written per second, median of repeats): the ceiling decode
// speed is judged against. An error when the build or machine has no GPU.
Expected<double> measure_device_copy_bandwidth_gbps();

class Engine {
 public:
  static Expected<std::unique_ptr<Engine>> load(const EngineConfig& config);
  ~Engine();

  const ModelInfo& info() const;
  EngineHealth health() const;

  // BOS per the model's metadata when add_bos; special-token text recognised
  // when parse_special.
  std::vector<TokenId> tokenize(std::string_view text, bool add_bos, bool parse_special) const;
  bool default_add_bos() const;
  // A fill-in-the-middle prompt (code models; ModelInfo::fill_in_middle):
  // BOS when the model adds one, the prefix marker, `prefix`, the suffix
  // marker, `suffix` tokenized as text, the middle marker. The model writes
  // what goes between. An error when the vocabulary has no such markers.
  Expected<std::vector<TokenId>> fill_in_middle_prompt(const std::vector<TokenId>& prefix, std::string_view suffix) const;
  // llama.cpp's /infill prompt (its format_infill): the extra context, then
  // the fill-in-the-middle part — the prefix marker, `prefix`, `prompt` (the
  // cursor's line up to the cursor, which llama.cpp appends to the prefix),
  // the suffix marker, `suffix`, the middle marker. Where the vocabulary has
  // the repository markers (Qwen2.5-Coder; arXiv 2409.12186), the extra
  // context is the repository marker and "myproject\n", each chunk as the
  // file separator, its file name, "\n" and its text, then the separator and
  // "filename\n" (the current file, which llama.cpp does not name);
  // otherwise each chunk follows a "--- snippet ---" line. Text is tokenized
  // as text (no control tokens parsed), without BOS. A prompt longer than
  // `max_prompt_tokens` loses extra-context tokens from the front, down to
  // none (llama.cpp keeps the last ones too); the FIM part is never cut, so
  // the prompt may still be longer. An error when the vocabulary has no FIM
  // markers.
  Expected<InfillPrompt> infill_prompt(std::string_view prefix, std::string_view suffix, std::string_view prompt,
                                       const std::vector<InfillChunk>& extra, int max_prompt_tokens) const;
  Expected<std::string> detokenize(const std::vector<TokenId>& ids) const;  // errors on ids outside the vocabulary
  // `tools`: declared tools as JSON texts (ChatTemplate::apply).
  Expected<std::string> apply_chat_template(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                            const std::vector<std::string>& tools = {},
                                            std::optional<bool> enable_thinking = std::nullopt) const;
  const ChatTemplate& chat_template() const;

  // Runs prefill and decode to completion. `cancel` (may be null) and the
  // deadline are checked after every forward step — each prefill chunk of
  // n_batch tokens too — and the heartbeat (health().last_step) advances with
  // each; the callback's answer is checked after every token. Never throws; errors come
  // back as finish kError with the error set.
  GenerationResult generate(const GenerationRequest& request, const TokenCallback& on_token,
                            const std::atomic<bool>* cancel);

  // Drops every history the prefix cache keeps (their cells are free again):
  // what a caller's own requests (a warm-up) left is no client's to reuse.
  void forget_histories();

  // Time per op kind (benchmarks): op name → (ms, calls), accumulated while on.
  void set_profiling(bool on);
  std::vector<std::tuple<std::string, double, int64_t>> profile() const;

  // Ends a debug_gpu_stall_at_step stall (tests).
  void debug_release_gpu_stall();

  // Teacher-forced evaluation for tests and benchmarks: evaluates `tokens`
  // from an empty context and returns every token's logits ([n][vocab]).
  Expected<std::vector<float>> eval_logits(const std::vector<TokenId>& tokens);

 private:
  explicit Engine(std::unique_ptr<EngineImpl> impl);
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace minfer
