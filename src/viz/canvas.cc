#include "viz/canvas.h"

#include <ft2build.h>
#include FT_FREETYPE_H
#include <png.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>

namespace deepgrid::internal {

Canvas::Canvas(int width, int height)
    : width_(width), height_(height), rgb_(static_cast<size_t>(width) * height * 3, 255) {}

void Canvas::blend(int x, int y, Rgb c, double alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  unsigned char* p = rgb_.data() + (static_cast<size_t>(y) * width_ + x) * 3;
  for (int i = 0; i < 3; ++i)
    p[i] = static_cast<unsigned char>(std::lround(p[i] * (1 - alpha) + c[i] * alpha));
}

void Canvas::rect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = y0; y <= y1; ++y) {
    for (int x = x0; x <= x1; ++x) blend(x, y, c);
  }
}

void Canvas::frame(int x0, int y0, int x1, int y1, Rgb c) {
  rect(x0, y0, x1, y0, c);
  rect(x0, y1, x1, y1, c);
  rect(x0, y0, x0, y1, c);
  rect(x1, y0, x1, y1, c);
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, int width) {
  const int n = static_cast<int>(std::ceil(std::hypot(x1 - x0, y1 - y0))) + 1;
  for (int i = 0; i <= n; ++i) {
    const double t = static_cast<double>(i) / n;
    disc(x0 + (x1 - x0) * t, y0 + (y1 - y0) * t, width / 2.0, c);
  }
}

void Canvas::disc(double cx, double cy, double r, Rgb c) {
  for (int y = static_cast<int>(cy - r); y <= static_cast<int>(cy + r) + 1; ++y) {
    for (int x = static_cast<int>(cx - r); x <= static_cast<int>(cx + r) + 1; ++x) {
      if (std::hypot(x - cx, y - cy) <= r) blend(x, y, c);
    }
  }
}

Status Canvas::write_png(const std::string& path) const {
  FILE* fp = std::fopen(path.c_str(), "wb");
  if (fp == nullptr) return errno_status(errno, "create", path);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (png == nullptr || info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    std::fclose(fp);
    return Status(ErrorCode::kIo, "cannot write PNG " + path);
  }
  png_init_io(png, fp);
  png_set_IHDR(png, info, static_cast<png_uint_32>(width_), static_cast<png_uint_32>(height_), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height_; ++y) {
    png_write_row(png, const_cast<png_bytep>(rgb_.data() + static_cast<size_t>(y) * width_ * 3));
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  if (std::fclose(fp) != 0) return errno_status(errno, "close", path);
  return Status::Ok();
}

Text::~Text() {
  if (face_ != nullptr) FT_Done_Face(face_);
  if (lib_ != nullptr) FT_Done_FreeType(lib_);
}

Status Text::open() {
  if (FT_Init_FreeType(&lib_) != 0) return Status(ErrorCode::kResource, "cannot start FreeType");
  if (FT_New_Face(lib_, DEEPGRID_FONT, 0, &face_) != 0) {
    return unsupported(std::string("cannot load the font ") + DEEPGRID_FONT +
                       " for plot labels; install fonts-dejavu-core");
  }
  return Status::Ok();
}

int Text::width(const std::string& s, int px) {
  FT_Set_Pixel_Sizes(face_, 0, static_cast<FT_UInt>(px));
  int w = 0;
  for (unsigned char ch : s) {
    if (FT_Load_Char(face_, ch, FT_LOAD_DEFAULT) == 0)
      w += static_cast<int>(face_->glyph->advance.x >> 6);
  }
  return w;
}

void Text::draw(Canvas& c, const std::string& s, int x, int y, int px, double anchor, bool vertical,
                Rgb colour) {
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

double tick_step(double span, int n, bool quarters) {
  const double raw = span / std::max(1, n);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0}) {
    if ((quarters || m != 2.5) && m * mag >= raw * (1 - 1e-9)) return m * mag;
  }
  return 10 * mag;
}

std::string tick_label(double v, int digits) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v + 0.0);
  return buf;
}

}  // namespace deepgrid::internal
