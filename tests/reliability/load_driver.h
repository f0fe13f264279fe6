// The mixed workload of the load-with-cancellations test and the soak tool:
// N client threads against a real minferd, each request on its own
// connection, of four kinds (each sometimes with the prompt twice, as two
// prompts of one request):
//   plain     non-streamed completion, read whole
//   stream    streamed completion, read to [DONE]
//   cancel    streamed long completion, dropped after its first chunks
//   drop      sent, then the connection closed before any answer
// Every job has a known text (computed before the load, one request at a
// time): a completed answer must be exactly its own job's text, and a
// cancelled stream's chunks a prefix of it, so a response mixed with another
// request's tokens cannot pass. Outcomes are tallied per kind for the caller
// to compare with the daemon's /metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace minfer::test {

struct LoadJob {
  std::string prompt;
  uint64_t seed = 0;
  std::string text;  // the reference completion of kLoadMaxTokens tokens
};

// Each job: temperature 0.9 with its own seed, kLoadMaxTokens tokens.
inline constexpr int kLoadMaxTokens = 12;
// A cancel request asks for this many (far more than it waits for).
inline constexpr int kLoadCancelMaxTokens = 200;

// Computes each job's reference text, one request at a time. Empty on failure
// (with the reason in *error).
std::vector<LoadJob> make_load_jobs(const std::string& socket, int n_jobs, std::string* error);

struct LoadMix {
  int plain = 40, stream = 35, cancel = 15, drop = 10;  // weights
  // Of every kind, this share (%) sends the job's prompt twice in one
  // request (two prompts: two choices, each the job's text).
  int twice_percent = 20;
};

struct LoadTally {
  std::atomic<long> sent{0};
  std::atomic<long> plain_ok{0}, stream_ok{0};
  std::atomic<long> rejected_503{0};   // queue_full (or too_many_connections) answers
  std::atomic<long> cancelled{0};      // cancel requests dropped mid-stream after >= 2 chunks
  std::atomic<long> dropped{0};        // drop requests (the daemon decides: 503 or 499)
  std::atomic<long> mismatched{0};     // a text that is not its job's
  std::atomic<long> other_status{0};   // any other status, e.g. 500 or 504
  std::atomic<long> no_answer{0};      // connect failure, close or timeout before an answer
  std::atomic<long> twice_answered{0};  // of plain_ok, stream_ok and cancelled: the prompt twice
  std::mutex mutex;
  std::vector<std::string> failures;   // the first few, for the report

  long answered() const { return plain_ok + stream_ok + rejected_503 + cancelled + other_status; }
  void fail(const std::string& what);
  std::string summary() const;
};

// Runs `clients` threads until each has sent `requests_per_client` requests
// (0: no count limit) or `until` passes. Between requests a client pauses
// 0..max_pause_ms (uniform, seeded).
void run_load(const std::string& socket, const std::vector<LoadJob>& jobs, int clients, int requests_per_client,
              std::chrono::steady_clock::time_point until, const LoadMix& mix, int max_pause_ms, uint64_t seed,
              LoadTally* tally);

}  // namespace minfer::test
