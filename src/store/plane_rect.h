// The one place that knows where the values of an x-y rectangle lie in a plane: every copy of
// a block's or a halo's values between a part's planes (or a global plane) and packed buffers
// (MPI messages, redistribution, gathering) goes through copy_rect, and every size of such a
// plane or rectangle comes from PlaneFormat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/decomposition.h"
#include "deepgrid/dtype.h"
#include "deepgrid/store.h"

namespace deepgrid::internal {

enum class RectCopy { kToPacked, kFromPacked };

// How a plane's values lie: `components` components (a scheme's fields, scheme.h) of nx * ny
// values each, one after another, rows of nx values (x fastest).
struct PlaneFormat {
  int64_t nx = 0, ny = 0;
  int components = 1;
  size_t value_bytes = 0;

  size_t bytes() const { return static_cast<size_t>(nx * ny * components) * value_bytes; }
  // Bytes of the packed values of `rect`'s x-y rectangle (its z span is ignored): the
  // rectangle's rows of every component, one component after another.
  size_t rect_bytes(const Block& rect) const {
    return static_cast<size_t>(rect.size(kAxisX) * rect.size(kAxisY) * components) * value_bytes;
  }
};

inline PlaneFormat plane_format(const Shape& shape, DType dtype, int components) {
  return {shape.nx, shape.ny, components, dtype_size(dtype)};
}
// A stored grid's planes.
inline PlaneFormat plane_format(const Manifest& m) {
  return plane_format(m.shape, m.dtype, m.components());
}

// Where a plane's values lie in memory: row y of component c starts c * field + y * row bytes
// after the plane's first value.
struct PlaneLayout {
  size_t row = 0, field = 0;
};
// The packed layout of `format`: rows of nx values, components of nx * ny.
inline PlaneLayout packed_layout(const PlaneFormat& format) {
  return {static_cast<size_t>(format.nx) * format.value_bytes,
          static_cast<size_t>(format.nx * format.ny) * format.value_bytes};
}

// Copies the values of `rect`'s x-y rectangle (its z span is ignored) of every component
// between `plane`, laid out as `layout` says, and `packed`, the rectangle's rows back to back,
// one component after another.
inline void copy_rect(std::byte* plane, const PlaneLayout& layout, const PlaneFormat& format,
                      const Block& rect, std::byte* packed, RectCopy direction) {
  const size_t row = static_cast<size_t>(rect.size(kAxisX)) * format.value_bytes;
  for (int c = 0; c < format.components; ++c) {
    std::byte* field = plane + static_cast<size_t>(c) * layout.field;
    for (int64_t y = rect[kAxisY].lo; y < rect[kAxisY].hi; ++y, packed += row) {
      std::byte* at = field + static_cast<size_t>(y) * layout.row +
                      static_cast<size_t>(rect[kAxisX].lo) * format.value_bytes;
      if (direction == RectCopy::kToPacked) {
        std::memcpy(packed, at, row);
      } else {
        std::memcpy(at, packed, row);
      }
    }
  }
}
// The same for a plane packed as `format` says.
inline void copy_rect(std::byte* plane, const PlaneFormat& format, const Block& rect,
                      std::byte* packed, RectCopy direction) {
  copy_rect(plane, packed_layout(format), format, rect, packed, direction);
}

// The same for each plane of `box` (its z span), packed plane after plane: plane z at
// plane_at(z), laid out as `layout` says.
template <typename PlaneAt>
void copy_box(PlaneAt plane_at, const PlaneLayout& layout, const PlaneFormat& format,
              const Block& box, std::byte* packed, RectCopy direction) {
  const size_t bytes = format.rect_bytes(box);
  for (int64_t z = box[kAxisZ].lo; z < box[kAxisZ].hi; ++z, packed += bytes) {
    copy_rect(plane_at(z), layout, format, box, packed, direction);
  }
}

}  // namespace deepgrid::internal
