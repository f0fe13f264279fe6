#include "tests/daemon/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "tests/daemon/http_test_client.h"

extern char** environ;

namespace minfer::test {
using Clock = std::chrono::steady_clock;

std::string minferd_path() { return MINFERD_PATH; }
std::string test_data_path(const std::string& relative) { return std::string(MINFER_TEST_DATA_DIR) + "/" + relative; }
std::string stories_model_path() { return test_data_path("models/stories260K.gguf"); }

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/minferd-test-XXXXXX";
  if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

DaemonProcess::DaemonProcess(const TempDir& dir, DaemonSpec spec) : socket_(dir.file("minferd.sock")),
                                                                    log_path_(dir.file("minferd.log")) {
  std::vector<std::string> args = {minferd_path()};
  if (spec.default_args) {
    // Each default unless the test sets that option itself.
    const std::pair<std::string, std::string> defaults[] = {
        {"--backend", "cpu"}, {"--ctx-size", "256"}, {"--threads", "1"}, {"--model", stories_model_path()},
        {"--socket", socket_}};
    for (const auto& [name, value] : defaults) {
      if (std::find(spec.args.begin(), spec.args.end(), name) != spec.args.end()) continue;
      args.push_back(name);
      args.push_back(value);
    }
  }
  for (size_t i = 0; i + 1 < spec.args.size(); ++i) {
    if (spec.args[i] == "--socket") socket_ = spec.args[i + 1];
  }
  args.insert(args.end(), spec.args.begin(), spec.args.end());
  // Everything the child needs is prepared before fork, so that the child
  // only makes async-signal-safe calls (the test may run client threads).
  if (spec.activation_fd >= 0) {
    spec.env.emplace_back("LISTEN_FDS", "1");
    spec.env.emplace_back("LISTEN_PID", "$PID");
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& kv : spec.env) overridden = overridden || kv.first == key;
    if (!overridden) env.push_back(entry);
  }
  std::vector<size_t> pid_slots;  // entries whose value is the child's pid, filled in the child
  for (const auto& [k, v] : spec.env) {
    if (v == "$PID") {
      pid_slots.push_back(env.size());
      env.push_back(k + "=" + std::string(24, '\0'));
    } else {
      env.push_back(k + "=" + v);
    }
  }
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int log_fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

  pid_ = ::fork();
  if (pid_ != 0) {
    if (log_fd >= 0) ::close(log_fd);
    return;
  }
  // Child.
  if (log_fd >= 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
  }
  char digits[24];
  int n = 0;
  for (long v = ::getpid(); v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  for (size_t slot : pid_slots) {
    char* value = std::strchr(envp[slot], '=') + 1;
    for (int i = 0; i < n; ++i) value[i] = digits[n - 1 - i];
    value[n] = '\0';
  }
  if (spec.activation_fd >= 0) {
    if (spec.activation_fd != 3) {
      ::dup2(spec.activation_fd, 3);  // the copy does not inherit FD_CLOEXEC
    } else {
      ::fcntl(3, F_SETFD, 0);
    }
  }
  ::execve(argv[0], argv.data(), envp.data());
  ::_exit(127);
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

std::string DaemonProcess::log() const { return file_bytes(log_path_); }

bool DaemonProcess::running() {
  if (status_) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    ExitStatus e;
    e.exited = WIFEXITED(st);
    e.code = e.exited ? WEXITSTATUS(st) : -1;
    e.signaled = WIFSIGNALED(st);
    e.signal = e.signaled ? WTERMSIG(st) : 0;
    status_ = e;
    return false;
  }
  return true;
}

std::optional<ExitStatus> DaemonProcess::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (running()) {
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
  return status_;
}

std::optional<ExitStatus> DaemonProcess::stop(int signal, std::chrono::milliseconds timeout) {
  if (running()) ::kill(pid_, signal);
  auto st = wait_exit(timeout);
  if (!st && running()) {
    ::kill(pid_, SIGKILL);
    wait_exit(5s);
    return std::nullopt;
  }
  return st;
}

bool DaemonProcess::wait_ready(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (!running()) return false;
    if (http_request(socket_, "GET", "/health").status == 200) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace minfer::test
