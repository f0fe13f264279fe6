// A test fixture with one minferd for the whole suite: started before the
// first test, stopped (and required to exit 0) after the last. Under ctest
// each test runs in its own process, so each still gets a fresh daemon, but
// for the test programs registered a suite a process (minfer_add_test's
// ONE_PROCESS_A_SUITE), whose tests share it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/daemon/daemon_process.h"
#include "tests/daemon/http_test_client.h"

namespace minfer::test {

// Spec: a type with `static DaemonSpec spec()`.
template <class Spec>
class DaemonSuite : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    daemon_ = new DaemonProcess(*dir_, Spec::spec());
    ASSERT_TRUE(daemon_->wait_ready()) << daemon_->log();
  }
  static void TearDownTestSuite() {
    const auto st = daemon_->stop(SIGTERM);
    EXPECT_TRUE(st && st->exited && st->code == 0) << daemon_->log();
    delete daemon_;
    delete dir_;
    daemon_ = nullptr;
    dir_ = nullptr;
  }
  static const std::string& sock() { return daemon_->socket(); }
  // POSTs a JSON body, expects the status, returns the answer's JSON.
  static nlohmann::json post(const std::string& target, const nlohmann::json& body, int expected_status = 200) {
    const HttpResponse r = post_json(sock(), target, body);
    EXPECT_EQ(r.status, expected_status) << r.body;
    return r.json();
  }

  static inline TempDir* dir_ = nullptr;
  static inline DaemonProcess* daemon_ = nullptr;
};

}  // namespace minfer::test
