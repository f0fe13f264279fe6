// The CUDA engine under MINFER_DEVICE_SHAPE, through the `minfer` program (a
// shape is read once a process): a shape beyond the device, or one that
// does not parse, stops a run that demands CUDA with the setting named; shaped
// as Jetson Orin, greedy decoding gives the unshaped run's text.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "tests/gpu/gpu_test_util.h"

namespace minfer {
namespace {

struct CliRun {
  int status = -1;
  std::string out, err;
};

// `minfer generate` on stories260K with the CUDA backend demanded, greedy,
// under `env` (an env(1) argument: NAME=VALUE, or -u NAME).
CliRun generate(const std::string& env, int n = 32) {
  const std::string err_file = ::testing::TempDir() + "shaped_engine_test.err";
  const std::string cmd = "env " + env + " timeout 120 " + MINFER_PATH + " generate -m " + MINFER_TEST_DATA_DIR +
                          "/models/stories260K.gguf --backend cuda --temp 0 -n " + std::to_string(n) +
                          " -p 'Once upon a time' 2>" + err_file;
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, got);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (FILE* f = std::fopen(err_file.c_str(), "r")) {
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) r.err.append(buf, got);
    std::fclose(f);
  }
  return r;
}

TEST(ShapedEngine, AShapeBeyondTheDeviceOrNotParsingStopsTheRun) {
  MINFER_REQUIRE_GPU();
  const CliRun big = generate("MINFER_DEVICE_SHAPE=sms=1000000");
  EXPECT_NE(big.status, 0) << big.err;
  EXPECT_NE(big.err.find("MINFER_DEVICE_SHAPE 'custom' asks for sms 1000000"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("a shape can only be smaller than the device"), std::string::npos) << big.err;
  const CliRun newer = generate("MINFER_DEVICE_SHAPE=cc=99.9");
  EXPECT_NE(newer.status, 0) << newer.err;
  EXPECT_NE(newer.err.find("asks for cc 999"), std::string::npos) << newer.err;
  const CliRun bad = generate("MINFER_DEVICE_SHAPE=orin,bogus=1");
  EXPECT_NE(bad.status, 0) << bad.err;
  EXPECT_NE(bad.err.find("MINFER_DEVICE_SHAPE: unknown key 'bogus'"), std::string::npos) << bad.err;
}

TEST(ShapedEngine, ShapedAsOrinGreedyTextIsTheDevicesOwn) {
  MINFER_REQUIRE_GPU();
  const CliRun own = generate("-u MINFER_DEVICE_SHAPE");
  ASSERT_EQ(own.status, 0) << own.err;
  ASSERT_GT(own.out.size(), 40u) << own.out;
  EXPECT_EQ(own.err.find("shaped as"), std::string::npos) << own.err;
  for (const char* shape : {"orin", "orin,sms=4"}) {
    const CliRun shaped = generate(std::string("MINFER_DEVICE_SHAPE=") + shape);
    ASSERT_EQ(shaped.status, 0) << shape << ": " << shaped.err;
    EXPECT_EQ(shaped.out, own.out) << shape;
    EXPECT_NE(shaped.err.find("shaped as orin"), std::string::npos) << shaped.err;
    EXPECT_NE(shaped.err.find(std::string("sm_87, ") + (shape[4] == ',' ? "4" : "16") + " SMs"), std::string::npos)
        << shaped.err;
  }
}

}  // namespace
}  // namespace minfer
