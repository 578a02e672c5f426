// internal: an RGB picture to draw on, text through FreeType, round tick steps, and writing it
// as PNG (libpng); shared by slice images (image.cc) and line plots (line_plot.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "deepgrid/status.h"

// FreeType's handles, declared as ft2build.h does, so that users of this header need not
// include FreeType's.
typedef struct FT_LibraryRec_* FT_Library;
typedef struct FT_FaceRec_* FT_Face;

namespace deepgrid::internal {

using Rgb = std::array<unsigned char, 3>;
inline constexpr Rgb kBlack{0, 0, 0};

// A white picture of width x height pixels; drawing outside it is clipped.
class Canvas {
 public:
  Canvas(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  // Mixes colour c into pixel (x, y) with weight alpha (1: replaces it).
  void blend(int x, int y, Rgb c, double alpha = 1);
  // The filled rectangle with corners (x0, y0) and (x1, y1), both included.
  void rect(int x0, int y0, int x1, int y1, Rgb c);
  // The outline of that rectangle, one pixel wide.
  void frame(int x0, int y0, int x1, int y1, Rgb c);
  // A line `width` pixels wide: discs along the segment.
  void line(double x0, double y0, double x1, double y1, Rgb c, int width);
  void disc(double cx, double cy, double r, Rgb c);
  // Writes the picture as an 8-bit RGB PNG.
  Status write_png(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<unsigned char> rgb_;  // rows top to bottom, 3 bytes a pixel
};

// Text through FreeType in the font DEEPGRID_FONT (DejaVu Sans, fonts-dejavu-core):
// anti-aliased glyphs blended onto a canvas. Single bytes are glyphs: ASCII text.
class Text {
 public:
  Text() = default;
  Text(const Text&) = delete;
  Text& operator=(const Text&) = delete;
  ~Text();
  // Loads the font; a missing font is kUnsupported, naming the package to install.
  Status open();
  // The advance of `s` at `px` pixels per em, in pixels.
  int width(const std::string& s, int px);
  // Draws `s` with its baseline at y, starting at x (anchor 0), centred (0.5) or ending there
  // (1); vertical: rotated a quarter turn anticlockwise around (x, y).
  void draw(Canvas& c, const std::string& s, int x, int y, int px, double anchor = 0,
            bool vertical = false, Rgb colour = kBlack);

 private:
  FT_Library lib_ = nullptr;
  FT_Face face_ = nullptr;
};

// A round step (m x 10^k for m in 1, 2, 5, or also 2.5 with `quarters`) giving about `n` ticks
// over `span` (> 0).
double tick_step(double span, int n, bool quarters = false);

// `v` as printf's %g with `digits` significant digits ("%.3g" for 3); -0 reads "0".
std::string tick_label(double v, int digits = 6);

}  // namespace deepgrid::internal
