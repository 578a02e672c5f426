#include "deepgrid/image.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
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

using internal::Canvas, internal::kBlack, internal::Rgb, internal::Text;

constexpr int64_t kMinSide = 512;   // small slices: the longer side scaled up to about this
constexpr int64_t kMaxSide = 1000;  // large ones: scaled down to at most this
constexpr int kTickPx = 12, kLabelPx = 14, kTitlePx = 15;  // font sizes
constexpr int kTickLen = 4, kMargin = 10, kBarWidth = 18, kBarGap = 16, kMinBar = 120;
constexpr Rgb kWhite{255, 255, 255};

// The slice as the picture shows it: cell (i, j) of w x h goes into value (i / block,
// j / block), each value the mean of its finite cells (NaN where it has none).
class Raster {
 public:
  Raster(int64_t w, int64_t h)
      : w_(w),
        h_(h),
        block_((std::max(w, h) + kMaxSide - 1) / kMaxSide),
        cols_((w + block_ - 1) / block_),
        rows_((h + block_ - 1) / block_),
        sum_(static_cast<size_t>(cols_ * rows_)),
        count_(sum_.size()) {}

  // Row j of the slice: its w values at v[0], v[stride], ...
  template <typename T>
  void add_row(int64_t j, const T* v, int64_t stride) {
    const size_t first = static_cast<size_t>(j / block_ * cols_);
    for (int64_t i = 0; i < w_; ++i) {
      const double x = static_cast<double>(v[i * stride]);
      if (!std::isfinite(x)) continue;
      min_ = std::min(min_, x);
      max_ = std::max(max_, x);
      sum_[first + static_cast<size_t>(i / block_)] += x;
      ++count_[first + static_cast<size_t>(i / block_)];
    }
  }
  double value(int64_t col, int64_t row) const {
    const size_t k = static_cast<size_t>(row * cols_ + col);
    return count_[k] > 0 ? sum_[k] / static_cast<double>(count_[k]) : NAN;
  }
  int64_t w() const { return w_; }
  int64_t h() const { return h_; }
  int64_t block() const { return block_; }
  int64_t cols() const { return cols_; }
  int64_t rows() const { return rows_; }
  // The finite values' range; 0, 0 when there is none.
  double min() const { return min_ <= max_ ? min_ : 0; }
  double max() const { return min_ <= max_ ? max_ : 0; }

 private:
  int64_t w_, h_, block_, cols_, rows_;
  std::vector<double> sum_;
  std::vector<int64_t> count_;
  double min_ = INFINITY, max_ = -INFINITY;
};

// Row j of the raster is y of a z-slice, else z; its cells run along x, or y when x is fixed.
template <typename T>
Status read_slice(const Manifest& m, const PlaneRange& read, SliceSpec sl, Raster* r) {
  const Shape& s = m.shape;
  const bool z_slice = sl.axis == 'z';
  return read(z_slice ? sl.index : 0, z_slice ? sl.index + 1 : s.nz,
              [&](int64_t z, const void* values) {
                const T* plane = static_cast<const T*>(values) + sl.component * s.plane_points();
                if (z_slice) {
                  for (int64_t y = 0; y < s.ny; ++y) r->add_row(y, plane + y * s.nx, 1);
                } else if (sl.axis == 'y') {
                  r->add_row(z, plane + sl.index * s.nx, 1);
                } else {
                  r->add_row(z, plane + sl.index, s.nx);
                }
                return Status::Ok();
              });
}

// The grid indices labelled along an axis of n cells drawn px_per_cell pixels each: multiples
// of a round step (1, 2, 5 x 10^k) at least min_gap pixels apart, at most 9 of them.
std::vector<int64_t> index_ticks(int64_t n, double px_per_cell, int min_gap) {
  const auto fits = [&](int64_t step) {
    return (n - 1) / step <= 8 && static_cast<double>(step) * px_per_cell >= min_gap;
  };
  int64_t step = 1;
  for (int64_t mag = 1; !fits(step); mag *= 10) {
    for (int64_t m : {1, 2, 5}) {
      step = m * mag;
      if (fits(step)) break;
    }
  }
  std::vector<int64_t> ticks;
  for (int64_t i = 0; i < n; i += step) ticks.push_back(i);
  return ticks;
}

// Round values across min..max for about n ticks of the colour bar (just min when max == min),
// and their labels: %.3g, with more digits where that would print two alike.
std::vector<std::pair<double, std::string>> bar_ticks(double min, double max, int n) {
  std::vector<double> values;
  if (max > min) {
    const double step = internal::tick_step(max - min, n);
    for (double k = std::ceil(min / step - 1e-9); k * step <= max + step * 1e-9; ++k)
      values.push_back(std::abs(k) < 1e-9 ? 0.0 : k * step);
  } else {
    values.push_back(min);
  }
  std::vector<std::pair<double, std::string>> ticks;
  for (int digits = 3; digits <= 17; ++digits) {
    ticks.clear();
    bool distinct = true;
    for (double v : values) {
      ticks.emplace_back(v, internal::tick_label(v, digits));
      distinct = distinct && (ticks.size() < 2 || ticks.back().second != ticks.end()[-2].second);
    }
    if (distinct) break;
  }
  return ticks;
}

