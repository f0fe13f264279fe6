// The merge loop SPM and BPE share (llama.cpp's llm_tokenizer_spm/_bpe):
// symbols form a linked list over the text; a bigram is queued for every
// adjacent pair that may merge; the best bigram is taken, skipped if stale,
// and its right symbol is folded into the left one, which queues the two new
// neighbour pairs. The tokenizers differ only in how a bigram is scored and
// when it is stale, which they pass in.
//
// std::priority_queue with the caller's order keeps llama.cpp's tie-breaking
// exactly (same container, same push/pop sequence).
#pragma once

#include <optional>
#include <queue>
#include <vector>

namespace minfer {

// Symbol needs int prev, next and size_t size (0 once merged away);
// Bigram needs int left, right.
// make(left, right) -> std::optional<Bigram>: the bigram, if the pair merges.
// stale(bigram, left, right) -> bool: whether a queued bigram no longer holds.
// fold(bigram, left): updates the left symbol's own data before the sizes move.
template <class Bigram, class Order, class Symbol, class Make, class Stale, class Fold>
void merge_symbols(std::vector<Symbol>& symbols, Make make, Stale stale, Fold fold) {
  std::priority_queue<Bigram, std::vector<Bigram>, Order> queue;
  auto add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    if (std::optional<Bigram> b = make(left, right)) queue.push(*b);
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) add(i - 1, i);

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(b.left)];
    Symbol& right = symbols[static_cast<size_t>(b.right)];
    if (left.size == 0 || right.size == 0 || stale(b, left, right)) continue;
    fold(b, left);
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = b.left;
    add(left.prev, b.left);
    add(b.left, left.next);
  }
}

}  // namespace minfer
