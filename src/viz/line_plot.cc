#include "viz/line_plot.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "viz/canvas.h"

namespace deepgrid {
namespace {

constexpr int kWidth = 900, kHeight = 560;
constexpr int kLeft = 90, kRight = 190, kTop = 50, kBottom = 70;  // margins around the axes
using internal::Canvas, internal::kBlack, internal::Rgb, internal::Text, internal::tick_label;
constexpr Rgb kGrey{215, 215, 215};
// Matplotlib's tab10 colours, one per series.
constexpr Rgb kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                            {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};

}  // namespace

Status write_line_plot_png(const LinePlot& plot, const std::string& path) {
  std::set<double> xs;
  double y_max = 0;
  for (const PlotSeries& s : plot.series) {
    for (auto [x, y] : s.points) {
      if (plot.log2_x && !(x > 0)) return invalid_argument("a log-scale plot needs x > 0");
      xs.insert(x);
      y_max = std::max(y_max, y);
    }
  }
  if (xs.empty()) return invalid_argument("nothing to plot: no measured points");
  Text text;
  DG_RETURN_IF_ERROR(text.open());
  Canvas c(kWidth, kHeight);
  const auto tx = [&](double x) { return plot.log2_x ? std::log2(x) : x; };
  const double x_lo = tx(*xs.begin()), x_hi = tx(*xs.rbegin());
  const double x_span = x_hi > x_lo ? x_hi - x_lo : 1;
  const double y_step = internal::tick_step(y_max > 0 ? y_max : 1, 5, /*quarters=*/true);
  const double y_top = std::ceil((y_max > 0 ? y_max : 1) / y_step) * y_step;
  const int pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + 20 + (tx(x) - x_lo) / x_span * (pw - 40); };
  const auto py = [&](double y) { return kTop + ph - y / y_top * ph; };

  for (double y = 0; y <= y_top * 1.0001; y += y_step) {
    const int v = static_cast<int>(std::lround(py(y)));
    c.rect(kLeft, v, kLeft + pw, v, kGrey);
    c.rect(kLeft - 5, v, kLeft, v, kBlack);
    text.draw(c, tick_label(y), kLeft - 9, v + 5, 13, 1);
  }
  for (double x : xs) {
    const int u = static_cast<int>(std::lround(px(x)));
    c.rect(u, kTop + ph, u, kTop + ph + 5, kBlack);
    text.draw(c, tick_label(x), u, kTop + ph + 22, 13, 0.5);
  }
  c.rect(kLeft, kTop, kLeft, kTop + ph, kBlack);
  c.rect(kLeft, kTop + ph, kLeft + pw, kTop + ph, kBlack);
  text.draw(c, plot.title, kLeft + pw / 2, kTop - 18, 17, 0.5);
  text.draw(c, plot.x_label, kLeft + pw / 2, kHeight - 18, 15, 0.5);
  text.draw(c, plot.y_label, 26, kTop + ph / 2, 15, 0.5, true);

  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const Rgb colour = kPalette[i % std::size(kPalette)];
    for (size_t k = 0; k < s.points.size(); ++k) {
      const auto [x, y] = s.points[k];
      if (k > 0) {
        c.line(px(s.points[k - 1].first), py(s.points[k - 1].second), px(x), py(y), colour, 3);
      }
      c.disc(px(x), py(y), 4.5, colour);
    }
    const int ly = kTop + 20 + static_cast<int>(i) * 24;
    c.line(kLeft + pw + 18, ly - 5, kLeft + pw + 48, ly - 5, colour, 3);
    text.draw(c, s.name, kLeft + pw + 56, ly, 14);
  }
  return c.write_png(path);
}

}  // namespace deepgrid
