// The one place that knows where the values of an x-y rectangle lie in a plane: every copy of
// a block's or a halo's values between a part's planes (or a global plane) and packed buffers
// (MPI messages, redistribution, gathering) goes through copy_rect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "deepgrid/decomposition.h"

namespace deepgrid::internal {

enum class RectCopy { kToPacked, kFromPacked };

// Bytes of the packed values of `rect`'s x-y rectangle.
inline size_t rect_bytes(const Block& rect, size_t value_bytes) {
  return static_cast<size_t>(rect.size(kAxisX) * rect.size(kAxisY)) * value_bytes;
}

// Copies the values of `rect`'s x-y rectangle (its z span is ignored) between `plane`, a plane
// of rows of `nx` values, and `packed`, the rectangle's rows back to back (x fastest).
inline void copy_rect(std::byte* plane, int64_t nx, size_t value_bytes, const Block& rect,
                      std::byte* packed, RectCopy direction) {
  const size_t row = static_cast<size_t>(rect.size(kAxisX)) * value_bytes;
  for (int64_t y = rect[kAxisY].lo; y < rect[kAxisY].hi; ++y, packed += row) {
    std::byte* at = plane + static_cast<size_t>(y * nx + rect[kAxisX].lo) * value_bytes;
    if (direction == RectCopy::kToPacked) {
      std::memcpy(packed, at, row);
    } else {
      std::memcpy(at, packed, row);
    }
  }
}

}  // namespace deepgrid::internal
