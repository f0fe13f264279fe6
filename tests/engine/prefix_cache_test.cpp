// The prefix cache's bookkeeping: which kept history a prompt reuses, which
// histories keeping one drops, and which cells go back when a request needs
// them. The engine's end-to-end behaviour (the same tokens as without the
// cache) is EnginePrefixCache.* in stories_e2e_test.cpp.
#include <gtest/gtest.h>

#include "engine/scheduler/prefix_cache.h"

namespace minfer {
namespace {

// A history of `tokens` evaluated into fresh cells.
Sequence evaluated(KvCells& cells, std::vector<int32_t> tokens) {
  Sequence s;
  EXPECT_TRUE(cells.allocate(s, static_cast<int>(tokens.size())).has_value());
  s.tokens = std::move(tokens);
  return s;
}

// A request's history: the longest kept prefix (at most all prompt tokens
// but the last), then the rest evaluated into fresh cells. Returns the
// reused length through `reused`.
Sequence request(KvCells& cells, PrefixCache& cache, const std::vector<int32_t>& prompt, int* reused) {
  Sequence s;
  *reused = cache.reuse(s, prompt, prompt.size() - 1);
  const size_t n = static_cast<size_t>(*reused);
  EXPECT_TRUE(cells.allocate(s, static_cast<int>(prompt.size() - n)).has_value());
  s.tokens.insert(s.tokens.end(), prompt.begin() + static_cast<std::ptrdiff_t>(n), prompt.end());
  return s;
}

TEST(PrefixCache, APromptReusesTheKeptHistoryWithTheLongestCommonPrefix) {
  KvCells cells(64);
  PrefixCache cache(cells, 8);
  Sequence a = evaluated(cells, {1, 2, 3, 4, 5});
  cache.keep(a);
  cells.truncate(a, 0);
  int reused = 0;
  Sequence b = request(cells, cache, {1, 2, 9, 9}, &reused);
  EXPECT_EQ(reused, 2);
  cache.keep(b);
  cells.truncate(b, 0);
  EXPECT_EQ(cache.n_entries(), 2);

  Sequence s;
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{1, 2, 3, 7}, 3), 3);
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(s.cells, (std::vector<int32_t>{0, 1, 2}));  // a's first three
  EXPECT_EQ(cells.holders(0), 3);                        // a, b and s
  cells.truncate(s, 0);
  // At most `limit` tokens, even where a history holds the whole prompt.
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{1, 2, 3, 4, 5}, 4), 4);
  cells.truncate(s, 0);
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{1, 2, 9, 9, 9}, 4), 4);
  EXPECT_EQ(s.cells, (std::vector<int32_t>{0, 1, 5, 6}));  // b's: the shared two, then its own
  cells.truncate(s, 0);
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{7, 1, 2}, 2), 0);
  EXPECT_TRUE(s.cells.empty());
  EXPECT_EQ(cache.n_cells_only_kept(), 7);
  EXPECT_EQ(cells.n_free(), 64 - 7);
}

TEST(PrefixCache, KeepingAHistoryDropsTheKeptOnesItStartsWith) {
  KvCells cells(64);
  PrefixCache cache(cells, 8);
  int reused = 0;
  Sequence turn1 = request(cells, cache, {1, 2, 3}, &reused);
  EXPECT_EQ(reused, 0);
  turn1.tokens.push_back(4);  // a generated token, evaluated
  ASSERT_TRUE(cells.allocate(turn1, 1).has_value());
  cache.keep(turn1);
  cells.truncate(turn1, 0);
  // The next turn: the whole conversation so far, and more.
  Sequence turn2 = request(cells, cache, {1, 2, 3, 4, 5, 6}, &reused);
  EXPECT_EQ(reused, 4);
  cache.keep(turn2);
  cells.truncate(turn2, 0);
  EXPECT_EQ(cache.n_entries(), 1);  // turn 1's history is turn 2's start
  EXPECT_EQ(cache.n_cells_only_kept(), 6);
  // A history that starts a kept one adds nothing.
  Sequence again = request(cells, cache, {1, 2, 3}, &reused);
  EXPECT_EQ(reused, 2);
  cache.keep(again);
  cells.truncate(again, 0);
  EXPECT_EQ(cache.n_entries(), 1);
  EXPECT_EQ(cells.n_free(), 64 - 6);  // the third token's fresh cell went back
  cache.clear();
  EXPECT_EQ(cells.n_free(), 64);
}

