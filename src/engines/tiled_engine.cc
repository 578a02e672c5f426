// The tiled method (seed paper 001): blocks with halos advanced in memory, two copies on disk.
#include "engines/tiled_engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "core/stopwatch.h"
#include "core/threads.h"
#include "engines/subnormals.h"
#include "kernels/stencil_kernel.h"

namespace deepgrid {
namespace {

using Clock = std::chrono::steady_clock;

using internal::seconds_since;

constexpr int64_t kRowBand = 8;      // rows per unit of parallel work
constexpr int64_t kStrideLane = 16;  // block buffer rows are padded to 16 values

// A half-open interval along one axis.
struct Span {
  int64_t lo = 0, hi = 0;
  int64_t size() const { return hi - lo; }
};

// Where level k of an L-level pass is valid along an axis for the block [b0, b1) of a grid
// of n: the block widened by (L - k) r, wrapped (periodic) or clipped at the grid's faces.
Span level_span(int64_t b0, int64_t b1, int64_t n, int r, int levels, int k, bool periodic) {
  const int64_t w = int64_t{levels - k} * r;
  if (periodic) return {b0 - w, b1 + w};
  return {std::max<int64_t>(0, b0 - w), std::min(n, b1 + w)};
}

// One axis's contribution to the cost model: extent read and extents computed per level.
struct AxisCost {
  double read = 0;
  std::vector<double> computed;  // index k = 1..L
};

// Block extent b along an axis of n split into ceil(n / b) equal blocks (an interior block:
// widened on both sides unless the axis is whole and not periodic).
AxisCost axis_cost(int64_t b, int64_t n, int r, int levels, bool periodic) {
  AxisCost c;
  const bool widened = periodic || b < n;
  c.read = static_cast<double>(b + (widened ? 2 * int64_t{levels} * r : 0));
  c.computed.resize(static_cast<size_t>(levels) + 1);
  for (int k = 1; k <= levels; ++k) {
    c.computed[static_cast<size_t>(k)] =
        static_cast<double>(b + (widened ? 2 * int64_t{levels - k} * r : 0));
  }
  return c;
}

// Evens a block extent out so that ceil(n / b) blocks have equal size.
int64_t even_extent(int64_t b, int64_t n) {
  const int64_t count = (n + b - 1) / b;
  return (n + count - 1) / count;
}

struct Geometry {
  int64_t stride = 0;        // values per buffer row
  int64_t rows = 0;          // rows per buffer plane
  int64_t planes = 0;        // buffer planes
  int64_t io_bytes = 0;      // aligned buffer for one plane's rows
  int64_t buffer_bytes = 0;  // one block buffer
  int64_t memory_bytes = 0;  // two block buffers and the I/O buffer
};

// Buffers for blocks of by x bz with halos of bt * r (each axis's buffer starts bt * r before
// the block).
Geometry geometry(const Manifest& m, const Stencil& st, int bt, int64_t by, int64_t bz) {
  const Shape& s = m.shape;
  const int64_t vb = static_cast<int64_t>(dtype_size(m.dtype));
  Geometry g;
  g.stride = round_up(s.nx + 2 * int64_t{bt} * st.radius_x(), kStrideLane);
  g.rows = by + 2 * int64_t{bt} * st.radius_y();
  g.planes = bz + 2 * int64_t{bt} * st.radius_z();
  const int64_t row_bytes = s.nx * vb;
  g.io_bytes = std::min(
      m.layout.plane_stride,
      round_up(std::min(s.ny, g.rows) * row_bytes, kDirectIoAlignment) + kDirectIoAlignment);
  g.buffer_bytes = static_cast<int64_t>(
      internal::paged_bytes(static_cast<size_t>(g.stride * g.rows * g.planes * vb), false));
  g.memory_bytes = 2 * g.buffer_bytes + g.io_bytes;
  return g;
}

TiledPlan tiled_plan_for(const Manifest& m, const Stencil& st, const Boundary& b, int bt,
                         int64_t by, int64_t bz, const TiledOptions& opt) {
  const Shape& s = m.shape;
  const bool periodic = b.kind == Boundary::Kind::kPeriodic;
  TiledPlan p;
  p.bt = bt;
  p.threads = internal::resolved_threads(opt.threads);
  p.flush_subnormals = opt.flush_subnormals;
  p.block_y = even_extent(by, s.ny);
  p.block_z = even_extent(bz, s.nz);
  p.blocks = ((s.ny + p.block_y - 1) / p.block_y) * ((s.nz + p.block_z - 1) / p.block_z);
  const Geometry g = geometry(m, st, bt, p.block_y, p.block_z);
  p.block_buffer_bytes = g.buffer_bytes;
  p.io_buffer_bytes = g.io_bytes;
  p.memory_bytes = g.memory_bytes;
  const AxisCost x = axis_cost(s.nx, s.nx, st.radius_x(), bt, periodic);
  const AxisCost y = axis_cost(p.block_y, s.ny, st.radius_y(), bt, periodic);
  const AxisCost z = axis_cost(p.block_z, s.nz, st.radius_z(), bt, periodic);
  double computed = 0;
  for (size_t k = 1; k <= static_cast<size_t>(bt); ++k) {
    computed += x.computed[k] * y.computed[k] * z.computed[k];
  }
  const double useful = static_cast<double>(s.nx * p.block_y * p.block_z);
  p.redundancy = computed / (useful * bt);
  p.read_amplification = y.read * z.read / static_cast<double>(p.block_y * p.block_z);
  p.disk_bytes = 0;
  for (const DataFile& f : m.layout.files) p.disk_bytes += f.bytes;
  return p;
}

// The deepest block for this bt and block height that fits the budget, if any.
bool fit_block(const Manifest& m, const Stencil& st, int bt, int64_t by, uint64_t budget,
               int64_t* bz) {
  const Geometry one = geometry(m, st, bt, by, 1);
  if (static_cast<uint64_t>(one.memory_bytes) > budget) return false;
  const int64_t per_plane = 2 * one.stride * one.rows * static_cast<int64_t>(dtype_size(m.dtype));
  const int64_t extra = static_cast<int64_t>(budget) - one.memory_bytes;
  *bz = std::min(m.shape.nz, 1 + extra / per_plane);
  while (*bz > 1 && static_cast<uint64_t>(geometry(m, st, bt, by, *bz).memory_bytes) > budget) {
    --*bz;  // the 64-byte rounding of the buffers
  }
  return true;
}

// The whole-run state: files, buffers, kernel.
template <typename T>
class TiledRun {
 public:
  TiledRun(Grid& grid, const Stencil& st, const Boundary& b, const TiledPlan& plan)
      : grid_(grid),
        m_(grid.manifest()),
        s_(m_.shape),
        kernel_(st),
        b_(b),
        plan_(plan),
        periodic_(b.kind == Boundary::Kind::kPeriodic),
        g_(geometry(m_, st, plan.bt, plan.block_y, plan.block_z)),
        gx_(int64_t{plan.bt} * kernel_.rx()),
        gy_(int64_t{plan.bt} * kernel_.ry()),
        gz_(int64_t{plan.bt} * kernel_.rz()) {}

