#include "engine/scheduler/kv_cells.h"

#include <fmt/format.h>

namespace minfer {

KvCells::KvCells(int n_ctx) : n_ctx_(n_ctx) {
  free_.reserve(static_cast<size_t>(n_ctx));
  for (int c = n_ctx - 1; c >= 0; --c) free_.push_back(c);
}

Status KvCells::allocate(Sequence& seq, int n) {
  if (n > n_free()) {
    return unexpected(ErrorCode::kOutOfRange,
                      fmt::format("KV cache full: {} cells wanted, {} of {} free", n, n_free(), n_ctx_));
  }
  for (int i = 0; i < n; ++i) {
    seq.cells.push_back(free_.back());
    free_.pop_back();
  }
  return ok_status();
}

void KvCells::truncate(Sequence& seq, int n) {
  if (n >= static_cast<int>(seq.cells.size())) {
    if (n < static_cast<int>(seq.tokens.size())) seq.tokens.resize(static_cast<size_t>(n));
    return;
  }
  for (size_t i = seq.cells.size(); i > static_cast<size_t>(n); --i) free_.push_back(seq.cells[i - 1]);
  seq.cells.resize(static_cast<size_t>(n));
  if (seq.tokens.size() > static_cast<size_t>(n)) seq.tokens.resize(static_cast<size_t>(n));
}

}  // namespace minfer
