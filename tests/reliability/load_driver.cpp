#include "tests/reliability/load_driver.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "tests/daemon/http_test_client.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// `twice`: the prompt twice in one request (OpenAI's batch form), whose two
// choices are then the job's text each, one after the other.
Json body(const LoadJob& job, int max_tokens, bool stream, bool twice = false) {
  Json b = {{"prompt", job.prompt}, {"max_tokens", max_tokens}, {"temperature", 0.9}, {"seed", job.seed}};
  if (twice) b["prompt"] = {job.prompt, job.prompt};
  if (stream) b["stream"] = true;
  return b;
}

// The text of the streamed chunks so far; *error_event when a chunk is an error.
std::string stream_text(const std::string& sse, bool* done, bool* error_event) {
  std::string text;
  for (const std::string& e : sse_data(sse, done)) {
    const Json j = Json::parse(e, nullptr, false);
    if (!j.is_object() || j.contains("error")) {
      *error_event = true;
      continue;
    }
    if (!j["choices"].empty()) text += j["choices"][0].value("text", "");  // choices come one after another
  }
  return text;
}

enum class Kind { kPlain, kStream, kCancel, kDrop };

// Returns true when the daemon answered 503 (the caller backs off).
bool one_request(const std::string& socket, const LoadJob& job, Kind kind, bool twice, LoadTally* t) {
  ++t->sent;
  TestConnection c(socket);
  const bool stream = kind != Kind::kPlain;
  const int max_tokens = kind == Kind::kCancel || kind == Kind::kDrop ? kLoadCancelMaxTokens : kLoadMaxTokens;
  // The text the answer must be: the job's, or twice the job's for the
  // prompt twice (a cut stream a prefix of it).
  const std::string expected = twice ? job.text + job.text : job.text;
  if (!c.connected() || !c.send(make_request("POST", "/v1/completions", body(job, max_tokens, stream, twice).dump()))) {
    ++t->no_answer;
    t->fail("connect or send failed");
    return false;
  }
  if (kind == Kind::kDrop) {
    ++t->dropped;
    return false;  // closed here, before any answer
  }
  if (kind == Kind::kCancel) {
    // Two chunks, then gone. A 503 is a complete answer that never streams.
    size_t n = 0;
    const bool got = c.read_until(
        [&](const std::string& b) {
          bool done = false;
          n = sse_data(b, &done).size();
          return n >= 2;
        },
        60s);
    if (got) {
      bool done = false, error_event = false;
      const std::string so_far = stream_text(c.partial_body(), &done, &error_event);
      const size_t m = std::min(so_far.size(), job.text.size());
      if (error_event || so_far.compare(0, m, job.text, 0, m) != 0) {
        ++t->mismatched;
        t->fail(fmt::format("cancel: stream '{}' is not a prefix of job text '{}'", so_far, job.text));
      }
      if (twice) ++t->twice_answered;
      ++t->cancelled;
      return false;
    }
    if (c.partial_status() == 503) {
      ++t->rejected_503;
      return true;
    } else if (c.partial_status() == 0) {
      ++t->no_answer;
      t->fail("cancel: no answer");
    } else {
      ++t->other_status;
      t->fail(fmt::format("cancel: status {} body {}", c.partial_status(), c.partial_body().substr(0, 200)));
    }
    return false;
  }
  const auto r = c.read_response(60s);
  if (!r) {
    ++t->no_answer;
    t->fail(kind == Kind::kPlain ? "plain: no answer" : "stream: no answer");
    return false;
  }
  if (r->status == 503) {
    ++t->rejected_503;
    return true;
  }
  if (r->status != 200) {
    ++t->other_status;
    t->fail(fmt::format("status {}: {}", r->status, r->body.substr(0, 200)));
    return false;
  }
  std::string text;
  bool complete = true;
  if (kind == Kind::kPlain) {
    const Json j = r->json();
    if (j.is_object() && j["choices"].size() == (twice ? 2u : 1u)) {
      for (size_t k = 0; k < j["choices"].size(); ++k) {
        if (j["choices"][k]["index"] == k) text += j["choices"][k].value("text", "");
      }
    }
  } else {
    bool error_event = false;
    text = stream_text(r->body, &complete, &error_event);
    complete = complete && !error_event;
  }
  if (!complete || text != expected) {
    ++t->mismatched;
    t->fail(fmt::format("{}: '{}' is not the job's text '{}'", kind == Kind::kPlain ? "plain" : "stream", text,
                        expected));
    return false;
  }
  ++(kind == Kind::kPlain ? t->plain_ok : t->stream_ok);
  if (twice) ++t->twice_answered;
  return false;
}

}  // namespace