  // Allocates the buffers.
  Status prepare() {
    for (internal::AlignedBuffer& buf : blocks_) {
      buf = internal::AlignedBuffer(static_cast<size_t>(g_.buffer_bytes));
      if (!buf.ok()) return out_of_memory();
    }
    io_ = internal::AlignedBuffer(static_cast<size_t>(g_.io_bytes));
    if (!io_.ok()) return out_of_memory();
    return Status::Ok();
  }

  // One pass of `levels` steps from the grid's files into their replacement (the second copy),
  // which commit() then makes the grid's files at the new step: a crash leaves the grid at
  // the last pass's step. The checksums are unknown until the caller reads the planes back.
  Status pass(int levels, TiledStats& stats) {
    DG_RETURN_IF_ERROR(grid_.create_replacement());
    std::vector<File> src, dst;
    for (int f = 0; f < static_cast<int>(m_.layout.files.size()); ++f) {
      src.push_back({grid_.file_path(f), grid_.fd(f)});
      dst.push_back(
          {grid_.file_path(f, FileSet::kReplacement), grid_.fd(f, FileSet::kReplacement)});
    }
    for (int64_t z0 = 0; z0 < s_.nz; z0 += plan_.block_z) {
      for (int64_t y0 = 0; y0 < s_.ny; y0 += plan_.block_y) {
        const Block blk{y0, std::min(s_.ny, y0 + plan_.block_y), z0,
                        std::min(s_.nz, z0 + plan_.block_z)};
        auto t0 = Clock::now();
        DG_RETURN_IF_ERROR(load(blk, levels, src, stats));
        stats.io_seconds += seconds_since(t0);
        t0 = Clock::now();
        for (int k = 1; k <= levels; ++k) advance_level(blk, levels, k);
        stats.compute_seconds += seconds_since(t0);
        t0 = Clock::now();
        DG_RETURN_IF_ERROR(store(blk, levels, dst, stats));
        stats.io_seconds += seconds_since(t0);
      }
    }
    grid_.forget_checksums();
    return Status::Ok();
  }

