// A test fixture with one minferd for the whole suite: started before the
// first test, stopped (and required to exit 0) after the last. Under ctest
// each test runs in its own process, so each still gets a fresh daemon.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include "tests/daemon/daemon_process.h"

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

  static inline TempDir* dir_ = nullptr;
  static inline DaemonProcess* daemon_ = nullptr;
};

}  // namespace minfer::test
