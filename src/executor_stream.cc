#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "deepgrid/padded_grid.h"
#include "deepgrid/stream.h"
#include "internal/aligned_buffer.h"
#include "internal/wavefront.h"

namespace deepgrid {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Level-0 planes kept for a whole sweep: periodic z reads bt * rz planes past each end, which
// are the first and last planes of the grid as they were before the sweep overwrote them.
int64_t pinned_planes(const Boundary& b, int bt, int rz, int64_t nz) {
  return b.kind == Boundary::Kind::kPeriodic ? std::min(nz, 2 * int64_t{bt} * rz) : 0;
}

bool is_pinned(const Boundary& b, int bt, int rz, int64_t nz, int64_t p) {
  const int64_t edge = int64_t{bt} * rz;
  return b.kind == Boundary::Kind::kPeriodic && (p < edge || p >= nz - edge);
}

StreamPlan plan_for_bt(const Manifest& m, const Stencil& st, const Boundary& b, int bt,
                       const StreamOptions& opt) {
  const Shape& s = m.shape;
  const size_t vb = dtype_size(m.dtype);
  StreamPlan p;
  p.bt = bt;
  p.threads = std::max(1, opt.threads > 0 ? opt.threads : omp_get_max_threads());
  const Halo frame{bt * st.radius_x(), bt * st.radius_y(), 0};
  p.frame_bytes = vb == 4 ? PaddedGrid<float>::bytes_needed({s.nx, s.ny, 1}, frame)
                          : PaddedGrid<double>::bytes_needed({s.nx, s.ny, 1}, frame);
  const int rz = st.radius_z();
  p.level0_frames = 2 * rz + 1 + pinned_planes(b, bt, rz, s.nz) +
                    (b.kind == Boundary::Kind::kDirichlet ? 1 : 0);  // + the constant frame
  // x-y tiles sized like the in-core engine's, each with its own rings (kept across blocks),
  // so that a tile's levels stay in cache while it advances a block of z-steps.
  InCoreOptions tiling;
  tiling.threads = p.threads;
  tiling.bt = bt;
  tiling.cache_bytes = int64_t{8} << 20;  // deep bt needs tall tiles: size them for L3
  tiling.tile_x = opt.tile_x;
  tiling.tile_y = opt.tile_y;
  const WavefrontPlan wp = plan_wavefront(s, st, vb, bt, tiling);
  p.tile_x = wp.tile_x;
  p.tile_y = wp.tile_y;
  p.tiles = ((s.nx + p.tile_x - 1) / p.tile_x) * ((s.ny + p.tile_y - 1) / p.tile_y);
  p.block = std::max(1, opt.block);
  p.level0_frames += p.block - 1;  // the frames of a whole block
  const int64_t ring_bytes =
      p.tiles * internal::wavefront_workspace_bytes(bt, rz, p.tile_x + 2 * int64_t{frame.x},
                                                    p.tile_y + 2 * int64_t{frame.y}, vb);
  p.ring_frames = int64_t{bt - 1} * (2 * rz + 1) + 1;
  // Level k of a tile covers the tile widened by (bt - k) * r where the grid goes on.
  double computed = 0;
  const int64_t tx = std::min(p.tile_x, s.nx), ty = std::min(p.tile_y, s.ny);
  const bool periodic = b.kind == Boundary::Kind::kPeriodic;
  for (int k = 1; k <= bt; ++k) {
    const int64_t wx = tx < s.nx || periodic ? 2 * int64_t{bt - k} * st.radius_x() : 0;
    const int64_t wy = ty < s.ny || periodic ? 2 * int64_t{bt - k} * st.radius_y() : 0;
    computed += static_cast<double>((tx + wx) * (ty + wy));
  }
  p.redundancy = computed / (static_cast<double>(bt) * static_cast<double>(tx * ty));
  // Reads of the next block and writes of the previous one overlap the current block.
  p.io_buffers = 3 * int64_t{p.block};
  p.memory_bytes =
      p.frame_bytes * p.level0_frames + ring_bytes + p.io_buffers * m.layout.plane_stride;
  return p;
}

// Everything one sweep needs, allocated once per run.
template <typename T>
class StreamRun {
  // An aligned plane buffer for one read or write at a time.
  struct IoBuffer {
    internal::AlignedBuffer buf;
    int64_t plane = -1;  // the plane it holds or is transferring
    bool busy = false;   // a request is in flight
    bool ready = false;  // read: data arrived
    T* data() const { return buf.template data<T>(); }
  };

