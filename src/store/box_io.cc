#include "deepgrid/box_io.h"

#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "store/coef_request.h"

namespace deepgrid {
namespace {

using internal::AlignedBuffer;

constexpr int64_t kRequestTargetBytes = 8 << 20;

// The 4096-byte aligned byte range of a plane's part that holds the box's rows.
struct Extent {
  int64_t begin = 0, end = 0;
  int64_t bytes() const { return end - begin; }
};

// The part of a plane that holds the box's component: its slot in the ring, or (a
// coefficient on a grid with coefficient files) its place in the coefficient files.
struct Part {
  bool coef = false;
  int component = 0;   // the box's component, counted within the part
  int64_t lead = 0;    // where the part's values start in it (Layout::coef_lead)
  int64_t bytes = 0;   // the part's values
  int64_t stride = 0;  // the part on disk (whole blocks)

  static Part of(const Manifest& m, int component) {
    const Layout& l = m.layout;
    const int state = m.components() - m.coef_components();
    if (component >= state) {
      return {true, component - state, l.coef_lead(), l.coef_bytes, l.coef_stride()};
    }
    return {false, component, 0, l.ring_bytes(), l.plane_stride};
  }
  PlaneLocation locate(const Manifest& m, int64_t z) const {
    return coef ? m.locate_coef(z) : m.locate(z);
  }
  int fd(const Grid& g, int file) const { return coef ? g.coef_fd(file) : g.fd(file); }
  std::string path(const Grid& g, int file) const {
    return coef ? g.coef_path(file) : g.file_path(file);
  }
};

// Byte offset of value (x, y) of the box's component within its part of a plane.
int64_t value_offset(const Shape& s, DType dtype, const Part& part, int64_t y, int64_t x) {
  return part.lead +
         ((part.component * s.ny + y) * s.nx + x) * static_cast<int64_t>(dtype_size(dtype));
}

Extent plane_extent(const Grid& grid, const Box& box, const Part& part) {
  const auto es = static_cast<int64_t>(dtype_size(grid.dtype()));
  const int64_t first = value_offset(grid.shape(), grid.dtype(), part, box.y.start, box.x.start);
  const int64_t end =
      value_offset(grid.shape(), grid.dtype(), part, box.y.last(), box.x.last()) + es;
  return {first / kDirectIoAlignment * kDirectIoAlignment,
          std::min(round_up(end, kDirectIoAlignment), part.stride)};
}

// Whether writing the box's values over `extent` overwrites all of it (no read needed first):
// the values form one contiguous byte run from the extent's start to its end, or to the end of
// the values when the extent ends in the plane's zero padding.
bool box_covers_extent(const Grid& grid, const Box& box, const Part& part, const Extent& extent) {
  const Shape& s = grid.shape();
  const bool contiguous =
      box.x.step == 1 && (box.y.count == 1 || (box.y.step == 1 && box.x.count == s.nx));
  if (!contiguous) return false;
  const auto es = static_cast<int64_t>(dtype_size(grid.dtype()));
  const int64_t begin = value_offset(s, grid.dtype(), part, box.y.start, box.x.start);
  const int64_t end = begin + box.y.count * box.x.count * es;
  return begin == extent.begin &&
         (end == extent.end || (end == part.lead + part.bytes && extent.end == part.stride));
}

// Copies the box's values of one plane between `plane` (the plane's bytes from
// extent.begin) and `packed` (y.count * x.count values), in the direction of `to_packed`.
template <typename T>
void copy_plane(const Shape& s, const Box& box, const Part& part, const Extent& extent,
                std::byte* plane, T* packed, bool to_packed) {
  for (int64_t j = 0; j < box.y.count; ++j) {
    const int64_t y = box.y.start + j * box.y.step;
    T* row = reinterpret_cast<T*>(plane + value_offset(s, dtype_of<T>(), part, y, box.x.start) -
                                  extent.begin);
    T* out = packed + j * box.x.count;
    if (box.x.step == 1) {
      if (to_packed) {
        std::memcpy(out, row, static_cast<size_t>(box.x.count) * sizeof(T));
      } else {
        std::memcpy(row, out, static_cast<size_t>(box.x.count) * sizeof(T));
      }
      continue;
    }
    for (int64_t i = 0; i < box.x.count; ++i) {
      T& cell = row[i * box.x.step];
      if (to_packed) {
        out[i] = cell;
      } else {
        cell = out[i];
      }
    }
  }
}

// Planes of the box lying back to back in one data file: one read or write request.
struct Run {
  int file = -1;
  int64_t offset = 0;  // of the first plane's extent
  int64_t first = 0;   // index of the first plane within the box
  int64_t planes = 0;
};

// Moves the box between the grid and `packed`, one run of planes at a time. `write` selects
// the direction.
template <typename T>
Status transfer_box(const Grid& grid, const Box& box, T* packed, bool write) {
  DG_RETURN_IF_ERROR(check_box(grid.shape(), box, grid.manifest().components()));
  if (box.points() == 0) return Status::Ok();
  const Manifest& m = grid.manifest();
  const Part part = Part::of(m, box.component);
  const Extent extent = plane_extent(grid, box, part);
  const bool read_first = !write || !box_covers_extent(grid, box, part, extent);
  // Planes of one run are contiguous only when each extent is a whole padded part.
  const bool mergeable = box.z.step == 1 && extent.bytes() == part.stride;
  const int64_t max_planes =
      mergeable ? std::max<int64_t>(1, kRequestTargetBytes / extent.bytes()) : 1;
  AlignedBuffer buffer(static_cast<size_t>(max_planes * extent.bytes()));
  if (!buffer.ok()) return Status(ErrorCode::kResource, "out of memory for an I/O buffer");
  const int64_t plane_values = box.y.count * box.x.count;

  auto move_run = [&](const Run& run) -> Status {
    const size_t bytes = static_cast<size_t>(run.planes * extent.bytes());
    const std::string path = part.path(grid, run.file);
    const int fd = part.fd(grid, run.file);
    if (read_first) {
      DG_RETURN_IF_ERROR(internal::pread_full(fd, buffer.data(), bytes, run.offset, path));
    }
    for (int64_t i = 0; i < run.planes; ++i) {
      copy_plane(grid.shape(), box, part, extent, buffer.data() + i * extent.bytes(),
                 packed + (run.first + i) * plane_values, !write);
    }
    if (!write) return Status::Ok();
    return internal::pwrite_full(fd, buffer.data(), bytes, run.offset, path);
  };

  Run run;
  for (int64_t k = 0; k < box.z.count; ++k) {
    const PlaneLocation loc = part.locate(m, box.z.start + k * box.z.step);
    const int64_t offset = loc.offset + extent.begin;
    const bool extends = run.planes > 0 && run.planes < max_planes && loc.file == run.file &&
                         offset == run.offset + run.planes * extent.bytes();
    if (extends) {
      ++run.planes;
      continue;
    }
    if (run.planes > 0) DG_RETURN_IF_ERROR(move_run(run));
    run = {loc.file, offset, k, 1};
  }
  return move_run(run);
}

// Records the checksums of the planes a box write touched, from their whole stored values
// (the ring's part, then the coefficients' record: a plane buffer, packed before hashing).
Status rehash_planes(Grid& grid, const AxisRange& z) {
  const Manifest& m = grid.manifest();
  AlignedBuffer plane(static_cast<size_t>(m.layout.plane_buffer_bytes()));
  if (!plane.ok()) return Status(ErrorCode::kResource, "out of memory for an I/O buffer");
  std::vector<Part> parts = {Part::of(m, 0)};
  if (m.has_coef_files()) parts.push_back(Part::of(m, m.components() - 1));
  for (int64_t k = 0; k < z.count; ++k) {
    const int64_t p = z.start + k * z.step;
    std::byte* at = plane.data();
    for (const Part& part : parts) {
      const PlaneLocation loc = part.locate(m, p);
      DG_RETURN_IF_ERROR(internal::pread_full(part.fd(grid, loc.file), at,
                                              static_cast<size_t>(part.stride), loc.offset,
                                              part.path(grid, loc.file)));
      at += part.stride;
    }
    internal::coefficients_to_plane(m.layout, plane.data());
    grid.record_plane(p, plane.data());
  }
  return Status::Ok();
}

Status check_writable(const Grid& grid) {
  const int flags = ::fcntl(grid.fd(0), F_GETFL);
  if (flags >= 0 && (flags & O_ACCMODE) == O_RDONLY) {
    return invalid_argument("grid " + grid.dir() +
                            " was opened read-only; open it for writing to change values");
  }
  return Status::Ok();
}

}  // namespace

Box whole_grid_box(const Shape& s) { return {{0, s.nz, 1}, {0, s.ny, 1}, {0, s.nx, 1}}; }

Status check_box(const Shape& shape, const Box& box, int components) {
  if (box.component < 0 || box.component >= components) {
    return invalid_argument("box component " + std::to_string(box.component) +
                            " does not exist; the grid has " + std::to_string(components) +
                            " component(s)");
  }
  struct Axis {
    const char* name;
    const AxisRange& r;
    int64_t n;
  } axes[] = {{"z", box.z, shape.nz}, {"y", box.y, shape.ny}, {"x", box.x, shape.nx}};
  for (const Axis& a : axes) {
    if (a.r.step < 1 || a.r.count < 0) {
      return invalid_argument(std::string("box range along ") + a.name + " has step " +
                              std::to_string(a.r.step) + " and count " + std::to_string(a.r.count) +
                              "; use a step >= 1 and a count >= 0");
    }
    if (a.r.count > 0 && (a.r.start < 0 || a.r.last() >= a.n)) {
      return invalid_argument(std::string("box range along ") + a.name + " reaches indices " +
                              std::to_string(a.r.start) + ".." + std::to_string(a.r.last()) +
                              " but the grid has " + std::to_string(a.n) +
                              "; keep indices in [0, " + std::to_string(a.n) + ")");
    }
  }
  return Status::Ok();
}

Status read_box(const Grid& grid, const Box& box, void* dst) {
  return dispatch_dtype(grid.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return transfer_box(grid, box, static_cast<T*>(dst), false);
  });
}

Status write_box(Grid& grid, const Box& box, const void* src) {
  DG_RETURN_IF_ERROR(check_writable(grid));
  DG_RETURN_IF_ERROR(dispatch_dtype(grid.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // transfer_box only reads from `packed` when writing.
    return transfer_box(grid, box, const_cast<T*>(static_cast<const T*>(src)), true);
  }));
  DG_RETURN_IF_ERROR(rehash_planes(grid, box.z));
  return grid.commit(grid.manifest());
}

}  // namespace deepgrid
