#include <gtest/gtest.h>

#include "engine/scheduler/stop_matcher.h"

namespace minfer {
namespace {

TEST(StopMatcher, HoldsBackAPossibleStartThenCuts) {
  StopMatcher m({"Hello"});
  EXPECT_EQ(m.push("say Hel"), "say ");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("lo world"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.push("more"), "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItDiverges) {
  StopMatcher m({"Hello"});
  EXPECT_EQ(m.push("He"), "");
  EXPECT_EQ(m.push("y!"), "Hey!");
  EXPECT_EQ(m.push("H"), "");
  EXPECT_EQ(m.flush(), "H");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo"});
  EXPECT_EQ(m.matched(), "");
  EXPECT_EQ(m.push("hello world"), "hel");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "lo");
  // Two that end at the same cut: the first listed is the one named.
  StopMatcher tie({"ab", "a"});
  EXPECT_EQ(tie.push("xab"), "x");
  EXPECT_EQ(tie.matched(), "ab");
}

TEST(StopMatcher, MultibyteStopStringsCutOnCharacterBoundaries) {
  StopMatcher m({"\xE4\xBD\xA0\xE5\xA5\xBD"});  // 你好
  EXPECT_EQ(m.push("a\xE4\xBD\xA0"), "a");   // 你 may start 你好
  EXPECT_EQ(m.push("\xE5\xA5\xBD!"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NoStopsPassesEverything) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
}

}  // namespace
}  // namespace minfer
