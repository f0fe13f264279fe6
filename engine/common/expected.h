// Expected<T>: a value or an Error, returned across module boundaries for
// every failure a caller can cause or meet (bad file, bad request, bad shape).
//
// std::expected is C++23 and Ubuntu 22.04's GCC 11 lacks it, so this is the
// small subset we use. Errors carry a message a person can act on (the value,
// the limit, a hint) and a stable code for programs.
#pragma once

#include <cassert>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace minfer {

enum class ErrorCode {
  kInvalidArgument,   // caller passed something wrong (request, option)
  kInvalidFile,       // a file is malformed or hostile
  kIo,                // open/read/mmap failed
  kUnsupported,       // well-formed, but we do not implement it
  kOutOfRange,        // a size or index beyond a limit
  kOutOfMemory,       // an allocation failed (host or device)
  kDevice,            // a CUDA/driver error
  kTimeout,           // a bounded wait passed its deadline
  kCancelled,         // the caller asked us to stop
  kInternal,          // an invariant broke: a bug
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  Error() = default;
  Error(ErrorCode c, std::string m) : code(c), message(std::move(m)) {}
};

// Tag type so `return unexpected(err)` reads as in std::expected.
struct Unexpected {
  Error error;
};
inline Unexpected unexpected(Error e) { return Unexpected{std::move(e)}; }
inline Unexpected unexpected(ErrorCode c, std::string m) { return Unexpected{Error(c, std::move(m))}; }

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Expected(Unexpected u) : v_(std::in_place_index<1>, std::move(u.error)) {}  // NOLINT
  Expected(Error e) : v_(std::in_place_index<1>, std::move(e)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { check(); return std::get<0>(v_); }
  const T& value() const& { check(); return std::get<0>(v_); }
  T&& value() && { check(); return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

  const Error& error() const { assert(!has_value()); return std::get<1>(v_); }
  Error& error() { assert(!has_value()); return std::get<1>(v_); }

 private:
  void check() const {
    if (!has_value()) {
      // Using a value that is not there is a programming error, not an
      // expected failure: stop with the message so the bug is visible.
      fail_unchecked(std::get<1>(v_));
    }
  }
  [[noreturn]] static void fail_unchecked(const Error& e);
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Unexpected u) : err_(std::move(u.error)), ok_(false) {}  // NOLINT
  Expected(Error e) : err_(std::move(e)), ok_(false) {}  // NOLINT
  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { assert(!ok_); return err_; }
  Error& error() { assert(!ok_); return err_; }

 private:
  Error err_;
  bool ok_ = true;
};

using Status = Expected<void>;
inline Status ok_status() { return Status(); }

[[noreturn]] void fail_unchecked_expected(const Error& e);

template <class T>
void Expected<T>::fail_unchecked(const Error& e) { fail_unchecked_expected(e); }

}  // namespace minfer

// Propagate an error from an Expected/Status expression.
#define MINFER_TRY(expr)                                         \
  do {                                                           \
    auto&& minfer_try_result_ = (expr);                          \
    if (!minfer_try_result_) return ::minfer::unexpected(std::move(minfer_try_result_.error())); \
  } while (0)

#define MINFER_CONCAT_INNER_(a, b) a##b
#define MINFER_CONCAT_(a, b) MINFER_CONCAT_INNER_(a, b)

// Declare `lhs` from the value of an Expected expression, or return its error.
#define MINFER_ASSIGN_OR_RETURN(lhs, expr)                                    \
  auto MINFER_CONCAT_(minfer_tmp_, __LINE__) = (expr);                        \
  if (!MINFER_CONCAT_(minfer_tmp_, __LINE__))                                 \
    return ::minfer::unexpected(std::move(MINFER_CONCAT_(minfer_tmp_, __LINE__).error())); \
  lhs = std::move(MINFER_CONCAT_(minfer_tmp_, __LINE__)).value()
