// The backend-independent part of block I/O: names, the factory, request validation, and the
// interpretation of one transfer's result, shared so that both backends fail the same way.
#include "io/block_io.h"

#include <algorithm>
#include <cerrno>
#include <string>

#include "io/block_io_internal.h"

namespace deepgrid::io {

// Shared with block_io_uring.cc and block_io_threads.cc, which declare what they use.
namespace detail {

std::string_view op_name(Op op) { return op == Op::kRead ? "read" : "write"; }

Status check_request(const Request& request) {
  const auto describe = [&request] {
    return std::string(op_name(request.op)) + " " + std::string(request.path) + " at offset " +
           std::to_string(request.offset);
  };
  const auto misaligned = [&request](uint64_t value) {
    return !request.buffered && value % kDirectIoAlignment != 0;
  };
  if (request.fd < 0) {
    return invalid_argument(describe() + ": bad file descriptor " + std::to_string(request.fd));
  }
  if (request.buffer == nullptr || request.length == 0) {
    return invalid_argument(describe() + ": the request needs a buffer and a positive length");
  }
  if (request.offset < 0 || misaligned(static_cast<uint64_t>(request.offset))) {
    return invalid_argument(describe() + ": the offset is not a non-negative multiple of " +
                            std::to_string(kDirectIoAlignment));
  }
  if (misaligned(request.length)) {
    return invalid_argument(describe() + ": length " + std::to_string(request.length) +
                            " is not a multiple of " + std::to_string(kDirectIoAlignment));
  }
  if (misaligned(reinterpret_cast<uintptr_t>(request.buffer))) {
    return invalid_argument(describe() + ": the buffer is not aligned to " +
                            std::to_string(kDirectIoAlignment) + " bytes");
  }
  return Status::Ok();
}

// The most bytes one transfer moves: a multiple of the alignment that fits the 32-bit length
// of an io_uring SQE (and stays under Linux's per-call limit of 0x7ffff000 bytes).
constexpr size_t kMaxTransfer = size_t{1} << 30;

// The next transfer of a request, as the fault hook allows it: a negative errno when the hook
// fails it, else how many bytes to move (at least 1, at most `remaining` and kMaxTransfer).
int64_t plan_transfer(const FaultHook& hook, const Request& request, int64_t offset,
                      size_t remaining) {
  const auto length = static_cast<int64_t>(std::min(remaining, kMaxTransfer));
  if (!hook) return length;
  const int64_t verdict = hook(request, offset, remaining);
  return verdict == 0 ? length : std::min(verdict, length);
}

// What a transfer at `offset` that returned `result` (bytes moved, or -errno) means for the
// request: ok when it made progress; else the request's failure. A read of 0 bytes met end of
// file; a write of 0 bytes is treated as a full disk, like pwrite_full.
Status transfer_status(const Request& request, int64_t offset, int64_t result) {
  if (result > 0) return Status::Ok();
  if (result < 0) {
    return errno_status(static_cast<int>(-result), op_name(request.op), request.path, offset);
  }
  if (request.op == Op::kWrite) return errno_status(ENOSPC, "write", request.path, offset);
  return corrupt("read " + std::string(request.path) + " at offset " + std::to_string(offset) +
                 ": unexpected end of file");
}

Status queue_full(unsigned queue_depth) {
  return {ErrorCode::kResource,
          "I/O queue full (" + std::to_string(queue_depth) + " requests in flight)"};
}

Status nothing_in_flight() { return invalid_argument("wait() with no I/O request in flight"); }

}  // namespace detail

std::string_view backend_name(Backend b) { return b == Backend::kUring ? "uring" : "threads"; }

Result<Backend> parse_backend(std::string_view text) {
  for (Backend b : {Backend::kUring, Backend::kThreads}) {
    if (text == backend_name(b)) return b;
  }
  return invalid_argument("unknown I/O backend '" + std::string(text) +
                          "' (expected 'uring' or 'threads')");
}

Result<std::unique_ptr<BlockIo>> make_block_io(const BlockIoOptions& options) {
  if (options.queue_depth == 0) return invalid_argument("the I/O queue depth must be at least 1");
  if (options.backend == Backend::kThreads) {
    if (options.threads == 0) return invalid_argument("the I/O thread count must be at least 1");
    return detail::make_threads_block_io(options);
  }
  return detail::make_uring_block_io(options);
}

}  // namespace deepgrid::io
