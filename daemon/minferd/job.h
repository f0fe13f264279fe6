// One accepted request on its way through the engine thread: what to do, its
// deadline, its cancellation token, and the sink that carries results back to
// the client's session. A job ends in exactly one JobSink::finished call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/minferd/api_error.h"
#include "daemon/minferd/generation_spec.h"
#include "daemon/minferd/metrics.h"
#include "engine/api.h"
#include "engine/chat/reply_parser.h"

namespace minfer::daemon {

using Clock = std::chrono::steady_clock;

enum class JobKind { kGenerate, kTokenize, kDetokenize };

// One choice of a generation: the engine's result and the reply taken apart.
struct ChoiceOutcome {
  GenerationResult result;  // finish says how it ended
  // Chat with tools or a thinking model: the reply taken apart into its
  // content and calls (their ids are the session's to give), as they were
  // streamed (ReplyParser).
  std::optional<ToolReply> tool_reply;
  std::string reasoning;  // a thinking model's reasoning, apart from the content (chat)
  std::string echo_text;  // completions with echo: the choice's prompt, as text
};

struct JobOutcome {
  std::optional<ApiError> error;  // rejected or failed: answered with this
  // Ended by its cancellation token (Job::cancel_reason says why), while it
  // waited or during a choice; the choices finished before are kept.
  bool cancelled = false;
  // kGenerate: the choices generated, in order (prompt p's choice i at
  // p * n + i); the last one ended the job. None when it ended before the
  // first (a rejected prompt, a cancellation while it waited).
  std::vector<ChoiceOutcome> choices;
  // best_of: the generated tokens of the candidates not answered (the usage
  // counts them: they were generated for the request).
  int unanswered_tokens = 0;
  bool prompt_truncated = false;  // infill: extra context cut from the front to fit the context
  std::vector<int32_t> tokens;    // kTokenize
  std::vector<std::string> pieces;  // kTokenize with_pieces: each token's text
  std::string content;            // kDetokenize
  double queue_ms = 0;            // receipt → the engine thread took it
  double prep_ms = 0;             // generation: chat template and tokenization (Engine calls)
  double engine_ms = 0;           // inside Engine::generate (tokenize / detokenize for those endpoints)
};

// Implemented by the session. Called on the engine thread: implementations
// post to their strand and return at once (the engine never waits for a client).
class JobSink {
 public:
  virtual ~JobSink() = default;
  // The prompt passed every check and generation begins (a stream sends its head).
  virtual void started(int n_prompt) = 0;
  // Streaming calls name the choice they belong to (0 to n-1); choices are
  // generated one after another, so a choice's calls all come before the next's.
  // Streamed text (never empty), the choice's tokens generated so far, and
  // the log-probabilities of the tokens since the last piece when the request
  // asked for them (tokens whose text is held back or cut by a stop string
  // come with a later piece, or with the choice's end).
  virtual void text(int choice, std::string piece, int n_generated, std::vector<TokenLogprobs> logprobs) = 0;
  // Chat with tools: the reply's index-th call, whole, in its place between
  // the pieces of text.
  virtual void tool_call(int choice, int index, ToolCall call) = 0;
  // Chat with a thinking model: a piece of its reasoning.
  virtual void reasoning(int choice, std::string piece) = 0;
  // Streaming, n > 1: a choice before the last ended (the last one ends with
  // the outcome).
  virtual void choice_finished(int choice, ChoiceOutcome outcome) = 0;
  // The single outcome.
  virtual void finished(JobOutcome outcome) = 0;
};

struct Job {
  uint64_t id = 0;
  JobKind kind = JobKind::kGenerate;
  GenerationSpec generation;
  TokenizeSpec tokenize;
  DetokenizeSpec detokenize;
  uint64_t seed = 0;  // used when the request gave none
  Clock::time_point received{};
  Clock::time_point deadline{};
  std::shared_ptr<JobSink> sink;

  // The cancellation token: set by the session (client gone, not reading,
  // deadline) or the daemon (shutdown); the engine checks it every step.
  std::atomic<bool> cancel{false};
  std::atomic<CancelReason> cancel_reason{CancelReason::kNone};

  // First reason wins; later ones do not overwrite it.
  void request_cancel(CancelReason reason) {
    CancelReason none = CancelReason::kNone;
    cancel_reason.compare_exchange_strong(none, reason);
    cancel.store(true, std::memory_order_release);
  }
  bool cancelled() const { return cancel.load(std::memory_order_acquire); }
};

}  // namespace minfer::daemon
