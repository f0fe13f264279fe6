#include "engine/chat/reasoning.h"

#include <algorithm>
#include <utility>

#include "engine/chat/markers.h"

namespace minfer {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kSpace = " \t\r\n";


}  // namespace

ReasoningStream::ReasoningStream(bool inside) : phase_(inside ? Phase::kThinking : Phase::kStart) {}

void ReasoningStream::emit(std::string text, bool reasoning, std::vector<Piece>& out) {
  if (reasoning && !reasoning_started_) {
    text.erase(0, std::min(text.size(), text.find_first_not_of('\n')));
    if (!text.empty()) reasoning_started_ = true;
  }
  if (text.empty()) return;
  if (!out.empty() && out.back().reasoning == reasoning) {
    out.back().text += text;
  } else {
    out.push_back(Piece{std::move(text), reasoning});
  }
}

std::vector<ReasoningStream::Piece> ReasoningStream::feed(std::string_view piece) {
  std::vector<Piece> out;
  held_ += piece;
  for (;;) {
    switch (phase_) {
      case Phase::kStart: {
        const size_t b = held_.find_first_not_of(kSpace);
        if (b == std::string::npos) return out;
        const std::string_view start = std::string_view(held_).substr(b);
        if (start.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, b + kOpen.size());
          phase_ = Phase::kThinking;
          continue;
        }
        if (start.size() < kOpen.size() && kOpen.substr(0, start.size()) == start) return out;
        phase_ = Phase::kContent;
        continue;
      }
      case Phase::kThinking: {
        const size_t close = held_.find(kClose);
        if (close != std::string::npos) {
          std::string reasoning = held_.substr(0, close);
          reasoning.erase(reasoning.find_last_not_of('\n') + 1);  // the newlines before </think>
          emit(std::move(reasoning), true, out);
          held_.erase(0, close + kClose.size());
          phase_ = Phase::kAfter;
          continue;
        }
        // Hold what may begin the closer, and trailing newlines (they go if it comes).
        size_t keep = held_.size() - partial_suffix(held_, kClose);
        while (keep > 0 && held_[keep - 1] == '\n') --keep;
        emit(held_.substr(0, keep), true, out);
        held_.erase(0, keep);
        return out;
      }
      case Phase::kAfter: {
        const size_t b = held_.find_first_not_of(kSpace);
        if (b == std::string::npos) {
          held_.clear();
          return out;
        }
        held_.erase(0, b);
        phase_ = Phase::kContent;
        continue;
      }
      case Phase::kContent:
        emit(std::exchange(held_, {}), false, out);
        return out;
    }
  }
}

std::vector<ReasoningStream::Piece> ReasoningStream::finish() {
  std::vector<Piece> out;
  switch (phase_) {
    case Phase::kStart:
    case Phase::kContent: emit(std::exchange(held_, {}), false, out); break;
    case Phase::kThinking: {
      std::string rest = std::exchange(held_, {});
      rest.erase(rest.find_last_not_of('\n') + 1);
      emit(std::move(rest), true, out);
      break;
    }
    case Phase::kAfter: held_.clear(); break;
  }
  return out;
}

}  // namespace minfer
