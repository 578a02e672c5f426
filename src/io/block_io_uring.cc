// The io_uring backend: one ring, and a fixed table of request slots sized by the queue depth.
// An SQE's user_data is its slot's index, so the hot path allocates nothing. Short transfers
// are resubmitted from the same slot with the offset and buffer advanced.
#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "io/block_io.h"
#include "io/block_io_internal.h"

namespace deepgrid::io {

namespace {

using namespace detail;

// The kernel's limit on ring entries (IORING_MAX_ENTRIES).
constexpr unsigned kMaxRingEntries = 32768;

class UringBlockIo final : public BlockIo {
 public:
  explicit UringBlockIo(const BlockIoOptions& options)
      : queue_depth_(options.queue_depth),
        hook_(options.fault_hook),
        slots_(options.queue_depth),
        ready_(options.queue_depth) {
    free_.reserve(queue_depth_);
    for (unsigned i = queue_depth_; i > 0; --i) free_.push_back(i - 1);
  }

  // 0, or the negative errno of io_uring_queue_init. The ring has at least queue_depth SQ
  // entries and twice as many CQ entries, and a slot has at most one SQE queued or in the
  // kernel at a time, so neither queue can overflow.
  int init() {
    const int ret = io_uring_queue_init(queue_depth_, &ring_, 0);
    ring_ready_ = ret == 0;
    return ret;
  }

  ~UringBlockIo() override {
    if (!ring_ready_) return;
    // The kernel may still be moving data into or out of callers' buffers: let every transfer
    // it holds finish (discarding the results) so that none is touched after this returns.
    while (kernel_pending_ > 0) {
      io_uring_cqe* cqe = nullptr;
      if (!next_cqe(&cqe).ok()) break;
      io_uring_cqe_seen(&ring_, cqe);
      --kernel_pending_;
    }
    io_uring_queue_exit(&ring_);
  }

  Status submit(const Request& request) override {
    DG_RETURN_IF_ERROR(check_request(request));
    if (in_flight_ == queue_depth_) return queue_full(queue_depth_);
    const unsigned index = free_.back();
    free_.pop_back();
    ++in_flight_;
    slots_[index] = Slot{request, 0, Status::Ok()};
    start_transfer(index);  // queued: flush() or wait() hands it to the kernel
    return Status::Ok();
  }

  void flush() override { submit_queued(); }

  Result<Completion> wait() override {
    if (in_flight_ == 0) return nothing_in_flight();
    while (ready_count_ == 0) {
      io_uring_cqe* cqe = nullptr;
      DG_RETURN_IF_ERROR(next_cqe(&cqe));
      const auto index = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
      const int result = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --kernel_pending_;
      on_transfer_done(index, result);
    }
    const unsigned index = ready_[ready_head_];
    ready_head_ = (ready_head_ + 1) % queue_depth_;
    --ready_count_;
    Slot& slot = slots_[index];
    Completion completion{slot.request.tag, std::move(slot.status)};
    slot.status = Status::Ok();
    free_.push_back(index);
    --in_flight_;
    return completion;
  }

  unsigned in_flight() const override { return in_flight_; }
  Backend backend() const override { return Backend::kUring; }

 private:
  struct Slot {
    Request request;
    size_t done = 0;  // bytes transferred so far
    Status status;    // the outcome, once the slot is in ready_
  };

  // Asks the fault hook about the slot's next transfer and queues its SQE, or completes the
  // slot when the hook fails it.
  void start_transfer(unsigned index) {
    Slot& slot = slots_[index];
    const int64_t offset = slot.request.offset + static_cast<int64_t>(slot.done);
    const int64_t length =
        plan_transfer(hook_, slot.request, offset, slot.request.length - slot.done);
    if (length < 0) return finish(index, transfer_status(slot.request, offset, length));
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {  // cannot happen (see init), but must not crash if it does
      return finish(index, {ErrorCode::kResource, "io_uring submission queue full"});
    }
    char* data = static_cast<char*>(slot.request.buffer) + slot.done;
    const auto bytes = static_cast<unsigned>(length);
    const auto position = static_cast<__u64>(offset);
    if (slot.request.op == Op::kRead) {
      io_uring_prep_read(sqe, slot.request.fd, data, bytes, position);
    } else {
      io_uring_prep_write(sqe, slot.request.fd, data, bytes, position);
    }
    io_uring_sqe_set_data64(sqe, index);
    ++kernel_pending_;
  }

  // Handles the CQE of the slot's current transfer: completes the slot, or queues the rest.
  void on_transfer_done(unsigned index, int result) {
    Slot& slot = slots_[index];
    if (result != -EINTR) {
      const int64_t offset = slot.request.offset + static_cast<int64_t>(slot.done);
      Status status = transfer_status(slot.request, offset, result);
      if (!status.ok()) return finish(index, std::move(status));
      slot.done += static_cast<size_t>(result);
      if (slot.done == slot.request.length) return finish(index, Status::Ok());
    }
    start_transfer(index);
    submit_queued();
  }

  void finish(unsigned index, Status status) {
    slots_[index].status = std::move(status);
    ready_[(ready_head_ + ready_count_) % queue_depth_] = index;
    ++ready_count_;
  }

  // Hands queued SQEs to the kernel. A refusal (EAGAIN, EBUSY, EINTR...) leaves them in the
  // ring, and next_cqe() submits them again before it sleeps.
  void submit_queued() {
    if (io_uring_sq_ready(&ring_) > 0) (void)io_uring_submit(&ring_);
  }

  // The next CQE, waiting for one if none is there yet.
  Status next_cqe(io_uring_cqe** cqe) {
    for (;;) {
      if (io_uring_peek_cqe(&ring_, cqe) == 0) return Status::Ok();
      const int ret = io_uring_sq_ready(&ring_) > 0 ? io_uring_submit_and_wait(&ring_, 1)
                                                    : io_uring_wait_cqe(&ring_, cqe);
      if (ret >= 0 || ret == -EINTR || ret == -EAGAIN || ret == -EBUSY) continue;
      return errno_status(-ret, "wait for", "io_uring completions");
    }
  }

  const unsigned queue_depth_;
  const FaultHook hook_;
  io_uring ring_{};
  bool ring_ready_ = false;
  std::vector<Slot> slots_;
  std::vector<unsigned> free_;   // indices of unused slots
  std::vector<unsigned> ready_;  // FIFO ring of completed slots not yet returned by wait()
  unsigned ready_head_ = 0;
  unsigned ready_count_ = 0;
  unsigned in_flight_ = 0;       // slots in use
  unsigned kernel_pending_ = 0;  // SQEs queued or in the kernel, whose CQEs are not yet seen
};

}  // namespace

namespace detail {

Result<std::unique_ptr<BlockIo>> make_uring_block_io(const BlockIoOptions& options) {
  if (options.queue_depth > kMaxRingEntries) {
    return invalid_argument("the io_uring queue depth must be at most " +
                            std::to_string(kMaxRingEntries));
  }
  auto io = std::make_unique<UringBlockIo>(options);
  if (const int ret = io->init(); ret < 0) {
    // Not errno_status: this is "unsupported here", whatever the errno (ENOSYS on old
    // kernels, EPERM under seccomp or kernel.io_uring_disabled, ENOMEM under a low memlock).
    return unsupported("io_uring is not available here (io_uring_queue_init: " +
                       std::string(std::strerror(-ret)) + "): use --io threads");
  }
  return std::unique_ptr<BlockIo>(std::move(io));
}

}  // namespace detail

}  // namespace deepgrid::io
