#include "deepgrid/status.h"

#include <cerrno>
#include <cstring>

namespace deepgrid {

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  return {code_, std::string(context) + ": " + message_};
}

Status invalid_argument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}
Status corrupt(std::string message) { return {ErrorCode::kCorrupt, std::move(message)}; }
Status unsupported(std::string message) { return {ErrorCode::kUnsupported, std::move(message)}; }

Status errno_status(int err, std::string_view operation, std::string_view path, long long offset) {
  std::string msg = std::string(operation) + " " + std::string(path);
  if (offset >= 0) msg += " at offset " + std::to_string(offset);
  msg += ": ";
  msg += std::strerror(err);
  ErrorCode code = ErrorCode::kIo;
  if (err == ENOENT) code = ErrorCode::kNotFound;
  if (err == ENOSPC || err == EDQUOT) code = ErrorCode::kNoSpace;
  if (err == EACCES || err == EPERM || err == EROFS) code = ErrorCode::kInvalidArgument;
  return {code, std::move(msg)};
}

}  // namespace deepgrid