// Where everything goes, in pixels: the cells inside a one-pixel frame, ticks outside it, the
// colour bar at the right, the title above.
struct Layout {
  int64_t scale = 1;   // pixels a cell along each axis, or 1 where the raster averages
  double cell_px = 1;  // pixels a cell: scale / block
  int data_x = 0, data_y = 0, data_w = 0, data_h = 0;
  int bar_x = 0, bar_h = 0;
  int width = 0, height = 0;
  std::vector<int64_t> x_ticks, y_ticks;            // grid indices
  std::vector<std::pair<double, std::string>> bar;  // colour bar values and labels
  int x_of(int64_t i) const { return data_x + static_cast<int>((i + 0.5) * cell_px); }
  int y_of(int64_t j) const { return data_y + data_h - 1 - static_cast<int>((j + 0.5) * cell_px); }
};

int widest(Text& text, const std::vector<std::string>& labels) {
  int w = 0;
  for (const std::string& s : labels) w = std::max(w, text.width(s, kTickPx));
  return w;
}

Layout plan_layout(const Raster& r, Text& text, const std::string& title) {
  Layout l;
  l.scale = r.block() > 1 ? 1 : std::max<int64_t>(1, kMinSide / std::max(r.w(), r.h()));
  l.cell_px = static_cast<double>(l.scale) / static_cast<double>(r.block());
  l.data_w = static_cast<int>(r.cols() * l.scale);
  l.data_h = static_cast<int>(r.rows() * l.scale);
  l.x_ticks = index_ticks(r.w(), l.cell_px, text.width(std::to_string(r.w() - 1), kTickPx) + 14);
  l.y_ticks = index_ticks(r.h(), l.cell_px, 2 * kTickPx + 4);
  std::vector<std::string> y_labels;
  for (int64_t j : l.y_ticks) y_labels.push_back(std::to_string(j));
  l.data_x = kMargin + kLabelPx + 8 + widest(text, y_labels) + 4 + kTickLen + 1;
  l.data_y = kMargin + kTitlePx + 14 + 1;
  l.bar_h = std::max(l.data_h, kMinBar);
  l.bar = bar_ticks(r.min(), r.max(), std::clamp(l.bar_h / 24, 3, 8));
  std::vector<std::string> bar_labels;
  for (const auto& tick : l.bar) bar_labels.push_back(tick.second);
  l.bar_x = l.data_x + l.data_w + 1 + kBarGap;
  l.width = l.bar_x + kBarWidth + 1 + kTickLen + 4 + widest(text, bar_labels) + kMargin;
  l.width = std::max(l.width, text.width(title, kTitlePx) + 2 * kMargin);
  const int below = 1 + kTickLen + 4 + kTickPx + 8 + kLabelPx + kMargin;  // ticks, labels, name
  l.height = l.data_y + std::max(l.data_h + below, l.bar_h + 1 + kMargin);
  return l;
}

void draw_cells(Canvas& c, const Raster& r, const Layout& l) {
  const double span = r.max() > r.min() ? r.max() - r.min() : 1;
  const int s = static_cast<int>(l.scale);
  for (int64_t row = 0; row < r.rows(); ++row) {
    const int y0 = l.data_y + l.data_h - static_cast<int>(row + 1) * s;  // rows grow upwards
    for (int64_t col = 0; col < r.cols(); ++col) {
      const double v = r.value(col, row);
      const int x0 = l.data_x + static_cast<int>(col) * s;
      c.rect(x0, y0, x0 + s - 1, y0 + s - 1,
             std::isnan(v) ? kWhite : viridis((v - r.min()) / span));
    }
  }
  c.frame(l.data_x - 1, l.data_y - 1, l.data_x + l.data_w, l.data_y + l.data_h, kBlack);
}

