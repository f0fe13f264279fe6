// Out-of-line parts of Expected: the names of error codes and the stop on
// use of a missing value (a bug, so it aborts with the message).
#include "engine/common/expected.h"

#include <cstdio>

namespace minfer {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kInvalidFile: return "invalid_file";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kOutOfRange: return "out_of_range";
    case ErrorCode::kOutOfMemory: return "out_of_memory";
    case ErrorCode::kDevice: return "device";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kCancelled: return "cancelled";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

void fail_unchecked_expected(const Error& e) {
  std::fprintf(stderr, "minfer: fatal: used the value of a failed Expected (%s): %s\n",
               error_code_name(e.code), e.message.c_str());
  std::abort();
}

}  // namespace minfer