void LoadTally::fail(const std::string& what) {
  std::lock_guard lock(mutex);
  if (failures.size() < 10) failures.push_back(what);
}

std::string LoadTally::summary() const {
  return fmt::format(
      "sent {}: plain ok {}, stream ok {}, 503 {}, cancelled mid-stream {}, dropped before an answer {}, "
      "mismatched {}, other status {}, no answer {}; the prompt twice: {} answered",
      sent.load(), plain_ok.load(), stream_ok.load(), rejected_503.load(), cancelled.load(), dropped.load(),
      mismatched.load(), other_status.load(), no_answer.load(), twice_answered.load());
}

std::vector<LoadJob> make_load_jobs(const std::string& socket, int n_jobs, std::string* error) {
  static const char* const kPrompts[] = {"Once upon a time", "The little dog", "One day, a girl", "Tom and Sue",
                                         "The sun was", "In the park", "A big red ball", "Mom said"};
  std::vector<LoadJob> jobs;
  for (int i = 0; i < n_jobs; ++i) {
    LoadJob job{kPrompts[i % 8], 1000u + static_cast<uint64_t>(i), ""};
    const HttpResponse r = post_json(socket, "/v1/completions", body(job, kLoadMaxTokens, false));
    const Json j = r.json();
    if (r.status != 200 || !j.is_object()) {
      *error = fmt::format("reference request {}: status {} {}", i, r.status, r.body);
      return {};
    }
    // Each job must run to its token limit: a cancel request for it then
    // surely outlives its first chunks.
    if (j["choices"][0]["finish_reason"] != "length") {
      *error = fmt::format("reference request {} stopped early ({}); choose another seed", i, j.dump());
      return {};
    }
    job.text = j["choices"][0]["text"].get<std::string>();
    jobs.push_back(job);
  }
  for (size_t a = 0; a < jobs.size(); ++a) {
    for (size_t b = a + 1; b < jobs.size(); ++b) {
      if (jobs[a].text == jobs[b].text) {
        *error = fmt::format("jobs {} and {} have the same text; a mix-up between them would not show", a, b);
        return {};
      }
    }
  }
  return jobs;
}

void run_load(const std::string& socket, const std::vector<LoadJob>& jobs, int clients, int requests_per_client,
              Clock::time_point until, const LoadMix& mix, int max_pause_ms, uint64_t seed, LoadTally* tally) {
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back([&, c] {
      std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(c));
      std::discrete_distribution<int> kinds({double(mix.plain), double(mix.stream), double(mix.cancel),
                                             double(mix.drop)});
      std::uniform_int_distribution<size_t> pick(0, jobs.size() - 1);
      std::uniform_int_distribution<int> pause(0, std::max(0, max_pause_ms));
      std::uniform_int_distribution<int> backoff(100, 400);
      std::uniform_int_distribution<int> twice(0, 99);
      for (int i = 0; (requests_per_client == 0 || i < requests_per_client) && Clock::now() < until; ++i) {
        const Kind kind = static_cast<Kind>(kinds(rng));
        const bool rejected = one_request(socket, jobs[pick(rng)], kind, twice(rng) < mix.twice_percent, tally);
        // After a 503 a client waits as Retry-After asks (shortened here: 0.1-0.4 s, not 1 s).
        std::this_thread::sleep_for(std::chrono::milliseconds(pause(rng) + (rejected ? backoff(rng) : 0)));
      }
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace minfer::test
