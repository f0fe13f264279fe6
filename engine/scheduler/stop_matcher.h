// Holds back generated text while it might be the start of a stop string, and
// cuts the output where a stop string completes. Input and output are whole
// UTF-8 characters (the StreamDecoder's pieces); since a stop string starts
// with a whole character, every cut lands on a character boundary.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; returns what may be emitted now.
  std::string push(std::string_view text);
  // True once a stop string was seen; later pushes return nothing.
  bool stopped() const { return stopped_; }
  // The stop string that was seen (the one that starts earliest; the first
  // listed on a tie); empty before.
  const std::string& matched() const { return matched_; }
  // At the end of generation: what is still held back (no stop followed).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace minfer