 public:
  StreamRun(Grid& grid, const Stencil& st, const Boundary& b, const StreamPlan& plan,
            const StreamOptions& opt, io::BlockIo& io)
      : grid_(grid),
        m_(grid.manifest()),
        s_(m_.shape),
        kernel_(st),
        b_(b),
        plan_(plan),
        opt_(opt),
        io_(io),
        rz_(kernel_.rz()) {
    for (size_t f = 0; f < m_.layout.files.size(); ++f) {
      paths_.push_back(grid.file_path(static_cast<int>(f)));
    }
  }

  Status allocate() {
    const Halo frame{plan_.bt * kernel_.rx(), plan_.bt * kernel_.ry(), 0};
    for (int64_t i = 0; i < plan_.level0_frames; ++i) {
      DG_ASSIGN_OR_RETURN(PaddedGrid<T> g, PaddedGrid<T>::allocate({s_.nx, s_.ny, 1}, frame));
      frames_.push_back(std::move(g));
    }
    if (b_.kind == Boundary::Kind::kDirichlet) {
      // The last frame is the constant plane beyond z's ends.
      std::vector<T> v(static_cast<size_t>(s_.plane_points()), static_cast<T>(b_.value));
      frames_.back().load_plane(0, v.data());
      frames_.back().fill_ghosts(b_, 1);
    }
    for (const Tile& t : tiles()) {
      ws_.push_back(std::make_unique<internal::WavefrontWorkspace<T>>(
          plan_.bt, rz_, t.x1 - t.x0 + 2 * int64_t{plan_.bt} * kernel_.rx(),
          t.y1 - t.y0 + 2 * int64_t{plan_.bt} * kernel_.ry(), static_cast<T>(b_.value)));
    }
    for (int i = 0; i < plan_.block; ++i) reads_.push_back({internal::AlignedBuffer(bytes())});
    for (int i = 0; i < 2 * plan_.block; ++i) {
      writes_.push_back({internal::AlignedBuffer(bytes())});
    }
    bool ok = true;
    for (const auto& w : ws_) ok = ok && w->ok();
    for (auto& r : reads_) ok = ok && r.buf.ok();
    for (auto& w : writes_) ok = ok && w.buf.ok();
    if (!ok) return Status(ErrorCode::kResource, "out of memory for the stream engine's buffers");
    return Status::Ok();
  }

  // One sweep of `levels` steps, in place: reads run ahead, writes behind, compute between.
  Status sweep(int levels, StreamStats& stats) {
    Status st = sweep_unchecked(levels, stats);
    if (!st.ok()) drain();  // the kernel must not write into buffers about to be freed
    return st;
  }

 private:
  Status sweep_unchecked(int levels, StreamStats& stats) {
    const int64_t nz = s_.nz;
    slot_.assign(static_cast<size_t>(nz), -1);
    free_frames_.clear();
    const int64_t usable = plan_.level0_frames - (b_.kind == Boundary::Kind::kDirichlet ? 1 : 0);
    for (int64_t f = 0; f < usable; ++f) free_frames_.push_back(static_cast<int>(f));
    build_read_order(levels);
    next_read_ = 0;
    levels_ = levels;
    const std::vector<Tile> all = tiles();
    std::vector<internal::Wavefront<T>> waves;
    for (size_t t = 0; t < all.size(); ++t) {
      const Tile tile = all[t];
      const int64_t gx = tile.x0 - int64_t{levels} * kernel_.rx();
      const int64_t gy = tile.y0 - int64_t{levels} * kernel_.ry();
      waves.emplace_back(
          kernel_, b_, s_, levels, tile, *ws_[t],
          [this, gx, gy](int64_t z) -> const T* { return frame_origin(z, gx, gy); },
          frames_[0].stride(),
          [this, tile](int64_t z) { return output_plane(z) + tile.y0 * s_.nx + tile.x0; }, s_.nx);
    }
    const internal::Wavefront<T>& wf = waves.front();
    const int64_t ntiles = static_cast<int64_t>(waves.size());
    // Blocks of z-steps: thread 0 makes the block's planes and output buffers ready, all
    // threads advance tiles through the whole block, thread 0 writes and reads further.
    Status shared;
#pragma omp parallel num_threads(plan_.threads)
    {
      auto t0 = Clock::now();
      for (int64_t i0 = wf.first_step(); i0 < wf.end_step(); i0 += plan_.block) {
        const int64_t i1 = std::min(wf.end_step(), i0 + plan_.block);
#pragma omp master
        {
          if (shared.ok()) shared = prepare_block(wf, i0, i1, stats);
          t0 = Clock::now();
        }
#pragma omp barrier
        if (!shared.ok()) break;
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < ntiles; ++t) {
          for (int64_t i = i0; i < i1; ++i) waves[static_cast<size_t>(t)].step(i, 0, 1, {});
        }
#pragma omp master
        {
          stats.compute_seconds += seconds_since(t0);
          shared = finish_block(wf, i0, i1);
        }
      }
    }
    DG_RETURN_IF_ERROR(shared);
    while (std::any_of(writes_.begin(), writes_.end(), [](const IoBuffer& w) { return w.busy; })) {
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
    return Status::Ok();
  }

