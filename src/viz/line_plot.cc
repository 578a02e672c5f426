#include "viz/line_plot.h"

#include <ft2build.h>
#include FT_FREETYPE_H

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>

#include "viz/png_file.h"

namespace deepgrid {
namespace {

constexpr int kWidth = 900, kHeight = 560;
constexpr int kLeft = 90, kRight = 190, kTop = 50, kBottom = 70;  // margins around the axes
using Rgb = std::array<unsigned char, 3>;
constexpr Rgb kBlack{0, 0, 0}, kGrey{215, 215, 215};
// Matplotlib's tab10 colours, one per series.
constexpr Rgb kPalette[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                            {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127}};

class Canvas {
 public:
  Canvas() : rgb_(static_cast<size_t>(kWidth * kHeight * 3), 255) {}

  void blend(int x, int y, Rgb c, double alpha = 1) {
    if (x < 0 || y < 0 || x >= kWidth || y >= kHeight) return;
    unsigned char* p = rgb_.data() + (static_cast<size_t>(y) * kWidth + x) * 3;
    for (int i = 0; i < 3; ++i)
      p[i] = static_cast<unsigned char>(std::lround(p[i] * (1 - alpha) + c[i] * alpha));
  }
  void rect(int x0, int y0, int x1, int y1, Rgb c) {
    for (int y = y0; y <= y1; ++y) {
      for (int x = x0; x <= x1; ++x) blend(x, y, c);
    }
  }
  // A line `width` pixels wide: discs along the segment.
  void line(double x0, double y0, double x1, double y1, Rgb c, int width) {
    const int n = static_cast<int>(std::ceil(std::hypot(x1 - x0, y1 - y0))) + 1;
    for (int i = 0; i <= n; ++i) {
      const double t = static_cast<double>(i) / n;
      disc(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, width / 2.0, c);
    }
  }
  void disc(double cx, double cy, double r, Rgb c) {
    for (int y = static_cast<int>(cy - r); y <= static_cast<int>(cy + r) + 1; ++y) {
      for (int x = static_cast<int>(cx - r); x <= static_cast<int>(cx + r) + 1; ++x) {
        if (std::hypot(x - cx, y - cy) <= r) blend(x, y, c);
      }
    }
  }
  const std::vector<unsigned char>& rgb() const { return rgb_; }

 private:
  std::vector<unsigned char> rgb_;
};

// Text through FreeType: anti-aliased glyphs blended onto the canvas.
class Text {
 public:
  ~Text() {
    if (face_ != nullptr) FT_Done_Face(face_);
    if (lib_ != nullptr) FT_Done_FreeType(lib_);
  }
  Status open() {
    if (FT_Init_FreeType(&lib_) != 0) return Status(ErrorCode::kResource, "cannot start FreeType");
    if (FT_New_Face(lib_, DEEPGRID_FONT, 0, &face_) != 0) {
      return unsupported(std::string("cannot load the font ") + DEEPGRID_FONT +
                         " for plot labels; install fonts-dejavu-core");
    }
    return Status::Ok();
  }
  int width(const std::string& s, int px) {
    FT_Set_Pixel_Sizes(face_, 0, static_cast<FT_UInt>(px));
    int w = 0;
    for (unsigned char ch : s) {
      if (FT_Load_Char(face_, ch, FT_LOAD_DEFAULT) == 0)
        w += static_cast<int>(face_->glyph->advance.x >> 6);
    }
    return w;
  }
  // Draws `s` with its baseline at y, starting at x (anchor 0), centred (0.5) or ending there
  // (1); vertical: rotated a quarter turn anticlockwise around (x, y).
  void draw(Canvas& c, const std::string& s, int x, int y, int px, double anchor = 0,
            bool vertical = false, Rgb colour = kBlack) {
    const int w = width(s, px);
    int pen = -static_cast<int>(anchor * w);
    for (unsigned char ch : s) {
      if (FT_Load_Char(face_, ch, FT_LOAD_RENDER) != 0) continue;
      const FT_GlyphSlot g = face_->glyph;
      for (unsigned row = 0; row < g->bitmap.rows; ++row) {
        for (unsigned col = 0; col < g->bitmap.width; ++col) {
          const double a =
              g->bitmap.buffer[row * static_cast<unsigned>(g->bitmap.pitch) + col] / 255.0;
          if (a == 0) continue;
          const int u = pen + g->bitmap_left + static_cast<int>(col);  // along the text
          const int v = static_cast<int>(row) - g->bitmap_top;         // down from the baseline
          if (vertical) {
            c.blend(x + v, y - u, colour, a);
          } else {
            c.blend(x + u, y + v, colour, a);
          }
        }
      }
      pen += static_cast<int>(g->advance.x >> 6);
    }
  }

 private:
  FT_Library lib_ = nullptr;
  FT_Face face_ = nullptr;
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// A round step giving about `n` ticks up to `max`.
double tick_step(double max, int n) {
  const double raw = max / n;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

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
  Canvas c;
  const auto tx = [&](double x) { return plot.log2_x ? std::log2(x) : x; };
  const double x_lo = tx(*xs.begin()), x_hi = tx(*xs.rbegin());
  const double x_span = x_hi > x_lo ? x_hi - x_lo : 1;
  const double y_step = tick_step(y_max > 0 ? y_max : 1, 5);
  const double y_top = std::ceil((y_max > 0 ? y_max : 1) / y_step) * y_step;
  const int pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + 20 + (tx(x) - x_lo) / x_span * (pw - 40); };
  const auto py = [&](double y) { return kTop + ph - y / y_top * ph; };

  for (double y = 0; y <= y_top * 1.0001; y += y_step) {
    const int v = static_cast<int>(std::lround(py(y)));
    c.rect(kLeft, v, kLeft + pw, v, kGrey);
    c.rect(kLeft - 5, v, kLeft, v, kBlack);
    text.draw(c, number(y), kLeft - 9, v + 5, 13, 1);
  }
  for (double x : xs) {
    const int u = static_cast<int>(std::lround(px(x)));
    c.rect(u, kTop + ph, u, kTop + ph + 5, kBlack);
    text.draw(c, number(x), u, kTop + ph + 22, 13, 0.5);
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
  return internal::write_rgb_png(path, kWidth, kHeight, c.rgb());
}

}  // namespace deepgrid
