// Which KV cache cells are free and which sequences hold the rest. The cache
// rows themselves live in the backend ([cell][n_kv_heads * head_dim]); this is
// the bookkeeping that hands cells out, so that several sequences can share
// one cache (ARCHITECTURE.md rule 9) — and share cells: a cell holds one
// token's K/V at one position, the same for every sequence whose history
// starts with the same tokens, so sequences with a common prefix may hold the
// same cells for it (the prefix cache, prefix_cache.h). A cell is free once
// no sequence holds it. Held cells are never written again: a sequence
// writes only the cells allocate() hands it.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/common/expected.h"

namespace minfer {

// One sequence's history: the tokens evaluated so far and the cell holding
// each one's K/V (token i is at position i).
struct Sequence {
  std::vector<int32_t> tokens;
  std::vector<int32_t> cells;
  int n_past() const { return static_cast<int>(tokens.size()); }
};

class KvCells {
 public:
  explicit KvCells(int n_cells);
  int n_cells() const { return n_cells_; }
  int n_free() const { return static_cast<int>(free_.size()); }

  // What allocate() calls when fewer than the cells it wants are free, with
  // the number missing: something that holds cells it can do without (the
  // prefix cache's kept histories) gives some back. Empty: nothing does.
  using Reclaim = std::function<void(int n_missing)>;
  void set_reclaim(Reclaim reclaim) { reclaim_ = std::move(reclaim); }

  // Takes n free cells for `seq` (appended to seq.cells); an error when
  // fewer are free, after reclaiming.
  Status allocate(Sequence& seq, int n);
  // Drops the sequence's history after its first n tokens; a cell no other
  // sequence holds is free again.
  void truncate(Sequence& seq, int n);
  // `dst`, empty, takes `src`'s first n tokens and their cells, which both
  // then hold (n at most src's cells).
  void share(Sequence& dst, const Sequence& src, int n);
  // How many sequences hold `cell` (0: free).
  int holders(int32_t cell) const { return holders_[static_cast<size_t>(cell)]; }

 private:
  int n_cells_;
  std::vector<int32_t> free_;     // a stack; at first the lowest cell on top
  std::vector<int32_t> holders_;  // [n_cells]
  Reclaim reclaim_;
};

}  // namespace minfer
