// Status and Result<T>: the error currency of every Surge module (no exception crosses a module
// API).
//
// A Status is cheap when OK (one pointer) and carries a code plus a message when not. Messages say
// what failed, on which input, and what would have been valid. Result<T> holds either a T or a
// non-OK Status. SURGE_RETURN_IF_ERROR / SURGE_ASSIGN_OR_RETURN keep call sites flat; SURGE_CHECK
// guards programmer errors and aborts with file:line.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace surge {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kOutOfRange,
  kUnimplemented,
  kDataLoss,  // corrupt or truncated input file
  kFailedPrecondition,
  kResourceExhausted,
  kInternal,
  kUnavailable,
  kCancelled,
  kDeadlineExceeded,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

template <typename... Args>
Status MakeStatus(StatusCode code, fmt::format_string<Args...> f, Args&&... args) {
  return Status(code, fmt::format(f, std::forward<Args>(args)...));
}
#define SURGE_STATUS_FACTORY(Name)                                                   \
  template <typename... Args>                                                        \
  Status Name##Error(fmt::format_string<Args...> f, Args&&... args) {                \
    return Status(StatusCode::k##Name, fmt::format(f, std::forward<Args>(args)...)); \
  }
SURGE_STATUS_FACTORY(InvalidArgument)
SURGE_STATUS_FACTORY(NotFound)
SURGE_STATUS_FACTORY(OutOfRange)
SURGE_STATUS_FACTORY(Unimplemented)
SURGE_STATUS_FACTORY(DataLoss)
SURGE_STATUS_FACTORY(FailedPrecondition)
SURGE_STATUS_FACTORY(ResourceExhausted)
SURGE_STATUS_FACTORY(Internal)
SURGE_STATUS_FACTORY(Unavailable)
#undef SURGE_STATUS_FACTORY

// Either a value or a non-OK Status. Constructing from an OK Status is a programmer error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status);                     // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  const Status& status() const;

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

}  // namespace surge

#define SURGE_CONCAT_INNER(a, b) a##b
#define SURGE_CONCAT(a, b) SURGE_CONCAT_INNER(a, b)

#define SURGE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::surge::Status _surge_status = (expr);        \
    if (!_surge_status.ok()) return _surge_status; \
  } while (0)

#define SURGE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define SURGE_ASSIGN_OR_RETURN(lhs, expr) \
  SURGE_ASSIGN_OR_RETURN_IMPL(SURGE_CONCAT(_surge_result_, __LINE__), lhs, expr)

#define SURGE_CHECK(cond, ...)                                                                 \
  do {                                                                                         \
    if (!(cond)) ::surge::CheckFailed(__FILE__, __LINE__, #cond, fmt::format("" __VA_ARGS__)); \
  } while (0)

namespace surge {
template <typename T>
Result<T>::Result(Status status) : v_(std::move(status)) {
  SURGE_CHECK(!std::get<1>(v_).ok(), "Result constructed from an OK Status");
}
template <typename T>
const Status& Result<T>::status() const {
  static const Status kOkStatus;
  return ok() ? kOkStatus : std::get<1>(v_);
}
}  // namespace surge