  // `old`: what becomes of the files replaced (kept for the next pass's writes).
  Status commit(int levels, Grid::OldFiles old) {
    Manifest next = m_;
    next.step += levels;
    return grid_.commit_replacement(next, old);
  }

 private:
  struct File {
    std::string path;
    int fd = -1;
  };
  struct Block {
    int64_t y0, y1, z0, z1;
  };

  static Status out_of_memory() {
    return Status(ErrorCode::kResource, "cannot allocate the tiled method's block buffers");
  }

  Span span(const Block& blk, char axis, int levels, int k) const {
    switch (axis) {
      case 'x':
        return level_span(0, s_.nx, s_.nx, kernel_.rx(), levels, k, periodic_);
      case 'y':
        return level_span(blk.y0, blk.y1, s_.ny, kernel_.ry(), levels, k, periodic_);
      default:
        return level_span(blk.z0, blk.z1, s_.nz, kernel_.rz(), levels, k, periodic_);
    }
  }

  // Element (x, y, z) (global coordinates) of block buffer `level`'s parity.
  T* at(const Block& blk, int level, int64_t x, int64_t y, int64_t z) const {
    T* base = blocks_[static_cast<size_t>(level % 2)].template data<T>();
    return base + ((z - blk.z0 + gz_) * g_.rows + (y - blk.y0 + gy_)) * g_.stride + (x + gx_);
  }

  static int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

  // Reads the aligned byte range of rows [row0, row0 + rows) of the plane at `offset` into
  // the I/O buffer; returns where row0 starts in it.
  Result<const T*> read_rows(const File& f, int64_t offset, int64_t row0, int64_t rows,
                             TiledStats& stats) {
    const int64_t row_bytes = s_.nx * static_cast<int64_t>(sizeof(T));
    const int64_t begin = offset + row0 * row_bytes;
    const int64_t first = begin / kDirectIoAlignment * kDirectIoAlignment;
    const int64_t last = round_up(begin + rows * row_bytes, kDirectIoAlignment);
    DG_RETURN_IF_ERROR(
        internal::pread_full(f.fd, io_.data(), static_cast<size_t>(last - first), first, f.path));
    stats.bytes_read += static_cast<uint64_t>(last - first);
    return reinterpret_cast<const T*>(io_.data() + (begin - first));
  }

