// A real minferd process for the integration tests: started in its own
// temporary directory (socket, log, notify socket), stderr captured to a
// file, stopped with a signal and reaped. Every wait has a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minfer::test {

using namespace std::chrono_literals;

std::string minferd_path();
std::string stories_model_path();
std::string test_data_path(const std::string& relative);  // tests/data/<relative>
// A whole file's bytes; "" when it cannot be read (a log not written yet).
std::string file_bytes(const std::string& path);

// A fresh directory under /tmp (short, so socket paths fit sun_path), removed
// with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct DaemonSpec {
  // The defaults every test wants: the shipped small model on the CPU with a
  // 256-token context and one engine thread (steady on a busy 2-core
  // machine), and the socket in the temp dir. An option in `args` replaces
  // its default; default_args=false drops them all.
  bool default_args = true;
  std::vector<std::string> args;  // appended
  // Environment additions; the value "$PID" becomes the child's pid (set in
  // the child after fork, as systemd does for LISTEN_PID/WATCHDOG_PID).
  std::vector<std::pair<std::string, std::string>> env;
  int activation_fd = -1;  // passed as fd 3 with LISTEN_FDS=1, LISTEN_PID=<child>
};

struct ExitStatus {
  bool exited = false;
  int code = -1;
  bool signaled = false;
  int signal = 0;
};

class DaemonProcess {
 public:
  DaemonProcess(const TempDir& dir, DaemonSpec spec);
  ~DaemonProcess();  // SIGKILL if still running

  pid_t pid() const { return pid_; }
  const std::string& socket() const { return socket_; }
  std::string log() const;  // everything it wrote to stdout/stderr so far

  // Polls GET /health until 200; false on exit or after the deadline.
  bool wait_ready(std::chrono::milliseconds timeout = 30s);
  // Waits for the process to end; nullopt after the deadline.
  std::optional<ExitStatus> wait_exit(std::chrono::milliseconds timeout = 30s);
  // Sends `signal` and waits for the end; SIGKILL and nullopt after the deadline.
  std::optional<ExitStatus> stop(int signal, std::chrono::milliseconds timeout = 30s);
  bool running();

 private:
  pid_t pid_ = -1;
  std::string socket_;
  std::string log_path_;
  std::optional<ExitStatus> status_;
};

// Polls until pred() or the deadline.
bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 20s);

}  // namespace minfer::test
