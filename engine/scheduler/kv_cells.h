// Which KV cache cells are free and which sequence owns the rest. The cache
// rows themselves live in the backend ([cell][n_kv_heads * head_dim]); this is
// the bookkeeping that hands cells out, so that several sequences can share
// one cache (ARCHITECTURE.md rule 9).
#pragma once

#include <cstdint>
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
  explicit KvCells(int n_ctx);
  int n_ctx() const { return n_ctx_; }
  int n_free() const { return static_cast<int>(free_.size()); }

  // Takes n cells for `seq` (appended to seq.cells); an error when fewer are free.
  Status allocate(Sequence& seq, int n);
  // Drops the sequence's history after its first n tokens, freeing the cells.
  void truncate(Sequence& seq, int n);

 private:
  int n_ctx_;
  std::vector<int32_t> free_;  // a stack: the lowest cell on top
};

}  // namespace minfer