  using Tile = internal::WavefrontFrame;
  std::vector<Tile> tiles() const {
    std::vector<Tile> out;
    for (int64_t y = 0; y < s_.ny; y += plan_.tile_y) {
      for (int64_t x = 0; x < s_.nx; x += plan_.tile_x) {
        out.push_back({x, std::min(s_.nx, x + plan_.tile_x), y, std::min(s_.ny, y + plan_.tile_y)});
      }
    }
    return out;
  }

  // The buffer output plane z goes to (assigned by prepare_block).
  T* output_plane(int64_t z) const {
    return writes_[static_cast<size_t>(block_out_[static_cast<size_t>(z - block_z0_)])].data();
  }

  // Before steps [i0, i1): their level-0 planes in frames, a write buffer per output plane.
  Status prepare_block(const internal::Wavefront<T>& wf, int64_t i0, int64_t i1,
                       StreamStats& stats) {
    const int64_t nz = s_.nz;
    for (int64_t i = i0; i < i1; ++i) {
      if (b_.kind == Boundary::Kind::kPeriodic || i < nz) {
        DG_RETURN_IF_ERROR(ensure_frame(((i % nz) + nz) % nz, stats));
      }
    }
    block_z0_ = wf.output_plane(i0);
    block_out_.assign(static_cast<size_t>(i1 - i0), -1);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t z = wf.output_plane(i);
      if (z < 0 || z >= nz) continue;
      DG_ASSIGN_OR_RETURN(const size_t b, idle_write_buffer(stats));
      writes_[b].busy = true;  // claimed until finish_block submits it
      block_out_[static_cast<size_t>(i - i0)] = static_cast<int>(b);
    }
    io_.flush();  // reads queued while converting start before the block computes
    return Status::Ok();
  }

