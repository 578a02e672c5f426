// internal: writing an 8-bit RGB image as PNG (libpng), shared by slices and plots.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/status.h"

namespace deepgrid::internal {

// `rgb` holds w * h pixels, rows top to bottom, 3 bytes each.
Status write_rgb_png(const std::string& path, int64_t w, int64_t h,
                     const std::vector<unsigned char>& rgb);

}  // namespace deepgrid::internal