  // Level 0: the block widened by levels * r, read from `src` (wrapped where periodic).
  Status load(const Block& blk, int levels, const std::vector<File>& src, TiledStats& stats) {
    const Span xs = span(blk, 'x', levels, 0), ys = span(blk, 'y', levels, 0),
               zs = span(blk, 'z', levels, 0);
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      const PlaneLocation loc = grid_.locate(wrap(z, s_.nz));
      const File& f = src[static_cast<size_t>(loc.file)];
      for (int64_t y = ys.lo; y < ys.hi;) {
        const int64_t sy = wrap(y, s_.ny);
        const int64_t rows = std::min(ys.hi - y, s_.ny - sy);  // contiguous source rows
        DG_ASSIGN_OR_RETURN(const T* in, read_rows(f, loc.offset, sy, rows, stats));
        for (int64_t j = 0; j < rows; ++j)
          copy_row(in + j * s_.nx, at(blk, 0, xs.lo, y + j, z), xs);
        y += rows;
      }
    }
    return Status::Ok();
  }

  // Copies the row's x in [xs.lo, xs.hi), wrapped into [0, nx), to `out`.
  void copy_row(const T* row, T* out, Span xs) const {
    for (int64_t x = xs.lo; x < xs.hi;) {
      const int64_t sx = wrap(x, s_.nx);
      const int64_t n = std::min(xs.hi - x, s_.nx - sx);
      std::memcpy(out + (x - xs.lo), row + sx, sizeof(T) * static_cast<size_t>(n));
      x += n;
    }
  }

  // Writes the block's interior (level `levels`) to `dst`: per plane one aligned range, its
  // first and last pages read first when the block's rows only partly cover them.
  Status store(const Block& blk, int levels, const std::vector<File>& dst, TiledStats& stats) {
    const int64_t row_bytes = s_.nx * static_cast<int64_t>(sizeof(T));
    for (int64_t z = blk.z0; z < blk.z1; ++z) {
      const PlaneLocation loc = grid_.locate(z, FileSet::kReplacement);
      const File& f = dst[static_cast<size_t>(loc.file)];
      const int64_t begin = loc.offset + blk.y0 * row_bytes;
      const int64_t end = loc.offset + blk.y1 * row_bytes;
      const int64_t first = begin / kDirectIoAlignment * kDirectIoAlignment;
      const int64_t last = round_up(end, kDirectIoAlignment);
      const int64_t last_page = last - kDirectIoAlignment;
      std::byte* buf = io_.data();
      const bool head = first < begin;
      const bool tail = end < last && !(head && last_page == first);  // not the same page
      if (head) {
        DG_RETURN_IF_ERROR(internal::pread_full(f.fd, buf, kDirectIoAlignment, first, f.path));
      }
      if (tail) {
        DG_RETURN_IF_ERROR(internal::pread_full(f.fd, buf + (last_page - first), kDirectIoAlignment,
                                                last_page, f.path));
      }
      T* out = reinterpret_cast<T*>(buf + (begin - first));
      for (int64_t y = blk.y0; y < blk.y1; ++y) {
        std::memcpy(out + (y - blk.y0) * s_.nx, at(blk, levels, 0, y, z),
                    static_cast<size_t>(row_bytes));
      }
      DG_RETURN_IF_ERROR(
          internal::pwrite_full(f.fd, buf, static_cast<size_t>(last - first), first, f.path));
      stats.bytes_written += static_cast<uint64_t>(last - first);
    }
    return Status::Ok();
  }

