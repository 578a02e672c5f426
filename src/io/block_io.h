// Asynchronous aligned block I/O: the one interface the out-of-core engines use for disk
// traffic, with two backends (io_uring, and a thread pool doing pread/pwrite) that pass the
// same test suite.
//
// Contract: buffers, offsets and lengths of requests on O_DIRECT files are multiples of
// kDirectIoAlignment (4096). Requests are independent and may complete in any order. A request
// is complete only when its whole length has been transferred; short transfers are retried by
// the backend, and end of file on a read is an error. Completions carry the request's tag and
// a Status naming the file and offset on failure.
//
// Threading: one thread owns a BlockIo and calls submit() and wait(). Destroying it discards
// requests not yet started and waits for those the kernel or a worker holds, so buffers need
// to outlive only the destructor. Zero-length requests and null buffers are invalid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "deepgrid/direct_io.h"
#include "deepgrid/status.h"

namespace deepgrid::io {

enum class Op { kRead, kWrite };

struct Request {
  Op op = Op::kRead;
  int fd = -1;
  std::string_view path;  // for error messages; must outlive the request
  int64_t offset = 0;
  size_t length = 0;
  void* buffer = nullptr;
  uint64_t tag = 0;  // returned in the completion
  // The fd is not O_DIRECT: offset, length and buffer need no alignment.
  bool buffered = false;
};

struct Completion {
  uint64_t tag = 0;
  Status status;  // ok, or what failed with the file and offset
};

// Test hook: called before every transfer a backend makes (including the retries of short
// transfers). It returns 0 to let the transfer happen, a negative errno to fail it with that
// error (e.g. -EIO, -ENOSPC), or a positive byte count to make the transfer short (at most
// that many bytes move, and the backend must carry on with the rest).
using FaultHook = std::function<int64_t(const Request& request, int64_t offset, size_t length)>;

struct BlockIoOptions {
  Backend backend = Backend::kUring;
  unsigned queue_depth = 32;  // requests in flight at most
  unsigned threads = 4;       // kThreads: worker threads
  FaultHook fault_hook;       // empty in production
};

class BlockIo {
 public:
  virtual ~BlockIo() = default;

  // Queues a request. Fails (without queuing) when queue_depth requests are in flight or the
  // request breaks the alignment contract. A backend may hold queued requests back until
  // flush() or wait(), so that several go to the device in one system call.
  virtual Status submit(const Request& request) = 0;
  // Hands every queued request to the device now.
  virtual void flush() = 0;
  // Blocks until at least one request completes, and returns one completion. Fails when
  // nothing is in flight.
  virtual Result<Completion> wait() = 0;
  // Requests submitted and not yet returned by wait().
  virtual unsigned in_flight() const = 0;
  virtual Backend backend() const = 0;
};

// Makes a backend. kUring fails with kUnsupported where the kernel refuses io_uring (e.g.
// seccomp or an old kernel); callers then fall back to kThreads and say so.
Result<std::unique_ptr<BlockIo>> make_block_io(const BlockIoOptions& options);

}  // namespace deepgrid::io