  // After steps [i0, i1): write the finished planes, free level-0 planes no step needs any
  // more, read further ahead.
  Status finish_block(const internal::Wavefront<T>& wf, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int b = block_out_[static_cast<size_t>(i - i0)];
      if (b >= 0) {
        DG_RETURN_IF_ERROR(
            submit(writes_[static_cast<size_t>(b)], io::Op::kWrite, wf.output_plane(i), b));
      }
      release_frame(i - 2 * rz_, levels_);
    }
    DG_RETURN_IF_ERROR(pump_reads());
    io_.flush();  // the block's writes and the next reads in one system call
    return Status::Ok();
  }

  // Makes level-0 plane p available in a frame: reads it if needed, converts it from the
  // disk layout and fills its ghost frame by the boundary rule.
  Status ensure_frame(int64_t p, StreamStats& stats) {
    if (slot_[static_cast<size_t>(p)] >= 0) return Status::Ok();
    while (true) {
      DG_RETURN_IF_ERROR(pump_reads());
      for (IoBuffer& r : reads_) {
        if (r.plane == p && r.ready) {
          if (free_frames_.empty()) {
            return Status(ErrorCode::kResource, "stream engine: no free frame (planning error)");
          }
          const int f = free_frames_.back();
          free_frames_.pop_back();
          PaddedGrid<T>& frame = frames_[static_cast<size_t>(f)];
          frame.load_plane(0, r.data());
          frame.fill_ghosts(b_, 1);
          slot_[static_cast<size_t>(p)] = f;
          r = IoBuffer{std::move(r.buf)};
          return pump_reads();
        }
      }
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
  }

  // Level-0 plane q is no longer needed after step q + 2 rz (pinned planes stay).
  void release_frame(int64_t q, int levels) {
    if (q < 0 || q >= s_.nz || is_pinned(b_, levels, rz_, s_.nz, q)) return;
    int& slot = slot_[static_cast<size_t>(q)];
    if (slot >= 0) free_frames_.push_back(slot);
    slot = -1;
  }

  // Starts reads of the next planes in order while read buffers are free.
  Status pump_reads() {
    for (size_t b = 0; b < reads_.size() && next_read_ < order_.size(); ++b) {
      if (reads_[b].busy || reads_[b].plane >= 0) continue;
      DG_RETURN_IF_ERROR(submit(reads_[b], io::Op::kRead, order_[next_read_++], b));
    }
    return Status::Ok();
  }

  Result<size_t> idle_write_buffer(StreamStats& stats) {
    while (true) {
      for (size_t b = 0; b < writes_.size(); ++b) {
        if (!writes_[b].busy) return b;
      }
      DG_RETURN_IF_ERROR(complete_one(stats));
    }
  }

  Status submit(IoBuffer& buf, io::Op op, int64_t plane, size_t index) {
    const PlaneLocation loc = m_.locate(plane);
    buf.plane = plane;
    buf.busy = true;
    buf.ready = false;
    io::Request r;
    r.op = op;
    r.fd = grid_.fd(loc.file);
    r.path = paths_[static_cast<size_t>(loc.file)];
    r.offset = loc.offset;
    r.length = bytes();
    r.buffer = buf.buf.data();
    r.tag = (op == io::Op::kWrite ? kWriteTag : 0) | index;
    if (op == io::Op::kWrite) grid_.record_plane(plane, buf.buf.data());  // integrity hook
    return io_.submit(r);
  }

  Status complete_one(StreamStats& stats) {
    const auto t0 = Clock::now();
    auto c = io_.wait();
    stats.io_wait_seconds += seconds_since(t0);
    if (!c.ok()) return c.status();
    const bool write = (c->tag & kWriteTag) != 0;
    IoBuffer& buf = (write ? writes_ : reads_)[static_cast<size_t>(c->tag & ~kWriteTag)];
    buf.busy = false;
    if (!c->status.ok()) return c->status;
    if (write) {
      stats.bytes_written += bytes();
      buf.plane = -1;
    } else {
      stats.bytes_read += bytes();
      DG_RETURN_IF_ERROR(grid_.verify_plane(buf.plane, buf.buf.data()));  // integrity hook
      buf.ready = true;
    }
    return Status::Ok();
  }

  void drain() {
    while (io_.in_flight() > 0) (void)io_.wait();
  }

  size_t bytes() const { return static_cast<size_t>(m_.layout.plane_stride); }

  // Reads in the order planes are first needed: periodic sweeps start with the last planes.
  void build_read_order(int levels) {
    order_.clear();
    const int64_t edge = std::min(s_.nz, int64_t{levels} * rz_);
    if (b_.kind == Boundary::Kind::kPeriodic) {
      for (int64_t p = s_.nz - edge; p < s_.nz; ++p) order_.push_back(p);
    }
    for (int64_t p = 0; p < s_.nz; ++p) {
      if (b_.kind == Boundary::Kind::kPeriodic && p >= s_.nz - edge) break;
      order_.push_back(p);
    }
  }

  // Level-0 plane z at global (gx, gy): frame cells beyond the grid hold boundary values.
  const T* frame_origin(int64_t z, int64_t gx, int64_t gy) const {
    const int64_t nz = s_.nz;
    int64_t p = z;
    const PaddedGrid<T>* f = &frames_.back();  // dirichlet beyond z's ends: the constant frame
    if (z >= 0 && z < nz) {
      f = &frames_[static_cast<size_t>(slot_[static_cast<size_t>(p)])];
    } else if (b_.kind != Boundary::Kind::kDirichlet) {
      p = b_.kind == Boundary::Kind::kNeumann ? (z < 0 ? 0 : nz - 1) : ((z % nz) + nz) % nz;
      f = &frames_[static_cast<size_t>(slot_[static_cast<size_t>(p)])];
    }
    return f->plane(0) + gy * f->stride() + gx;
  }

  Grid& grid_;
  const Manifest& m_;
  const Shape s_;
  const StencilKernel<T> kernel_;
  const Boundary& b_;
  const StreamPlan& plan_;
  const StreamOptions& opt_;
  io::BlockIo& io_;
  const int rz_;
  std::vector<PaddedGrid<T>> frames_;
  std::vector<std::unique_ptr<internal::WavefrontWorkspace<T>>> ws_;
  std::vector<IoBuffer> reads_, writes_;
  std::vector<int> slot_;
  std::vector<int> free_frames_;
  std::vector<int64_t> order_;
  size_t next_read_ = 0;
  int levels_ = 1;
  int64_t block_z0_ = 0;        // output plane of the block's first step
  std::vector<int> block_out_;  // write buffer of each step's output plane, or -1
  std::vector<std::string> paths_;
  static constexpr uint64_t kWriteTag = uint64_t{1} << 63;
};

}  // namespace

