#include "engine/scheduler/prefix_cache.h"

#include <algorithm>
#include <vector>

namespace minfer {
namespace {

// How many of the first `limit` tokens of `a` and `b` agree.
size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b, size_t limit) {
  const size_t n = std::min({a.size(), b.size(), limit});
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first -
                             a.begin());
}

// Whether `whole` starts with `start` (or is it).
bool starts_with(std::span<const int32_t> whole, std::span<const int32_t> start) {
  return whole.size() >= start.size() && common_prefix(whole, start, start.size()) == start.size();
}

}  // namespace

PrefixCache::PrefixCache(KvCells& cells, int max_entries) : cells_(cells), max_entries_(std::max(max_entries, 0)) {
  cells_.set_reclaim([this](int n_missing) { reclaim(n_missing); });
}

void PrefixCache::reclaim(int n_missing) {
  const int wanted = cells_.n_free() + n_missing;
  // First the histories' own last cells, the least recently used history's
  // first: what a history keeps is still a prefix a prompt may reuse. A cell
  // another sequence holds too (a shared start, or the running request's)
  // frees nothing, so a history's trimming stops there.
  std::vector<Entry*> by_age;
  for (Entry& e : entries_) by_age.push_back(&e);
  std::sort(by_age.begin(), by_age.end(), [](const Entry* a, const Entry* b) { return a->last_use < b->last_use; });
  std::vector<Entry*> trimmed;
  for (Entry* e : by_age) {
    if (cells_.n_free() >= wanted) break;
    std::vector<int32_t>& cells = e->seq.cells;
    size_t keep = cells.size();
    while (keep > 0 && cells_.holders(cells[keep - 1]) == 1 &&
           cells_.n_free() + static_cast<int>(cells.size() - keep) < wanted) {
      --keep;
    }
    if (keep == cells.size()) continue;
    cells_.truncate(e->seq, static_cast<int>(keep));
    trimmed.push_back(e);
  }
  // A trimmed history that is now nothing, or the start of another, is no
  // longer worth an entry (of two equal ones, the first checked goes).
  std::vector<const Entry*> gone;
  for (Entry* e : trimmed) {
    bool redundant = e->seq.tokens.empty();
    for (const Entry& other : entries_) {
      if (redundant) break;
      redundant = &other != e && std::find(gone.begin(), gone.end(), &other) == gone.end() &&
                  starts_with(other.seq.tokens, e->seq.tokens);
    }
    if (redundant) {
      cells_.truncate(e->seq, 0);
      gone.push_back(e);
    }
  }
  std::erase_if(entries_, [](const Entry& e) { return e.seq.tokens.empty(); });
  // Then whole histories, oldest first: shared starts are free once no
  // history holds them.
  while (cells_.n_free() < wanted && drop_oldest()) {
  }
}

PrefixCache::~PrefixCache() {
  cells_.set_reclaim({});
  clear();
}

int PrefixCache::reuse(Sequence& seq, std::span<const int32_t> tokens, size_t limit) {
  size_t best = 0;
  Entry* from = nullptr;
  for (Entry& e : entries_) {
    const size_t n = common_prefix(e.seq.tokens, tokens, limit);
    // Ties: the most recently used, whose cells are likelier to be needed again.
    if (n > best || (n == best && n > 0 && e.last_use > from->last_use)) {
      best = n;
      from = &e;
    }
  }
  if (from == nullptr) return 0;
  from->last_use = ++clock_;
  cells_.share(seq, from->seq, static_cast<int>(best));
  return static_cast<int>(best);
}

void PrefixCache::keep(const Sequence& seq) {
  const size_t n = std::min(seq.tokens.size(), seq.cells.size());
  if (max_entries_ == 0 || n == 0) return;
  const std::span<const int32_t> tokens(seq.tokens.data(), n);
  for (size_t i = entries_.size(); i-- > 0;) {
    if (starts_with(entries_[i].seq.tokens, tokens)) {  // seq starts a kept history (or is it): nothing new
      entries_[i].last_use = ++clock_;
      return;
    }
    if (starts_with(tokens, entries_[i].seq.tokens)) drop(i);  // a kept history seq starts with
  }
  Entry e;
  cells_.share(e.seq, seq, static_cast<int>(n));
  e.last_use = ++clock_;
  entries_.push_back(std::move(e));
  while (n_entries() > max_entries_ && drop_oldest()) {
  }
}

void PrefixCache::clear() {
  while (!entries_.empty()) drop(entries_.size() - 1);
}

int PrefixCache::n_cells_only_kept() const {
  // A cell every holder of which is a kept history.
  std::vector<int32_t> kept_holds;
  for (const Entry& e : entries_) kept_holds.insert(kept_holds.end(), e.seq.cells.begin(), e.seq.cells.end());
  std::sort(kept_holds.begin(), kept_holds.end());
  int n = 0;
  for (size_t i = 0; i < kept_holds.size();) {
    size_t j = i;
    while (j < kept_holds.size() && kept_holds[j] == kept_holds[i]) ++j;
    if (cells_.holders(kept_holds[i]) == static_cast<int>(j - i)) ++n;
    i = j;
  }
  return n;
}

bool PrefixCache::drop_oldest() {
  if (entries_.empty()) return false;
  const auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                       [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
  drop(static_cast<size_t>(oldest - entries_.begin()));
  return true;
}

void PrefixCache::drop(size_t i) {
  cells_.truncate(entries_[i].seq, 0);
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(i));
}

}  // namespace minfer