// Ticks and their grid indices along the bottom and the left of the frame, and the axes' names.
void draw_axes(Canvas& c, Text& text, const Layout& l, char h_name, char v_name) {
  const int bottom = l.data_y + l.data_h, left = l.data_x - 1;  // the frame's edges
  for (int64_t i : l.x_ticks) {
    const int x = l.x_of(i);
    c.rect(x, bottom + 1, x, bottom + kTickLen, kBlack);
    text.draw(c, std::to_string(i), x, bottom + kTickLen + 4 + kTickPx, kTickPx, 0.5);
  }
  for (int64_t j : l.y_ticks) {
    const int y = l.y_of(j);
    c.rect(left - kTickLen, y, left - 1, y, kBlack);
    text.draw(c, std::to_string(j), left - kTickLen - 4, y + kTickPx / 3, kTickPx, 1);
  }
  text.draw(c, std::string(1, h_name), l.data_x + l.data_w / 2,
            bottom + kTickLen + 4 + kTickPx + 8 + kLabelPx, kLabelPx, 0.5);
  text.draw(c, std::string(1, v_name), kMargin + kLabelPx, l.data_y + l.data_h / 2, kLabelPx, 0.5,
            /*vertical=*/true);
}

// The colour map from min (bottom) to max (top) in a frame, with ticks and values at the right.
void draw_colour_bar(Canvas& c, Text& text, const Layout& l, double min, double max) {
  for (int y = 0; y < l.bar_h; ++y) {
    const Rgb rgb = viridis(1.0 - static_cast<double>(y) / std::max(1, l.bar_h - 1));
    c.rect(l.bar_x, l.data_y + y, l.bar_x + kBarWidth - 1, l.data_y + y, rgb);
  }
  const int right = l.bar_x + kBarWidth;  // the frame's right edge
  c.frame(l.bar_x - 1, l.data_y - 1, right, l.data_y + l.bar_h, kBlack);
  for (const auto& [v, label] : l.bar) {
    const double t = max > min ? (v - min) / (max - min) : 0;
    const int y = l.data_y + l.bar_h - 1 - static_cast<int>(std::lround(t * (l.bar_h - 1)));
    c.rect(right + 1, y, right + kTickLen, y, kBlack);
    text.draw(c, label, right + kTickLen + 4, y + kTickPx / 3, kTickPx);
  }
}

// "NAME: [field F, ]z = 128, step 100".
std::string slice_title(const Manifest& m, SliceSpec sl, const std::string& name) {
  std::string t;
  if (!name.empty()) t += name + ": ";
  if (m.components() > 1) t += "field " + m.fields[static_cast<size_t>(sl.component)] + ", ";
  t += sl.axis;
  t += " = " + std::to_string(sl.index) + ", step " + std::to_string(m.step);
  return t;
}

Result<SliceImageInfo> write_slice_png(const Manifest& m, const PlaneRange& read, SliceSpec sl,
                                       const std::string& path, const std::string& name) {
  DG_RETURN_IF_ERROR(check_slice(m.shape, m.components(), &sl));
  Text text;
  DG_RETURN_IF_ERROR(text.open());  // before reading the grid: a missing font fails at once
  const Shape& s = m.shape;
  Raster r(sl.axis == 'x' ? s.ny : s.nx, sl.axis == 'z' ? s.ny : s.nz);
  DG_RETURN_IF_ERROR(dispatch_dtype(
      m.dtype, [&](auto tag) { return read_slice<decltype(tag)>(m, read, sl, &r); }));
  SliceImageInfo info;
  info.title = slice_title(m, sl, name);
  const Layout l = plan_layout(r, text, info.title);
  Canvas c(l.width, l.height);
  draw_cells(c, r, l);
  draw_axes(c, text, l, sl.axis == 'x' ? 'y' : 'x', sl.axis == 'z' ? 'y' : 'z');
  draw_colour_bar(c, text, l, r.min(), r.max());
  const int title_w = text.width(info.title, kTitlePx);
  text.draw(
      c, info.title,
      std::clamp(l.data_x + l.data_w / 2, kMargin + title_w / 2, l.width - kMargin - title_w / 2),
      kMargin + kTitlePx, kTitlePx, 0.5);
  DG_RETURN_IF_ERROR(c.write_png(path));
  info.width = l.width;
  info.height = l.height;
  info.cells_x = r.w();
  info.cells_y = r.h();
  info.data_x = l.data_x;
  info.data_y = l.data_y;
  info.data_width = l.data_w;
  info.data_height = l.data_h;
  info.scale = l.scale;
  info.block = r.block();
  info.min = r.min();
  info.max = r.max();
  return info;
}

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
      slice, path, grid_display_name(grid.dir()));
}

Result<SliceImageInfo> write_slice_png(const Manifest& m, const io::PlaneSource& planes,
                                       SliceSpec slice, const std::string& path,
                                       const std::string& name) {
  return write_slice_png(
      m,
      [&planes](int64_t z0, int64_t z1, const io::PlaneConsumer& consume) {
        return planes([&](int64_t z, const void* values) {
          return z >= z0 && z < z1 ? consume(z, values) : Status::Ok();
        });
      },
      slice, path, name);
}

std::string grid_display_name(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "g/" names g
  return p.has_filename() ? p.filename().string() : dir;
}

}  // namespace deepgrid
