#include "deepgrid/checksum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "core/sha256.h"
#include "deepgrid/plane_transfer.h"

namespace deepgrid {

Result<GridSummary> summarize(const Grid& grid, int component) {
  return summarize_grid_planes(grid.manifest(), io::planes_of(grid), component);
}

Result<GridSummary> summarize_grid_planes(const Manifest& m, const io::PlaneSource& planes,
                                          int component) {
  if (component >= m.components()) {
    return invalid_argument("the grid has no component " + std::to_string(component));
  }
  if (component >= 0) {
    return summarize_planes(m.shape, m.dtype, io::component_of(planes, m, component));
  }
  // A plane of F components is an nx x (F ny) array.
  const Shape all{m.shape.nx, m.shape.ny * m.components(), m.shape.nz};
  return summarize_planes(all, m.dtype, planes);
}

Result<GridSummary> summarize_planes(const Shape& s, DType dtype, const io::PlaneSource& planes) {
  internal::Sha256 sha;
  if (!sha.ok()) return Status(ErrorCode::kResource, "cannot initialise SHA-256");
  GridSummary out;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  long double sum = 0, sum_sq = 0;
  Status st = dispatch_dtype(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    const size_t count = static_cast<size_t>(s.plane_points());
    return planes([&](int64_t, const void* values) {
      const T* v = static_cast<const T*>(values);
      sha.update(v, count * sizeof(T));  // x86-64: little-endian
      for (size_t i = 0; i < count; ++i) {
        const double x = v[i];
        if (std::isnan(x)) {
          ++out.nan_count;
          continue;
        }
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        sum += x;
        sum_sq += static_cast<long double>(x) * x;
      }
      return Status::Ok();
    });
  });
  DG_RETURN_IF_ERROR(st);
  out.sha256 = sha.hex();
  const int64_t finite = s.points() - out.nan_count;
  out.min = finite > 0 ? lo : std::nan("");
  out.max = finite > 0 ? hi : std::nan("");
  out.mean = finite > 0 ? static_cast<double>(sum / finite) : std::nan("");
  out.l2 = static_cast<double>(std::sqrt(sum_sq));
  return out;
}

}  // namespace deepgrid
