#include "deepgrid/plane_transfer.h"

#include <deque>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "io/block_io.h"
#include "store/coef_request.h"

namespace deepgrid::io {
namespace {

// io_uring where the kernel allows it, else the thread pool.
Result<std::unique_ptr<BlockIo>> make_io(unsigned depth) {
  BlockIoOptions opt;
  opt.queue_depth = depth;
  auto io = make_block_io(opt);
  if (!io.ok() && io.status().code() == ErrorCode::kUnsupported) {
    opt.backend = Backend::kThreads;
    io = make_block_io(opt);
  }
  return io;
}

// Plane buffers and the requests that move them, for one grid.
class Transfer {
 public:
  Transfer(const Grid& grid, unsigned depth, FileSet set)
      : grid_(grid), m_(grid.manifest()), set_(set) {
    for (unsigned i = 0; i < depth; ++i) buffers_.emplace_back(bytes());
    pending_.resize(depth);
    ops_.resize(depth, Op::kRead);
    for (size_t f = 0; f < m_.layout.files.size(); ++f) {
      paths_.push_back(grid.file_path(static_cast<int>(f), set));
    }
  }

  Status init(unsigned depth) {
    for (const auto& b : buffers_) {
      if (!b.ok()) return Status(ErrorCode::kResource, "out of memory for plane I/O buffers");
    }
    DG_ASSIGN_OR_RETURN(io_, make_io(m_.has_coef_files() ? 2 * depth : depth));
    return Status::Ok();
  }

  const Grid& grid() const { return grid_; }
  size_t slots() const { return buffers_.size(); }
  void* buffer(size_t slot) { return buffers_[slot].data(); }

  // Plane z's part in the ring and, on grids with coefficient files, its coefficients (a
  // replacement's writers leave them out: the replacement shares the grid's, which they hold).
  Status submit(Op op, int64_t z, size_t slot) {
    const bool coefficients = m_.has_coef_files() && (op == Op::kRead || set_ == FileSet::kCurrent);
    if (coefficients && op == Op::kWrite) {
      internal::coefficients_to_record(m_.layout, static_cast<std::byte*>(buffer(slot)));
    }
    const PlaneLocation loc = grid_.locate(z, set_);
    Request r;
    r.op = op;
    r.fd = grid_.fd(loc.file, set_);
    r.path = paths_[static_cast<size_t>(loc.file)];
    r.offset = loc.offset;
    r.length = static_cast<size_t>(m_.layout.plane_stride);
    r.buffer = buffers_[slot].data();
    r.tag = slot;
    DG_RETURN_IF_ERROR(io_->submit(r));
    pending_[slot] = 1;
    ops_[slot] = op;
    if (coefficients) {
      r = internal::coef_request(grid_, z, static_cast<std::byte*>(buffers_[slot].data()));
      r.op = op;
      r.tag = slot;
      DG_RETURN_IF_ERROR(io_->submit(r));
      pending_[slot] = 2;
    }
    io_->flush();
    return Status::Ok();
  }

  // The slot whose requests all completed next (a read's plane packed in it).
  Result<size_t> wait() {
    while (true) {
      DG_ASSIGN_OR_RETURN(Completion c, io_->wait());
      DG_RETURN_IF_ERROR(c.status);
      const auto slot = static_cast<size_t>(c.tag);
      if (--pending_[slot] > 0) continue;
      if (ops_[slot] == Op::kRead && m_.has_coef_files()) {
        internal::coefficients_to_plane(m_.layout, static_cast<std::byte*>(buffer(slot)));
      }
      return slot;
    }
  }

  // Waits for every request still in flight (after an error: buffers must outlive them).
  void drain() {
    while (io_ && io_->in_flight() > 0) (void)io_->wait();
  }

 private:
  size_t bytes() const { return static_cast<size_t>(m_.layout.plane_buffer_bytes()); }

  const Grid& grid_;
  const Manifest& m_;
  const FileSet set_;
  std::vector<internal::AlignedBuffer> buffers_;
  std::vector<int> pending_;  // requests in flight per slot
  std::vector<Op> ops_;       // and what they do
  std::vector<std::string> paths_;
  std::unique_ptr<BlockIo> io_;
};

Status read_range(Transfer& t, int64_t z0, int64_t z1, const PlaneConsumer& consume, bool verify) {
  // Requests complete in any order; planes are consumed in order.
  std::vector<int64_t> plane_of(t.slots(), -1);
  std::vector<bool> arrived(t.slots(), false);
  std::deque<size_t> order;  // slots in the order their planes are consumed
  int64_t next = z0;
  auto issue = [&](size_t slot) -> Status {
    if (next >= z1) return Status::Ok();
    plane_of[slot] = next;
    arrived[slot] = false;
    order.push_back(slot);
    return t.submit(Op::kRead, next++, slot);
  };
  for (size_t s = 0; s < t.slots(); ++s) DG_RETURN_IF_ERROR(issue(s));
  while (!order.empty()) {
    const size_t head = order.front();
    while (!arrived[head]) {
      DG_ASSIGN_OR_RETURN(const size_t done, t.wait());
      arrived[done] = true;
    }
    order.pop_front();
    if (verify) DG_RETURN_IF_ERROR(t.grid().verify_plane(plane_of[head], t.buffer(head)));
    DG_RETURN_IF_ERROR(consume(plane_of[head], t.buffer(head)));
    DG_RETURN_IF_ERROR(issue(head));
  }
  return Status::Ok();
}

Status write_range(Grid& grid, Transfer& t, int64_t z0, int64_t z1, const PlaneProducer& produce) {
  std::vector<size_t> idle;
  for (size_t s = 0; s < t.slots(); ++s) idle.push_back(s);
  size_t in_flight = 0;
  for (int64_t z = z0; z < z1; ++z) {
    if (idle.empty()) {
      DG_ASSIGN_OR_RETURN(const size_t done, t.wait());
      idle.push_back(done);
      --in_flight;
    }
    const size_t slot = idle.back();
    idle.pop_back();
    DG_RETURN_IF_ERROR(produce(z, t.buffer(slot)));
    grid.record_plane(z, t.buffer(slot));
    DG_RETURN_IF_ERROR(t.submit(Op::kWrite, z, slot));
    ++in_flight;
  }
  for (; in_flight > 0; --in_flight) DG_RETURN_IF_ERROR(t.wait().status());
  return Status::Ok();
}

// Runs body(transfer) with `depth` buffers; after an error, waits for what is in flight.
template <typename Body>
Status with_transfer(const Grid& grid, unsigned depth, FileSet set, Body body) {
  Transfer t(grid, depth, set);
  DG_RETURN_IF_ERROR(t.init(depth));
  Status st = body(t);
  if (!st.ok()) t.drain();
  return st;
}

}  // namespace

Status read_plane_range(const Grid& grid, int64_t z0, int64_t z1, const PlaneConsumer& consume,
                        unsigned depth, bool verify) {
  return with_transfer(grid, depth, FileSet::kCurrent,
                       [&](Transfer& t) { return read_range(t, z0, z1, consume, verify); });
}

Status write_plane_range(Grid& grid, int64_t z0, int64_t z1, const PlaneProducer& produce,
                         unsigned depth, FileSet set) {
  return with_transfer(grid, depth, set,
                       [&](Transfer& t) { return write_range(grid, t, z0, z1, produce); });
}

}  // namespace deepgrid::io
