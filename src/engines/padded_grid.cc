#include "engines/padded_grid.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/file_util.h"
#include "core/threads.h"

namespace deepgrid {
namespace {

constexpr int64_t kAlignBytes = 64;

template <typename T>
constexpr int64_t lane() {
  return kAlignBytes / static_cast<int64_t>(sizeof(T));
}

}  // namespace

template <typename T>
int64_t PaddedGrid<T>::bytes_needed(const Shape& s, Halo h, int components) {
  const int64_t stride = round_up(round_up(h.x, lane<T>()) + s.nx + h.x, lane<T>());
  const int64_t bytes =
      stride * (s.ny + 2 * h.y) * components * (s.nz + 2 * h.z) * static_cast<int64_t>(sizeof(T)) +
      kAlignBytes;
  return static_cast<int64_t>(internal::paged_bytes(static_cast<size_t>(bytes)));
}

template <typename T>
void PaddedGrid<T>::Release::operator()(T* p) const {
  if (file) {
    ::munmap(p, bytes);
  } else {
    internal::release_pages(p, bytes);
  }
}

template <typename T>
PaddedGrid<T>::PaddedGrid(const Shape& s, Halo h, int components, T* storage, Release release)
    : shape_(s), halo_(h), components_(components), storage_(storage, release), base_(storage) {
  const int64_t left = round_up(h.x, lane<T>());
  stride_ = round_up(left + s.nx + h.x, lane<T>());
  field_stride_ = stride_ * (s.ny + 2 * h.y);
  plane_stride_ = field_stride_ * components;
  origin_ = h.y * stride_ + left;
}

template <typename T>
Result<PaddedGrid<T>> PaddedGrid<T>::allocate(const Shape& s, Halo h, int components,
                                              bool touched) {
  const size_t bytes = static_cast<size_t>(bytes_needed(s, h, components));
  // Large grids on 2 MiB pages where the kernel allows it: tiles stream through many planes,
  // and 4 KiB pages would cost a TLB miss per plane row.
  T* p = static_cast<T*>(internal::allocate_pages(bytes));
  if (p == nullptr) {
    return Status(ErrorCode::kResource, "cannot allocate " + format_size(bytes) +
                                            " for the grid in memory; use a smaller grid or "
                                            "more memory");
  }
  PaddedGrid g(s, h, components, p, Release{bytes, false});
  if (touched) g.touch_pages(0);
  return g;
}

template <typename T>
void PaddedGrid<T>::touch_ghost_planes() {
  if (storage_.get_deleter().file) return;
  const auto ghost_bytes = static_cast<size_t>(halo_.z * plane_stride_) * sizeof(T);
  std::memset(base_, 0, ghost_bytes);
  std::memset(base_ + (shape_.nz + halo_.z) * plane_stride_, 0, ghost_bytes);
}

template <typename T>
void PaddedGrid<T>::touch_pages(int threads) {
  if (storage_.get_deleter().file) return;  // (a file mapping: the OS pages it)
  auto* bytes_ptr = reinterpret_cast<unsigned char*>(storage_.get());
  const auto total = static_cast<int64_t>(storage_.get_deleter().bytes);  // whole pages
  const int64_t chunk = int64_t{1} << 21;
#pragma omp parallel for schedule(static) num_threads(internal::resolved_threads(threads))
  for (int64_t off = 0; off < total; off += chunk) {
    std::memset(bytes_ptr + off, 0, static_cast<size_t>(std::min(chunk, total - off)));
  }
}

template <typename T>
Result<PaddedGrid<T>> PaddedGrid<T>::map_scratch_file(const Shape& s, Halo h,
                                                      const std::string& dir, int components) {
  const size_t bytes = static_cast<size_t>(bytes_needed(s, h, components));
  std::string path = internal::join_path(dir, "deepgrid-mmap-XXXXXX");
  const int fd = ::mkostemp(path.data(), O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "create scratch file", path);
  ::unlink(path.c_str());  // the mapping keeps the file alive; nothing is left behind
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  void* p = rc == 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : nullptr;
  const int err = rc != 0 ? rc : errno;
  ::close(fd);
  if (rc != 0) return errno_status(err, "allocate scratch file", path, 0);
  if (p == MAP_FAILED) return errno_status(err, "map scratch file", path);
  // The file reads as zeros, like allocate()'s memory.
  return PaddedGrid(s, h, components, static_cast<T*>(p), Release{bytes, true});
}

template <typename T>
void PaddedGrid<T>::load_plane(int64_t z, const T* packed, PlaneHasher* hash,
                               int64_t component_stride, int first_component) {
  load_rows(z, packed, 0, shape_.ny, hash, component_stride, first_component);
}

template <typename T>
void PaddedGrid<T>::load_rows(int64_t z, const T* packed, int64_t y0, int64_t y1, PlaneHasher* hash,
                              int64_t component_stride, int first_component) {
  if (component_stride == 0) component_stride = shape_.plane_points();
  // Rows in chunks of about 32 KiB, each hashed and then copied while it is in L1.
  const int64_t chunk = std::max<int64_t>(1, (int64_t{32} << 10) / (shape_.nx * sizeof(T)));
  for (int c = 0; c < components_; ++c) {
    T* dst = plane(z) + c * field_stride_;
    const T* src = packed + c * component_stride;
    for (int64_t r0 = y0; r0 < y1; r0 += chunk) {
      const int64_t r1 = std::min(y1, r0 + chunk);
      if (hash != nullptr) {
        hash->update_component(first_component + c, src + r0 * shape_.nx,
                               sizeof(T) * shape_.nx * (r1 - r0));
      }
      for (int64_t y = r0; y < r1; ++y) {
        std::memcpy(dst + y * stride_, src + y * shape_.nx, sizeof(T) * shape_.nx);
      }
    }
  }
}

template <typename T>
void PaddedGrid<T>::store_plane(int64_t z, T* packed) const {
  for (int c = 0; c < components_; ++c) {
    const T* src = plane(z) + c * field_stride_;
    T* dst = packed + c * shape_.plane_points();
    for (int64_t y = 0; y < shape_.ny; ++y) {
      std::memcpy(dst + y * shape_.nx, src + y * stride_, sizeof(T) * shape_.nx);
    }
  }
}

template <typename T>
void PaddedGrid<T>::fill_component_ghosts(T* p, const Boundary& b) {
  const int64_t nx = shape_.nx, ny = shape_.ny, hx = halo_.x;
  if (b.kind == Boundary::Kind::kDirichlet) {
    const T v = static_cast<T>(b.value);
    for (int64_t y = 0; y < ny; ++y) {
      std::fill(p + y * stride_ - hx, p + y * stride_, v);
      std::fill(p + y * stride_ + nx, p + y * stride_ + nx + hx, v);
    }
  } else {
    // The x ghosts' sources are the same in every row: index them once.
    std::vector<int64_t> source(static_cast<size_t>(2 * hx));
    for (int64_t i = 0; i < hx; ++i) {
      source[static_cast<size_t>(i)] = boundary_source_index(b, i - hx, nx);
      source[static_cast<size_t>(hx + i)] = boundary_source_index(b, nx + i, nx);
    }
    for (int64_t y = 0; y < ny; ++y) {
      T* row = p + y * stride_;
      for (int64_t i = 0; i < hx; ++i) {
        row[i - hx] = row[source[static_cast<size_t>(i)]];
        row[nx + i] = row[source[static_cast<size_t>(hx + i)]];
      }
    }
  }
  const int64_t row_len = nx + 2 * halo_.x;
  for (int64_t y = -halo_.y; y < ny + halo_.y; ++y) {
    if (y >= 0 && y < ny) continue;
    T* dst = p + y * stride_ - halo_.x;
    const int64_t s = boundary_source_index(b, y, ny);
    if (s < 0) {
      std::fill(dst, dst + row_len, static_cast<T>(b.value));
    } else {
      std::memcpy(dst, p + s * stride_ - halo_.x, sizeof(T) * row_len);
    }
  }
}

template <typename T>
void PaddedGrid<T>::fill_plane_ghosts(int64_t z, const Boundary& b) {
  // Another rule's plane makes the whole frame's value unknown. Written only where it was
  // known: threads fill the planes of frames that take no whole fill side by side, which then
  // only read the flag.
  if (dirichlet_ghosts_ && !holds_dirichlet(b)) dirichlet_ghosts_ = false;
  fill_xy_ghosts(z, b);
}

template <typename T>
void PaddedGrid<T>::fill_xy_ghosts(int64_t z, const Boundary& b) {
  for (int c = 0; c < components_; ++c) fill_component_ghosts(plane(z) + c * field_stride_, b);
}

template <typename T>
bool PaddedGrid<T>::holds_dirichlet(const Boundary& b) const {
  return dirichlet_ghosts_ && b.kind == Boundary::Kind::kDirichlet &&
         std::bit_cast<uint64_t>(b.value) == dirichlet_bits_;
}

template <typename T>
void PaddedGrid<T>::fill_ghosts(const Boundary& b, int threads) {
  if (holds_dirichlet(b)) return;
  const int64_t nz = shape_.nz;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t z = 0; z < nz; ++z) {
    fill_xy_ghosts(z, b);
  }
  const int64_t plane_len = plane_stride_;
  const ptrdiff_t plane_start = -(halo_.y * stride_) - round_up(halo_.x, lane<T>());
  for (int64_t z = -halo_.z; z < nz + halo_.z; ++z) {
    if (z >= 0 && z < nz) continue;
    T* dst = plane(z) + plane_start;
    const int64_t s = boundary_source_index(b, z, nz);
    if (s < 0) {
      std::fill(dst, dst + plane_len, static_cast<T>(b.value));
    } else {
      std::memcpy(dst, plane(s) + plane_start, sizeof(T) * plane_len);
    }
  }
  dirichlet_ghosts_ = b.kind == Boundary::Kind::kDirichlet;
  dirichlet_bits_ = std::bit_cast<uint64_t>(b.value);
}

template class PaddedGrid<float>;
template class PaddedGrid<double>;

}  // namespace deepgrid