  // Computes level k from level k - 1 on level k's span, with every thread.
  void advance_level(const Block& blk, int levels, int k) {
    if (!periodic_) impose_boundary(blk, levels, k);
    const Span xs = span(blk, 'x', levels, k), ys = span(blk, 'y', levels, k),
               zs = span(blk, 'z', levels, k);
    const int64_t bands = (ys.size() + kRowBand - 1) / kRowBand;
    const int rz = kernel_.rz();
#pragma omp parallel for collapse(2) schedule(dynamic, 1) num_threads(plan_.threads)
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      for (int64_t band = 0; band < bands; ++band) {
        const internal::SubnormalsFlushed flushed(plan_.flush_subnormals);  // (cheap: a row band)
        const T* in[2 * kMaxStencilRadius + 1];
        for (int dz = -rz; dz <= rz; ++dz) in[rz + dz] = at(blk, k - 1, -gx_, blk.y0 - gy_, z + dz);
        const int64_t y0 = ys.lo + band * kRowBand;
        const Rect rect{xs.lo + gx_, xs.hi + gx_, y0 - blk.y0 + gy_,
                        std::min(ys.hi, y0 + kRowBand) - blk.y0 + gy_};
        kernel_.apply(in, g_.stride, at(blk, k, xs.lo, y0, z), g_.stride, rect);
      }
    }
  }

  // Fills the ghost cells of level k - 1 that level k reads outside the grid (dirichlet and
  // neumann): x ghosts of in-grid rows, then ghost rows, then ghost planes, each from the
  // nearest cells already valid, as PaddedGrid::fill_ghosts does for a whole grid.
  void impose_boundary(const Block& blk, int levels, int k) const {
    const int j = k - 1;
    const auto widen = [](Span s, int r) { return Span{s.lo - r, s.hi + r}; };
    const Span xs = widen(span(blk, 'x', levels, k), kernel_.rx());
    const Span ys = widen(span(blk, 'y', levels, k), kernel_.ry());
    const Span zs = widen(span(blk, 'z', levels, k), kernel_.rz());
    const bool dirichlet = b_.kind == Boundary::Kind::kDirichlet;
    const T v = static_cast<T>(b_.value);
    const auto clamp = [](int64_t i, int64_t n) { return std::clamp<int64_t>(i, 0, n - 1); };
    const auto fill = [&](T* out, const T* from, int64_t n) {
      if (dirichlet) {
        std::fill(out, out + n, v);
      } else {
        std::copy(from, from + n, out);
      }
    };
    const Span zin{std::max<int64_t>(zs.lo, 0), std::min(zs.hi, s_.nz)};
    const Span yin{std::max<int64_t>(ys.lo, 0), std::min(ys.hi, s_.ny)};
    for (int64_t z = zin.lo; z < zin.hi; ++z) {
      for (int64_t y = yin.lo; y < yin.hi; ++y) {
        T* row = at(blk, j, 0, y, z);
        for (int64_t x = xs.lo; x < 0; ++x) row[x] = dirichlet ? v : row[0];
        for (int64_t x = s_.nx; x < xs.hi; ++x) row[x] = dirichlet ? v : row[s_.nx - 1];
      }
      for (int64_t y = ys.lo; y < ys.hi; ++y) {
        if (y >= 0 && y < s_.ny) continue;
        fill(at(blk, j, xs.lo, y, z), at(blk, j, xs.lo, clamp(y, s_.ny), z), xs.size());
      }
    }
    for (int64_t z = zs.lo; z < zs.hi; ++z) {
      if (z >= 0 && z < s_.nz) continue;
      for (int64_t y = ys.lo; y < ys.hi; ++y) {
        fill(at(blk, j, xs.lo, y, z), at(blk, j, xs.lo, y, clamp(z, s_.nz)), xs.size());
      }
    }
  }

  Grid& grid_;
  const Manifest& m_;
  const Shape s_;
  const StencilKernel<T> kernel_;
  const Boundary b_;
  const TiledPlan plan_;
  const bool periodic_;
  const Geometry g_;
  const int64_t gx_, gy_, gz_;  // each buffer starts this far before its block
  internal::AlignedBuffer blocks_[2];
  internal::AlignedBuffer io_;
};

}  // namespace

