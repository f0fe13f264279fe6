#include "engine/common/read_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace minfer {

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return unexpected(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return unexpected(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return text;
}

}  // namespace minfer
