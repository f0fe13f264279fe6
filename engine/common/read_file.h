// A whole file as bytes, or an error that names the file and the reason.
#pragma once

#include <string>

#include "engine/common/expected.h"

namespace minfer {

Expected<std::string> read_file(const std::string& path);

}  // namespace minfer
