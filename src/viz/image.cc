#include "deepgrid/image.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "viz/canvas.h"

namespace deepgrid {
namespace {

// Nine samples of matplotlib's viridis, interpolated linearly.
internal::Rgb viridis(double t) {
  static const double kStops[][3] = {{68, 1, 84},    {71, 44, 122},  {59, 81, 139},
                                     {44, 113, 142}, {33, 144, 141}, {39, 173, 129},
                                     {92, 200, 99},  {170, 220, 50}, {253, 231, 37}};
  t = std::clamp(std::isnan(t) ? 0.0 : t, 0.0, 1.0) * 8;
  const int i = std::min(7, static_cast<int>(t));
  const double f = t - i;
  internal::Rgb rgb{};
  for (int c = 0; c < 3; ++c) {
    rgb[c] = static_cast<unsigned char>(std::lround(kStops[i][c] * (1 - f) + kStops[i + 1][c] * f));
  }
  return rgb;
}

// Hands planes [z0, z1) of a grid, in order, to a consumer.
using PlaneRange = std::function<Status(int64_t z0, int64_t z1, const io::PlaneConsumer&)>;

// The slice's values, row-major: width along the first free axis (x, or y when x is fixed).
template <typename T>
Result<std::vector<double>> read_slice(const Manifest& m, const PlaneRange& read, SliceSpec sl,
                                       int64_t* w, int64_t* h) {
  const Shape& s = m.shape;
  const bool z_slice = sl.axis == 'z';
  *w = sl.axis == 'y' || z_slice ? s.nx : s.ny;
  *h = z_slice ? s.ny : s.nz;
  std::vector<double> out(static_cast<size_t>(*w * *h));
  DG_RETURN_IF_ERROR(read(
      z_slice ? sl.index : 0, z_slice ? sl.index + 1 : s.nz, [&](int64_t z, const void* values) {
        const T* plane = static_cast<const T*>(values) + sl.component * s.plane_points();
        if (z_slice) {
          std::copy(plane, plane + s.plane_points(), out.begin());
          return Status::Ok();
        }
        for (int64_t i = 0; i < *w; ++i) {
          out[static_cast<size_t>(z * *w + i)] =
              sl.axis == 'y' ? plane[static_cast<size_t>(sl.index * s.nx + i)]
                             : plane[static_cast<size_t>(i * s.nx + sl.index)];
        }
        return Status::Ok();
      }));
  return out;
}

Result<SliceImageInfo> write_slice_png(const Manifest& m, const PlaneRange& read, SliceSpec sl,
                                       const std::string& path);

}  // namespace

Result<SliceSpec> parse_slice(std::string_view text) {
  auto bad = [&] {
    return invalid_argument("slice '" + std::string(text) +
                            "' is not AXIS=INDEX; write e.g. z=mid, z=10 or y=0");
  };
  if (text.size() < 3 || text[1] != '=' || (text[0] != 'x' && text[0] != 'y' && text[0] != 'z')) {
    return bad();
  }
  SliceSpec s{text[0], -1};
  std::string idx(text.substr(2));
  if (idx == "mid") return s;
  char* end = nullptr;
  long long v = std::strtoll(idx.c_str(), &end, 10);
  if (idx.empty() || end != idx.c_str() + idx.size() || v < 0) return bad();
  s.index = v;
  return s;
}

Status check_slice(const Shape& s, int components, SliceSpec* sl) {
  const int64_t extent = sl->axis == 'x' ? s.nx : sl->axis == 'y' ? s.ny : s.nz;
  if (sl->index < 0) sl->index = extent / 2;
  if (sl->component < 0 || sl->component >= components) {
    return invalid_argument("the grid has no component " + std::to_string(sl->component));
  }
  if (sl->index >= extent) {
    return invalid_argument(std::string("slice ") + sl->axis + "=" + std::to_string(sl->index) +
                            " is outside the grid (" + sl->axis + " < " + std::to_string(extent) +
                            "); use an index below " + std::to_string(extent) + " or 'mid'");
  }
  return Status::Ok();
}

Result<SliceImageInfo> write_slice_png(const Grid& grid, SliceSpec slice, const std::string& path) {
  return write_slice_png(
      grid.manifest(),
      [&grid](int64_t z0, int64_t z1, const io::PlaneConsumer& consume) {
        return io::read_plane_range(grid, z0, z1, consume);
      },
      slice, path);
}

Result<SliceImageInfo> write_slice_png(const Manifest& m, const io::PlaneSource& planes,
                                       SliceSpec slice, const std::string& path) {
  return write_slice_png(
      m,
      [&planes](int64_t z0, int64_t z1, const io::PlaneConsumer& consume) {
        return planes([&](int64_t z, const void* values) {
          return z >= z0 && z < z1 ? consume(z, values) : Status::Ok();
        });
      },
      slice, path);
}

namespace {

Result<SliceImageInfo> write_slice_png(const Manifest& m, const PlaneRange& read, SliceSpec sl,
                                       const std::string& path) {
  DG_RETURN_IF_ERROR(check_slice(m.shape, m.components(), &sl));
  SliceImageInfo info;
  int64_t w = 0, h = 0;
  auto values = dispatch_dtype(
      m.dtype, [&](auto tag) { return read_slice<decltype(tag)>(m, read, sl, &w, &h); });
  if (!values.ok()) return values.status();
  const auto& v = *values;
  info.min = INFINITY;
  info.max = -INFINITY;
  for (double x : v) {
    if (std::isfinite(x)) {
      info.min = std::min(info.min, x);
      info.max = std::max(info.max, x);
    }
  }
  if (!(info.min <= info.max)) info.min = info.max = 0;
  // Upscale small slices so the picture is at least ~256 pixels high; add a colour bar.
  const int64_t scale = std::max<int64_t>(1, 256 / std::max(w, h));
  const int64_t bar = std::max<int64_t>(8, w * scale / 16), gap = bar / 2;
  info.width = w * scale + gap + bar;
  info.height = h * scale;
  internal::Canvas c(static_cast<int>(info.width), static_cast<int>(info.height));
  const double span = info.max > info.min ? info.max - info.min : 1;
  for (int64_t py = 0; py < info.height; ++py) {
    const int64_t y = h - 1 - py / scale;  // y (or z) grows upwards
    const int iy = static_cast<int>(py);
    for (int64_t px = 0; px < w * scale; ++px) {
      c.blend(static_cast<int>(px), iy,
              viridis((v[static_cast<size_t>(y * w + px / scale)] - info.min) / span));
    }
    auto bar_rgb = viridis(1.0 - static_cast<double>(py) / std::max<int64_t>(1, info.height - 1));
    for (int64_t px = w * scale + gap; px < info.width; ++px)
      c.blend(static_cast<int>(px), iy, bar_rgb);
  }
  DG_RETURN_IF_ERROR(c.write_png(path));
  return info;
}

}  // namespace
}  // namespace deepgrid
