#include <gtest/gtest.h>

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

}  // namespace
}  // namespace minfer
