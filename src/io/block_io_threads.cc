// The thread-pool backend: worker threads take requests from a queue, do full-length
// pread/pwrite loops, and post completions to a second queue that wait() blocks on. For
// systems where io_uring is unavailable; the fault hook runs on the workers, concurrently.
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "io/block_io.h"
#include "io/block_io_internal.h"

namespace deepgrid::io {

namespace {

using namespace detail;

// Moves the whole request, retrying EINTR and short transfers.
Status transfer_all(const Request& request, const FaultHook& hook) {
  size_t done = 0;
  while (done < request.length) {
    const int64_t offset = request.offset + static_cast<int64_t>(done);
    const int64_t length = plan_transfer(hook, request, offset, request.length - done);
    if (length < 0) return transfer_status(request, offset, length);
    char* data = static_cast<char*>(request.buffer) + done;
    const auto bytes = static_cast<size_t>(length);
    const ssize_t moved = request.op == Op::kRead ? ::pread(request.fd, data, bytes, offset)
                                                  : ::pwrite(request.fd, data, bytes, offset);
    if (moved < 0 && errno == EINTR) continue;
    DG_RETURN_IF_ERROR(transfer_status(request, offset, moved < 0 ? -errno : moved));
    done += static_cast<size_t>(moved);
  }
  return Status::Ok();
}

// submit(), wait() and in_flight() belong to one owning thread, like the io_uring backend.
class ThreadsBlockIo final : public BlockIo {
 public:
  explicit ThreadsBlockIo(const BlockIoOptions& options)
      : queue_depth_(options.queue_depth), hook_(options.fault_hook) {}

  // Starts the workers; may throw std::system_error (caught by the factory).
  void start(unsigned threads) {
    workers_.reserve(threads);
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  // Requests still queued are discarded; transfers under way finish before the workers are
  // joined, so no buffer is touched after this returns.
  ~ThreadsBlockIo() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      queued_.clear();
    }
    work_ready_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  Status submit(const Request& request) override {
    DG_RETURN_IF_ERROR(check_request(request));
    if (in_flight_ == queue_depth_) return queue_full(queue_depth_);
    {
      std::lock_guard lock(mu_);
      queued_.push_back(request);
    }
    work_ready_.notify_one();
    ++in_flight_;
    return Status::Ok();
  }

  void flush() override {}  // workers start requests as soon as they are queued

  Result<Completion> wait() override {
    if (in_flight_ == 0) return nothing_in_flight();
    std::unique_lock lock(mu_);
    completion_ready_.wait(lock, [this] { return !completed_.empty(); });
    Completion completion = std::move(completed_.front());
    completed_.pop_front();
    --in_flight_;
    return completion;
  }

  unsigned in_flight() const override { return in_flight_; }
  Backend backend() const override { return Backend::kThreads; }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      work_ready_.wait(lock, [this] { return stopping_ || !queued_.empty(); });
      if (stopping_) return;
      const Request request = queued_.front();
      queued_.pop_front();
      lock.unlock();
      Status status = transfer_all(request, hook_);
      lock.lock();
      completed_.push_back({request.tag, std::move(status)});
      completion_ready_.notify_one();
    }
  }

  const unsigned queue_depth_;
  const FaultHook hook_;
  unsigned in_flight_ = 0;  // owning thread only

  std::mutex mu_;
  std::condition_variable work_ready_;        // queued_ is not empty, or stopping_
  std::condition_variable completion_ready_;  // completed_ is not empty
  std::deque<Request> queued_;                // guarded by mu_
  std::deque<Completion> completed_;          // guarded by mu_
  bool stopping_ = false;                     // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace

namespace detail {

Result<std::unique_ptr<BlockIo>> make_threads_block_io(const BlockIoOptions& options) {
  auto io = std::make_unique<ThreadsBlockIo>(options);
  try {
    io->start(options.threads);
  } catch (const std::system_error& e) {  // the destructor joins the workers that did start
    return Status(ErrorCode::kResource, std::string("cannot start I/O threads: ") + e.what());
  }
  return std::unique_ptr<BlockIo>(std::move(io));
}

}  // namespace detail

}  // namespace deepgrid::io
