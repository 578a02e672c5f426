// Status and Result<T>: how every fallible library call reports failure.
// Exceptions are used only at the CLI and Python boundaries.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace deepgrid {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong; nothing was changed
  kNotFound,         // a file or directory does not exist
  kIo,               // the operating system reported an I/O error
  kNoSpace,          // not enough disk space
  kCorrupt,          // stored data or metadata is inconsistent
  kUnsupported,      // valid, but not supported here (format version, filesystem)
  kResource,         // memory budget or other resource exhausted
  kBusy,             // another process holds the grid (see Grid::open)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with "context: " (no-op on success).
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

Status invalid_argument(std::string message);
Status corrupt(std::string message);
Status unsupported(std::string message);
// The one place errno becomes a Status: names the operation, file and (when >= 0) offset.
Status errno_status(int err, std::string_view operation, std::string_view path,
                    long long offset = -1);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace deepgrid

#define DG_CONCAT_INNER(a, b) a##b
#define DG_CONCAT(a, b) DG_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function when it is an error.
#define DG_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::deepgrid::Status dg_status_ = (expr);  \
    if (!dg_status_.ok()) return dg_status_; \
  } while (0)

// `lhs = value of expr`, or returns its error status.
#define DG_ASSIGN_OR_RETURN(lhs, expr) \
  DG_ASSIGN_OR_RETURN_IMPL(DG_CONCAT(dg_result_, __LINE__), lhs, expr)
#define DG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