Result<StreamPlan> plan_stream(const Manifest& m, const Stencil& st, const Boundary& b,
                               int64_t steps, const StreamOptions& opt) {
  if (opt.mem_budget == 0) {
    return invalid_argument("the stream method needs a memory budget; give --mem, e.g. --mem 1GiB");
  }
  if (opt.block < 1) return invalid_argument("the stream block must be at least one z-step");
  const StreamPlan minimum = plan_for_bt(m, st, b, 1, opt);
  const int deepest = static_cast<int>(std::clamp<int64_t>(steps, 1, 64));
  StreamPlan p = minimum;
  if (opt.bt > 0) {
    p = plan_for_bt(m, st, b, static_cast<int>(std::min<int64_t>(opt.bt, deepest)), opt);
  } else {
    // Per-step time, in units of a perfectly efficient compute step: the larger of the
    // tiles' redundant work and the disk traffic relative to what the disks sustain.
    const double traffic =
        2.0 * static_cast<double>(dtype_size(m.dtype)) / std::max(opt.disk_bytes_per_update, 1e-3);
    double best = 0;
    for (int bt = 1; bt <= deepest; ++bt) {
      const StreamPlan q = plan_for_bt(m, st, b, bt, opt);
      if (static_cast<uint64_t>(q.memory_bytes) > opt.mem_budget) continue;
      const double cost = std::max(q.redundancy, traffic / bt);
      if (bt == 1 || cost < best) {
        best = cost;
        p = q;
      }
    }
  }
  if (static_cast<uint64_t>(p.memory_bytes) > opt.mem_budget) {
    return invalid_argument("--mem " + format_size(opt.mem_budget) + " is below the " +
                            format_size(p.memory_bytes) + " the stream method needs with bt " +
                            std::to_string(p.bt) + " (the minimum, bt 1, is " +
                            format_size(minimum.memory_bytes) + "); raise --mem" +
                            (opt.bt > 0 ? " or lower --bt" : ""));
  }
  p.minimum_bytes = minimum.memory_bytes;
  p.sweeps = (std::max<int64_t>(steps, 0) + p.bt - 1) / p.bt;
  return p;
}

Result<StreamStats> advance_stream(Grid& grid, const Stencil& stencil, const Boundary& boundary,
                                   int64_t steps, const StreamPlan& plan,
                                   const StreamOptions& options, const ProgressFn& progress) {
  io::BlockIoOptions io_opt;
  io_opt.backend = options.io;
  io_opt.queue_depth = static_cast<unsigned>(plan.io_buffers);
  io_opt.fault_hook = options.fault_hook;
  auto io = io::make_block_io(io_opt);
  if (!io.ok() && io.status().code() == ErrorCode::kUnsupported &&
      options.io == io::Backend::kUring) {
    io_opt.backend = io::Backend::kThreads;  // reported: stats.backend says which one ran
    io = io::make_block_io(io_opt);
  }
  if (!io.ok()) return io.status();
  StreamStats stats;
  stats.backend = io_opt.backend;
  Status st = dispatch_dtype(grid.dtype(), [&](auto tag) -> Status {
    StreamRun<decltype(tag)> run(grid, stencil, boundary, plan, options, **io);
    DG_RETURN_IF_ERROR(run.allocate());
    while (stats.steps < steps) {
      const int levels = static_cast<int>(std::min<int64_t>(plan.bt, steps - stats.steps));
      DG_RETURN_IF_ERROR(run.sweep(levels, stats));
      stats.steps += levels;
      if (progress && !progress(stats.steps, steps)) break;
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return stats;
}

}  // namespace deepgrid
