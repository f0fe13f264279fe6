// PieceIndex: linear probing at load factor <= 0.5.
#include "engine/tokenizer/piece_index.h"

#include <functional>

namespace minfer {

void PieceIndex::build(const std::vector<std::string>& pieces) {
  pieces_ = &pieces;
  size_t capacity = 16;
  while (capacity < pieces.size() * 2) capacity *= 2;
  slots_.assign(capacity, -1);
  mask_ = capacity - 1;
  for (size_t id = 0; id < pieces.size(); ++id) {
    size_t slot = std::hash<std::string_view>{}(pieces[id]) & mask_;
    while (slots_[slot] >= 0 && pieces[static_cast<size_t>(slots_[slot])] != pieces[id]) slot = (slot + 1) & mask_;
    slots_[slot] = static_cast<int32_t>(id);
  }
}

int32_t PieceIndex::find(std::string_view text) const {
  if (!pieces_) return -1;
  size_t slot = std::hash<std::string_view>{}(text) & mask_;
  while (slots_[slot] >= 0) {
    if ((*pieces_)[static_cast<size_t>(slots_[slot])] == text) return slots_[slot];
    slot = (slot + 1) & mask_;
  }
  return -1;
}

}  // namespace minfer
