#include <gtest/gtest.h>

#include <algorithm>

#include "engine/scheduler/kv_cells.h"

namespace minfer {
namespace {

TEST(KvCells, HandsOutLowestCellsFirstAndTakesThemBack) {
  KvCells cells(8);
  Sequence a;
  ASSERT_TRUE(cells.allocate(a, 3).has_value());
  EXPECT_EQ(a.cells, (std::vector<int32_t>{0, 1, 2}));
  Sequence b;
  ASSERT_TRUE(cells.allocate(b, 2).has_value());
  EXPECT_EQ(b.cells, (std::vector<int32_t>{3, 4}));
  a.tokens = {10, 11, 12};
  cells.truncate(a, 1);
  EXPECT_EQ(a.cells, (std::vector<int32_t>{0}));
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{10}));
  EXPECT_EQ(cells.n_free(), 5);
  ASSERT_TRUE(cells.allocate(a, 2).has_value());
  EXPECT_EQ(a.cells, (std::vector<int32_t>{0, 1, 2}));
}

TEST(KvCells, FullIsAnErrorWithTheCounts) {
  KvCells cells(4);
  Sequence s;
  ASSERT_TRUE(cells.allocate(s, 3).has_value());
  auto st = cells.allocate(s, 2);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(st.error().message, "KV cache full: 2 cells wanted, 1 of 4 free");
  EXPECT_EQ(s.cells.size(), 3u);
}

TEST(KvCells, SharedCellsAreFreeOnceNoSequenceHoldsThem) {
  KvCells cells(6);
  Sequence a;
  ASSERT_TRUE(cells.allocate(a, 4).has_value());
  a.tokens = {10, 11, 12, 13};
  Sequence b;
  cells.share(b, a, 3);
  EXPECT_EQ(b.tokens, (std::vector<int32_t>{10, 11, 12}));
  EXPECT_EQ(b.cells, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(cells.holders(0), 2);
  EXPECT_EQ(cells.holders(3), 1);
  ASSERT_TRUE(cells.allocate(b, 1).has_value());  // b's own fourth token: a fresh cell, never a's
  EXPECT_EQ(b.cells.back(), 4);
  cells.truncate(a, 0);
  EXPECT_EQ(cells.n_free(), 2);  // a's fourth cell; the three b holds stay
  EXPECT_EQ(cells.holders(0), 1);
  EXPECT_EQ(cells.holders(3), 0);
  cells.truncate(b, 1);
  EXPECT_EQ(cells.n_free(), 5);
  ASSERT_TRUE(cells.allocate(a, 5).has_value());
  std::sort(a.cells.begin(), a.cells.end());
  EXPECT_EQ(a.cells, (std::vector<int32_t>{1, 2, 3, 4, 5}));  // every free cell, b's one not
}

TEST(KvCells, AllocateReclaimsWhatIsMissingBeforeItFails) {
  KvCells cells(8);
  Sequence kept;
  ASSERT_TRUE(cells.allocate(kept, 6).has_value());
  std::vector<int> asked;
  int give_back = 0;  // cells each reclaim call frees
  cells.set_reclaim([&](int n_missing) {
    asked.push_back(n_missing);
    cells.truncate(kept, static_cast<int>(kept.cells.size()) - give_back);
  });
  Sequence s;
  give_back = 2;
  ASSERT_TRUE(cells.allocate(s, 2).has_value());
  EXPECT_TRUE(asked.empty());  // enough were free
  ASSERT_TRUE(cells.allocate(s, 2).has_value());
  EXPECT_EQ(asked, (std::vector<int>{2}));
  EXPECT_EQ(kept.cells.size(), 4u);
  EXPECT_EQ(s.cells, (std::vector<int32_t>{6, 7, 4, 5}));  // the cells given back
  give_back = 1;
  auto st = cells.allocate(s, 3);
  ASSERT_FALSE(st.has_value());
  EXPECT_EQ(asked, (std::vector<int>{2, 3}));
  EXPECT_EQ(st.error().message, "KV cache full: 3 cells wanted, 1 of 8 free");
  EXPECT_EQ(s.cells.size(), 4u);
}

}  // namespace
}  // namespace minfer