TEST(PrefixCache, BeyondItsEntriesTheLeastRecentlyUsedGoes) {
  KvCells cells(64);
  PrefixCache cache(cells, 2);
  for (int32_t first : {10, 20}) {
    Sequence s = evaluated(cells, {first, 1, 2});
    cache.keep(s);
    cells.truncate(s, 0);
  }
  Sequence s;
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{10, 1, 2, 3}, 3), 3);  // 10's is now the more recent
  cells.truncate(s, 0);
  Sequence third = evaluated(cells, {30, 1, 2});
  cache.keep(third);
  cells.truncate(third, 0);
  EXPECT_EQ(cache.n_entries(), 2);
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{20, 1, 2, 3}, 3), 0) << "20's went";
  EXPECT_EQ(cache.reuse(s, std::vector<int32_t>{10, 1, 2, 3}, 3), 3);
  cells.truncate(s, 0);
  EXPECT_EQ(cells.n_free(), 64 - 6);
  PrefixCache none(cells, 0);  // keeps nothing
  Sequence t = evaluated(cells, {40, 1});
  none.keep(t);
  EXPECT_EQ(none.n_entries(), 0);
}

TEST(PrefixCache, ARequestShortOfCellsTakesTheOldestHistoriesLastCellsFirst) {
  KvCells cells(16);
  PrefixCache cache(cells, 8);
  // Three histories of 4 cells, sharing their first 2 (a system prompt).
  Sequence first = evaluated(cells, {1, 2, 10, 11});
  cache.keep(first);
  cells.truncate(first, 0);
  int reused = 0;
  for (int32_t t : {20, 30}) {
    Sequence s = request(cells, cache, {1, 2, t, t + 1, t + 2}, &reused);
    EXPECT_EQ(reused, 2);
    cells.truncate(s, 4);  // its history: four tokens
    cache.keep(s);
    cells.truncate(s, 0);
  }
  EXPECT_EQ(cache.n_entries(), 3);
  EXPECT_EQ(cells.n_free(), 16 - 8);
  // A request from the second history's start (which makes it the most
  // recently used), then short of cells.
  Sequence s = request(cells, cache, {1, 2, 20, 21, 99}, &reused);
  EXPECT_EQ(reused, 4);
  EXPECT_EQ(cells.n_free(), 16 - 9);
  ASSERT_TRUE(cells.allocate(s, 3).has_value());  // 3 of 7 free: nothing given back
  EXPECT_EQ(cache.n_entries(), 3);
  ASSERT_TRUE(cells.allocate(s, 5).has_value());  // 4 free: the oldest history's last cell
  EXPECT_EQ(cache.n_entries(), 3);
  EXPECT_EQ(cells.n_free(), 0);
  // Two short: the oldest's last own cell (down to the shared start, which
  // makes it redundant: dropped), then the next oldest's last.
  ASSERT_TRUE(cells.allocate(s, 2).has_value());
  EXPECT_EQ(cache.n_entries(), 2);
  Sequence probe;
  EXPECT_EQ(cache.reuse(probe, std::vector<int32_t>{1, 2, 10, 11, 5}, 4), 2) << "the first history went";
  cells.truncate(probe, 0);
  EXPECT_EQ(cache.reuse(probe, std::vector<int32_t>{1, 2, 30, 31, 5}, 4), 3) << "the third kept 3 tokens";
  cells.truncate(probe, 0);
  EXPECT_EQ(cells.n_free(), 0);
  // Histories whose cells the running request holds free none: the cache
  // gives up what it has (the third's last own cell) and the request is
  // refused with the counts.
  auto st = cells.allocate(s, 2);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, "KV cache full: 2 cells wanted, 1 of 16 free");
  cells.truncate(s, 0);
  cache.clear();
  EXPECT_EQ(cells.n_free(), 16);
}

}  // namespace
}  // namespace minfer
