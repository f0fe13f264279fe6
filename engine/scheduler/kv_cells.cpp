#include "engine/scheduler/kv_cells.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace minfer {

KvCells::KvCells(int n_cells) : n_cells_(n_cells), holders_(static_cast<size_t>(n_cells), 0) {
  free_.reserve(static_cast<size_t>(n_cells));
  for (int c = n_cells - 1; c >= 0; --c) free_.push_back(c);
}

Status KvCells::allocate(Sequence& seq, int n) {
  if (n > n_free() && reclaim_) reclaim_(n - n_free());
  if (n > n_free()) {
    return unexpected(ErrorCode::kOutOfRange,
                      fmt::format("KV cache full: {} cells wanted, {} of {} free", n, n_free(), n_cells_));
  }
  for (int i = 0; i < n; ++i) {
    const int32_t cell = free_.back();
    free_.pop_back();
    holders_[static_cast<size_t>(cell)] = 1;
    seq.cells.push_back(cell);
  }
  return ok_status();
}

void KvCells::truncate(Sequence& seq, int n) {
  n = std::max(n, 0);
  // Last to first, so that a sequence's cells come back in the order they
  // were handed out.
  for (size_t i = seq.cells.size(); i > static_cast<size_t>(n); --i) {
    const int32_t cell = seq.cells[i - 1];
    assert(holders_[static_cast<size_t>(cell)] > 0);
    if (--holders_[static_cast<size_t>(cell)] == 0) free_.push_back(cell);
  }
  if (seq.cells.size() > static_cast<size_t>(n)) seq.cells.resize(static_cast<size_t>(n));
  if (seq.tokens.size() > static_cast<size_t>(n)) seq.tokens.resize(static_cast<size_t>(n));
}

void KvCells::share(Sequence& dst, const Sequence& src, int n) {
  assert(dst.cells.empty() && dst.tokens.empty());
  assert(n >= 0 && static_cast<size_t>(n) <= src.cells.size() && static_cast<size_t>(n) <= src.tokens.size());
  dst.tokens.assign(src.tokens.begin(), src.tokens.begin() + n);
  dst.cells.assign(src.cells.begin(), src.cells.begin() + n);
  for (const int32_t cell : dst.cells) ++holders_[static_cast<size_t>(cell)];
}

}  // namespace minfer
