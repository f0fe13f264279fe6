// Histories of earlier requests kept in the KV cache, so that a request whose
// prompt starts as one of them did evaluates only the rest: a chat's next
// turn, or a second conversation (another client, an agent's other prompt)
// after the first's turn, or a shared system prompt. A kept history holds
// its cells (KvCells::share) until a request needs them: when too few cells
// are free, the least recently used histories give up their last cells
// first, then whole histories go (KvCells::Reclaim). Histories sharing a
// prefix share its cells, so the cache costs no cell a request could not
// have.
//
// What it leaves out: cells are reused only as a prefix of the same
// positions (no shifted or spliced context).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/scheduler/kv_cells.h"

namespace minfer {

class PrefixCache {
 public:
  // Keeps at most `max_entries` histories (0: none) in `cells`, which must
  // outlive it; it reclaims their cells for `cells`' allocations.
  PrefixCache(KvCells& cells, int max_entries);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // `seq` (empty) becomes the longest prefix of `tokens`, at most `limit`
  // tokens, that a kept history starts with, holding that history's cells
  // (the history stays kept and counts as just used). Returns its length.
  int reuse(Sequence& seq, std::span<const int32_t> tokens, size_t limit);
  // Keeps `seq`'s history (its evaluated tokens) for later requests, holding
  // its cells: the most recently used. Kept histories it starts with are
  // dropped (it holds all they do); if it is the start of a kept one, that
  // one counts as just used instead. Beyond max_entries the least recently
  // used one goes.
  void keep(const Sequence& seq);
  // Drops every kept history.
  void clear();

  int n_entries() const { return static_cast<int>(entries_.size()); }
  // Cells the kept histories hold that no running sequence does: what
  // reclaiming can free.
  int n_cells_only_kept() const;

 private:
  struct Entry {
    Sequence seq;
    uint64_t last_use = 0;
  };
  // Frees at least n_missing cells if the histories can: their last cells,
  // least recently used first, then whole histories.
  void reclaim(int n_missing);
  // Drops the least recently used history; false when none is kept.
  bool drop_oldest();
  void drop(size_t i);

  KvCells& cells_;
  int max_entries_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace minfer
