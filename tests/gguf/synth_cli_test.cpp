// The `minfer synth` and `minfer gguf info` commands, run as a user would:
// a full-size Qwen2.5-0.5B at Q8_0 (~500 MB, written to a temp dir and
// deleted) must be readable by `gguf info`.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <string>

namespace {

const std::string kMinfer = std::string(MINFER_BUILD_DIR) + "/daemon/minfer";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult run(const std::string& args) {
  CommandResult r;
  std::FILE* p = ::popen((kMinfer + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(SynthCli, FullSizeQwen25HalfBQ80IsReadableByGgufInfo) {
  const std::string path = ::testing::TempDir() + "/synth_cli_qwen2.5-0.5b-q8_0.gguf";
  // What any `minfer` command holds before it does anything (~220 MiB in a
  // CUDA build on a machine without a GPU: the CUDA runtime's start-up;
  // ~6 MiB without CUDA). RUSAGE_CHILDREN keeps the largest child's peak,
  // so this is read before synth runs.
  ASSERT_EQ(run("version").exit_code, 0);
  struct rusage base {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &base), 0);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult synth = run("synth --preset qwen2.5-0.5b --type q8_0 -o " + path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  EXPECT_TRUE(contains(synth.output, "wrote " + path)) << synth.output;
  std::printf("synth qwen2.5-0.5b q8_0: %.1f s\n", seconds);
  // Tensors are generated while written: the peak is about the largest
  // tensor (token_embd, 138 MiB) over the program's own base, not the
  // 504 MiB file. (Measured: base + 125 MiB with CUDA, 2-core x86-64.)
  struct rusage usage {};
  ASSERT_EQ(::getrusage(RUSAGE_CHILDREN, &usage), 0);
  EXPECT_LT(usage.ru_maxrss - base.ru_maxrss, 300 * 1024 - 20 * 1024)
      << "peak resident KiB of `minfer synth` " << usage.ru_maxrss << " over the base of `minfer version` "
      << base.ru_maxrss;

  const CommandResult info = run("gguf info " + path);
  std::remove(path.c_str());
  ASSERT_EQ(info.exit_code, 0) << info.output.substr(0, 2000);
  EXPECT_TRUE(contains(info.output, "qwen2.block_count")) << info.output.substr(0, 2000);
  EXPECT_TRUE(contains(info.output, "u32 = 24")) << info.output.substr(0, 2000);
  EXPECT_TRUE(contains(info.output, "array of string (151936 items)"));
  EXPECT_TRUE(contains(info.output, "\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\""));
  EXPECT_TRUE(contains(info.output, "token_embd.weight"));
  EXPECT_TRUE(contains(info.output, "[896, 151936]"));
  // 24 blocks x 12 tensors + token_embd + output_norm; the matrices are Q8_0
  // (7 per block + token_embd), norms and biases F32 (5 per block + output_norm).
  EXPECT_TRUE(contains(info.output, "total: 290 tensors")) << info.output.substr(info.output.size() - 600);
  EXPECT_TRUE(contains(info.output, "q8_0     169 tensors")) << info.output.substr(info.output.size() - 600);
  EXPECT_TRUE(contains(info.output, "f32      121 tensors")) << info.output.substr(info.output.size() - 600);
}

TEST(SynthCli, BadArgumentsExitWithUsage) {
  const CommandResult unknown = run("synth --preset nope -o /tmp/x.gguf");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.output, "unknown preset 'nope'; known: qwen2.5-0.5b")) << unknown.output;
  const CommandResult type = run("synth --preset qwen2.5-0.5b --type q4_k -o /tmp/never-written.gguf");
  EXPECT_EQ(type.exit_code, 2);
  EXPECT_TRUE(contains(type.output, "not a multiple of q4_K's block of 256")) << type.output;
  const CommandResult missing = run("gguf info /nonexistent.gguf");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.output, "/nonexistent.gguf: cannot open")) << missing.output;
  const CommandResult help = run("gguf --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.output, "usage: minfer gguf info FILE")) << help.output;
}

TEST(SynthCli, GgufInfoOnStories260K) {
  const CommandResult info = run("gguf info " + std::string(MINFER_TEST_DATA_DIR) + "/models/stories260K.gguf");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  EXPECT_TRUE(contains(info.output, "data offset: 14176")) << info.output;
  EXPECT_TRUE(contains(info.output, "alignment:   32 (default)")) << info.output;
  EXPECT_TRUE(contains(info.output, "metadata: 19 keys")) << info.output;
  EXPECT_TRUE(contains(info.output, "[0, 0, 0, 0, 0, 0, 0, 0, ..., -250, -251, -252] (512 items)")) << info.output;
  EXPECT_TRUE(contains(info.output, "blk.0.ffn_gate.weight")) << info.output;
  EXPECT_TRUE(contains(info.output, "total: 48 tensors, 292800 elements, 1171200 bytes")) << info.output;
}

}  // namespace