Result<TiledPlan> plan_tiled(const Manifest& m, const Stencil& st, const Boundary& b, int64_t steps,
                             const TiledOptions& opt) {
  if (opt.mem_budget == 0) {
    return invalid_argument("the tiled method needs a memory budget; give --mem, e.g. --mem 1GiB");
  }
  const TiledPlan minimum = tiled_plan_for(m, st, b, 1, 1, 1, opt);
  const int deepest = static_cast<int>(std::clamp<int64_t>(steps, 1, 64));
  const int bt_lo = opt.bt > 0 ? std::min(opt.bt, deepest) : 1;
  const int bt_hi = opt.bt > 0 ? bt_lo : deepest;
  // Per useful update, in units of one update's compute: redundant halo work, plus the
  // pass's disk traffic (read the widened blocks, write the grid) over what the disk sustains
  // per update. Reads, compute and writes follow each other.
  const double value_bytes = static_cast<double>(dtype_size(m.dtype));
  const double disk = std::max(opt.disk_bytes_per_update, 1e-3);
  bool found = false;
  double best = 0;
  TiledPlan p = minimum;
  const int64_t by_lo = opt.block_y > 0 ? std::min(opt.block_y, m.shape.ny) : 1;
  const int64_t by_hi = opt.block_y > 0 ? by_lo : m.shape.ny;
  for (int bt = bt_lo; bt <= bt_hi; ++bt) {
    for (int64_t by = by_lo; by <= by_hi; ++by) {
      int64_t bz = 0;
      if (!fit_block(m, st, bt, by, opt.mem_budget, &bz)) break;  // taller blocks fit less
      if (opt.block_z > 0) {
        if (bz < std::min(opt.block_z, m.shape.nz)) break;
        bz = std::min(opt.block_z, m.shape.nz);
      }
      const TiledPlan q = tiled_plan_for(m, st, b, bt, by, bz, opt);
      const double cost = q.redundancy + (q.read_amplification + 1) * value_bytes / (bt * disk);
      if (!found || cost < best) {
        found = true;
        best = cost;
        p = q;
      }
    }
  }
  if (!found) {
    return invalid_argument(
        "--mem " + format_size(opt.mem_budget) + " is below what the tiled method needs" +
        (opt.bt > 0 ? " with bt " + std::to_string(bt_lo) : std::string()) +
        (opt.block_y > 0 || opt.block_z > 0 ? " and the blocks asked for" : "") +
        " (the minimum, bt 1, is " + format_size(static_cast<uint64_t>(minimum.memory_bytes)) +
        "); raise --mem" +
        (opt.bt > 0 || opt.block_y > 0 || opt.block_z > 0 ? " or ask for less" : ""));
  }
  p.minimum_bytes = minimum.memory_bytes;
  p.passes = (std::max<int64_t>(steps, 0) + p.bt - 1) / p.bt;
  return p;
}

Result<TiledStats> advance_tiled(Grid& grid, const Stencil& stencil, const Boundary& boundary,
                                 int64_t steps, const TiledPlan& plan, const ProgressFn& progress) {
  TiledStats stats;
  if (steps <= 0) return stats;
  Status st = dispatch_dtype(grid.dtype(), [&](auto tag) -> Status {
    TiledRun<decltype(tag)> run(grid, stencil, boundary, plan);
    DG_RETURN_IF_ERROR(run.prepare());
    while (stats.steps < steps) {
      const int levels = static_cast<int>(std::min<int64_t>(plan.bt, steps - stats.steps));
      DG_RETURN_IF_ERROR(run.pass(levels, stats));
      stats.steps += levels;
      const bool go_on = !progress || progress(stats.steps, steps);
      const bool more = go_on && stats.steps < steps;
      DG_RETURN_IF_ERROR(
          run.commit(levels, more ? Grid::OldFiles::kKeep : Grid::OldFiles::kRemove));
      if (!go_on) break;
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return stats;
}

}  // namespace deepgrid
