// Request flow under pressure, against a real daemon: the bounded queue
// (503 + Retry-After), cancellation when a client disconnects (streaming or
// not) or never reads its stream, deadlines, the connection cap and idle
// timeouts. The config-only test hook --debug-token-delay-ms makes
// generations slow enough to act on mid-way without relying on timing luck.
#include <gtest/gtest.h>
#include <signal.h>

#include <memory>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"
#include "tests/daemon/prometheus_text.h"

namespace minfer::test {
namespace {

using Json = nlohmann::json;

constexpr const char* kGreedy27 = ", there was a little girl named Lily. She loved to play outside in the park.";
const char* const kClientGone = "minfer_cancellations_total{reason=\"client_gone\"}";

std::string stream_body(int max_tokens) {
  return Json{{"prompt", "Once upon a time"}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", true}}.dump();
}

// Counts the text chunks in a stream body so far.
size_t chunks(const std::string& body) {
  bool done = false;
  return sse_data(body, &done).size();
}

void expect_serves_reference(const std::string& sock) {
  const HttpResponse r = post_json(sock, "/v1/completions",
                                   {{"prompt", "Once upon a time"}, {"max_tokens", 27}, {"temperature", 0}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], kGreedy27);
}

struct Daemon {
  explicit Daemon(std::vector<std::string> args) : process(dir, DaemonSpec{true, std::move(args), {}, -1}) {
    ready = process.wait_ready();
  }
  ~Daemon() {
    const auto st = process.stop(SIGTERM);
    EXPECT_TRUE(st && st->exited && st->code == 0) << process.log();
  }
  const std::string& sock() const { return process.socket(); }
  TempDir dir;
  DaemonProcess process;
  bool ready = false;
};

TEST(DaemonFlow, FullQueueAnswers503WithRetryAfterAndCancelledWaitersFreeTheirPlace) {
  Daemon d({"--queue-size", "1", "--debug-token-delay-ms", "80"});
  ASSERT_TRUE(d.ready) << d.process.log();
  TestConnection running(d.sock());  // occupies the engine (200 tokens × 80 ms: 16 s, far longer than the test)
  ASSERT_TRUE(running.send(make_request("POST", "/v1/completions", stream_body(200))));
  ASSERT_TRUE(running.read_until([](const std::string& b) { return chunks(b) >= 1; }));
  TestConnection waiting(d.sock());  // takes the one place in the queue
  ASSERT_TRUE(waiting.send(make_request("POST", "/v1/completions", stream_body(10))));
  ASSERT_TRUE(eventually([&] { return scrape(d.sock(), "minfer_queue_depth") == 1; }));

  const HttpResponse full = post_json(d.sock(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  EXPECT_EQ(full.status, 503) << full.body;
  EXPECT_EQ(full.header("retry-after"), "1");
  EXPECT_EQ(full.json()["error"]["type"], "server_error");
  EXPECT_EQ(full.json()["error"]["code"], "queue_full");

  // The waiting client leaves: its place is free for the next request even
  // though the engine is still busy with the first. (Until the daemon has
  // seen the disconnect a probe still gets 503 at once; a queued probe gets
  // no answer while the engine is busy.)
  waiting.close();
  std::unique_ptr<TestConnection> probe;
  ASSERT_TRUE(eventually([&] {
    probe = std::make_unique<TestConnection>(d.sock());
    probe->send(make_request("POST", "/v1/completions", stream_body(2)));
    const auto r = probe->read_response(2s);
    return !r.has_value();
  }));
  EXPECT_TRUE(eventually([&] { return scrape(d.sock(), "minfer_queue_depth") == 1; }));
  EXPECT_TRUE(eventually([&] { return scrape(d.sock(), kClientGone) == 1; })) << "the leaver's job was dropped";
  probe.reset();
  running.close();
  ASSERT_TRUE(eventually([&] { return scrape(d.sock(), kClientGone) == 3; })) << d.process.log();
  expect_serves_reference(d.sock());
  EXPECT_GE(scrape(d.sock(), "minfer_requests_total{endpoint=\"/v1/completions\",status=\"503\"}"), 1);
}

TEST(DaemonFlow, DisconnectMidStreamCancelsWithinAStepAndTheNextRequestIsServed) {
  Daemon d({"--debug-token-delay-ms", "20"});
  ASSERT_TRUE(d.ready) << d.process.log();
  {
    TestConnection c(d.sock());
    ASSERT_TRUE(c.send(make_request("POST", "/v1/completions", stream_body(200))));
    ASSERT_TRUE(c.read_until([](const std::string& b) { return chunks(b) >= 3; }));
  }  // gone after 3 of 200 tokens
  ASSERT_TRUE(eventually([&] { return scrape(d.sock(), kClientGone) == 1; })) << d.process.log();
  // Cancelled early (within a decode step of the daemon noticing), not after 200 tokens.
  EXPECT_LT(scrape(d.sock(), "minfer_generated_tokens_total"), 100);
  EXPECT_EQ(scrape(d.sock(), "minfer_requests_total{endpoint=\"/v1/completions\",status=\"499\"}"), 1);
  expect_serves_reference(d.sock());
  const std::string log = d.process.log();
  EXPECT_NE(log.find("CANCEL_REASON=client_gone"), std::string::npos) << log;
  EXPECT_NE(log.find("FINISH_REASON=cancelled"), std::string::npos) << log;
}

TEST(DaemonFlow, DisconnectDuringANonStreamedGenerationCancelsIt) {
  Daemon d({"--debug-token-delay-ms", "20"});
  ASSERT_TRUE(d.ready) << d.process.log();
  {
    TestConnection c(d.sock());
    ASSERT_TRUE(c.send(make_request("POST", "/v1/completions",
                                    Json{{"prompt", "Once upon a time"}, {"max_tokens", 200}}.dump())));
    ASSERT_TRUE(eventually([&] { return scrape(d.sock(), "minfer_generated_tokens_total") >= 3; }));
  }
  ASSERT_TRUE(eventually([&] { return scrape(d.sock(), kClientGone) == 1; })) << d.process.log();
  EXPECT_LT(scrape(d.sock(), "minfer_generated_tokens_total"), 100);
  expect_serves_reference(d.sock());
}

TEST(DaemonFlow, AClientThatNeverReadsItsStreamIsCancelled) {
  // Small buffers: the kernel holds a few KB, the session 2 KB more; a
  // 250-token stream is ~50 KB.
  Daemon d({"--stream-buffer-bytes", "2048", "--send-buffer-bytes", "4096"});
  ASSERT_TRUE(d.ready) << d.process.log();
  TestConnection c(d.sock(), 4096);
  ASSERT_TRUE(c.send(make_request("POST", "/v1/completions", stream_body(250))));
  ASSERT_TRUE(eventually([&] { return scrape(d.sock(), "minfer_cancellations_total{reason=\"slow_reader\"}") == 1; }))
      << d.process.log();
  EXPECT_LT(scrape(d.sock(), "minfer_generated_tokens_total"), 250);
  EXPECT_TRUE(c.wait_closed(10s)) << "the daemon drops the connection";
  expect_serves_reference(d.sock());
}

TEST(DaemonFlow, ARequestPastItsDeadlineIs504) {
  Daemon d({"--request-timeout-ms", "400", "--debug-token-delay-ms", "50"});
  ASSERT_TRUE(d.ready) << d.process.log();
  const HttpResponse r = post_json(d.sock(), "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 200}});
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(r.json()["error"]["type"], "server_error");
  EXPECT_EQ(r.json()["error"]["code"], "deadline_exceeded");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("400 ms"), std::string::npos) << r.body;
  // Streaming: the head is out, so the error travels as an event before [DONE].
  const HttpResponse s = http_request(d.sock(), "POST", "/v1/completions", stream_body(200));
  ASSERT_EQ(s.status, 200);
  bool done = false;
  const auto events = sse_data(s.body, &done);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(done);
  EXPECT_EQ(Json::parse(events.back())["error"]["code"], "deadline_exceeded") << s.body;
  EXPECT_LT(scrape(d.sock(), "minfer_generated_tokens_total"), 60);
}

TEST(DaemonFlow, ConnectionsBeyondTheCapGet503AndAreClosed) {
  Daemon d({"--max-connections", "2"});
  ASSERT_TRUE(d.ready) << d.process.log();
  // Two connections that hold a session each: answered on keep-alive. (A
  // connection opened while the readiness probe's session is still winding
  // down may itself be refused; open another then.)
  auto open_session = [&]() -> std::unique_ptr<TestConnection> {
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto c = std::make_unique<TestConnection>(d.sock());
      c->send(make_request("GET", "/health", "", true));
      const auto r = c->read_response(10s);
      if (r && r->status == 200) return c;
    }
    return nullptr;
  };
  auto a = open_session();
  auto b = open_session();
  ASSERT_TRUE(a && b);
  TestConnection c(d.sock());
  c.send(make_request("GET", "/health"));
  const auto r = c.read_response(10s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->json()["error"]["code"], "too_many_connections");
  EXPECT_EQ(r->header("retry-after"), "1");
  EXPECT_TRUE(c.wait_closed(5s));
  a.reset();
  ASSERT_TRUE(eventually([&] { return http_request(d.sock(), "GET", "/health").status == 200; }));
  b.reset();
  EXPECT_TRUE(eventually([&] { return scrape(d.sock(), "minfer_connections_rejected_total") >= 1; }));
}

TEST(DaemonFlow, PipelinedRequestsBeyondTheCapWaitAndAreAllAnsweredInOrder) {
  // Reading pauses at 2 requests in hand and resumes as answers go out.
  Daemon d({"--max-pipelined", "2"});
  ASSERT_TRUE(d.ready) << d.process.log();
  TestConnection c(d.sock());
  std::string burst;
  for (int i = 0; i < 6; ++i) {
    burst += make_request("POST", "/v1/completions",
                          Json{{"prompt", "Once upon a time"}, {"max_tokens", 1 + i}, {"temperature", 0}}.dump(), true);
  }
  ASSERT_TRUE(c.send(burst));
  for (int i = 0; i < 6; ++i) {
    const auto r = c.read_response();
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->json()["usage"]["completion_tokens"], 1 + i) << "answers come in request order";
  }
}

TEST(DaemonFlow, IdleKeepAliveConnectionsAreClosed) {
  Daemon d({"--idle-timeout-ms", "300"});
  ASSERT_TRUE(d.ready) << d.process.log();
  TestConnection c(d.sock());
  ASSERT_TRUE(c.send(make_request("GET", "/health", "", true)));
  const auto r = c.read_response();
  ASSERT_TRUE(r && r->status == 200);
  EXPECT_TRUE(c.wait_closed(10s));
}

}  // namespace
}  // namespace minfer::test
