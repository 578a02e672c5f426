// Pictures of slices (deepgrid/image.h): the PNG is read back with libpng and its pixels checked
// against the values drawn and the geometry write_slice_png reports, so that a cell drawn in
// the wrong place or colour, a missing frame, tick or text, or a wrong scale fails.
#include "deepgrid/image.h"

#include <gtest/gtest.h>
#include <png.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace deepgrid {
namespace {

using testing::TempDir;

using Rgb = std::array<int, 3>;
constexpr Rgb kDark{68, 1, 84}, kBright{253, 231, 37};  // viridis at 0 and at 1
constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0};

struct Picture {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  Rgb at(int64_t x, int64_t y) const {
    const unsigned char* p = rgb.data() + (y * width + x) * 3;
    return {p[0], p[1], p[2]};
  }
  // Pixels of text or lines: grey (antialiased black on white) and darker than mid-grey.
  int dark_pixels(int x0, int y0, int x1, int y1) const {
    int n = 0;
    for (int y = y0; y < y1; ++y) {
      for (int x = x0; x < x1; ++x) {
        const Rgb c = at(x, y);
        n += c[0] == c[1] && c[1] == c[2] && c[0] < 128;
      }
    }
    return n;
  }
};

Picture read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  Picture p;
  if (png_image_begin_read_from_file(&image, path.c_str()) == 0) {
    ADD_FAILURE() << "cannot read " << path << ": " << image.message;
    return p;
  }
  image.format = PNG_FORMAT_RGB;
  p.width = static_cast<int>(image.width);
  p.height = static_cast<int>(image.height);
  p.rgb.resize(PNG_IMAGE_SIZE(image));
  EXPECT_NE(png_image_finish_read(&image, nullptr, p.rgb.data(), 0, nullptr), 0) << image.message;
  return p;
}

// A float32 grid of `shape` held in memory, value(x, y, z) + 1000 c at each point of each
// component c of `fields`, as a plane source.
struct MemoryGrid {
  Manifest m;
  std::vector<float> values;
  MemoryGrid(Shape shape, const std::function<float(int64_t, int64_t, int64_t)>& value,
             std::vector<std::string> fields = {}) {
    m.shape = shape;
    m.dtype = DType::kF32;
    m.step = 100;
    m.fields = std::move(fields);
    for (int64_t z = 0; z < shape.nz; ++z) {
      for (int c = 0; c < m.components(); ++c) {
        for (int64_t y = 0; y < shape.ny; ++y) {
          for (int64_t x = 0; x < shape.nx; ++x) values.push_back(value(x, y, z) + 1000.0f * c);
        }
      }
    }
  }
  io::PlaneSource planes() const {
    return [this](const io::PlaneConsumer& consume) {
      for (int64_t z = 0; z < m.shape.nz; ++z) {
        DG_RETURN_IF_ERROR(consume(z, values.data() + z * m.components() * m.shape.plane_points()));
      }
      return Status::Ok();
    };
  }
};

class ImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(DEEPGRID_FONT)) {
      GTEST_SKIP() << "no font " << DEEPGRID_FONT << " (install fonts-dejavu-core)";
    }
  }
  // Draws `slice` of g, reads the PNG back and checks that its size is what info says.
  SliceImageInfo draw(const MemoryGrid& g, const std::string& slice, Picture* pic,
                      int component = 0) {
    SliceSpec spec = *parse_slice(slice);
    spec.component = component;
    const std::string path = (tmp_.path() / "slice.png").string();
    Result<SliceImageInfo> info = write_slice_png(g.m, g.planes(), spec, path, "ramp");
    EXPECT_TRUE(info.ok()) << info.status().message();
    if (!info.ok()) return {};
    *pic = read_png(path);
    EXPECT_EQ(pic->width, info->width);
    EXPECT_EQ(pic->height, info->height);
    return *info;
  }
  TempDir tmp_;
};

// The pixel at the middle of cell (i, j), j counting upwards, as SliceImageInfo places it.
Rgb cell(const Picture& p, const SliceImageInfo& info, int64_t i, int64_t j) {
  const double px = static_cast<double>(info.scale) / static_cast<double>(info.block);
  const auto x = info.data_x + static_cast<int64_t>((i + 0.5) * px);
  const auto y = info.data_y + info.data_height - 1 - static_cast<int64_t>((j + 0.5) * px);
  return p.at(x, y);
}

// A 16x16 ramp, v = x + 16 y from 0 to 255: each cell a 32x32 block at its place, the min
// the dark end of viridis at the bottom left, the max the bright end at the top right.
TEST_F(ImageTest, SmallSliceIsScaledUpWithCellsWhereTheAxesSay) {
  const MemoryGrid g({16, 16, 3}, [](int64_t x, int64_t y, int64_t z) {
    return z == 1 ? static_cast<float>(x + 16 * y) : -1000.0f;
  });
  Picture p;
  const SliceImageInfo info = draw(g, "z=mid", &p);
  EXPECT_EQ(info.cells_x, 16);
  EXPECT_EQ(info.cells_y, 16);
  EXPECT_EQ(info.scale, 32);
  EXPECT_EQ(info.block, 1);
  EXPECT_EQ(info.data_width, 512);
  EXPECT_EQ(info.data_height, 512);
  EXPECT_EQ(info.min, 0);
  EXPECT_EQ(info.max, 255);
  EXPECT_EQ(info.title, "ramp: z = 1, step 100");
  EXPECT_LT(p.width, 800);
  EXPECT_LT(p.height, 700);

  EXPECT_EQ(cell(p, info, 0, 0), kDark);
  EXPECT_EQ(cell(p, info, 15, 15), kBright);
  EXPECT_NE(cell(p, info, 15, 0), kDark);  // x + 16 y is not symmetric: the axes are not swapped
  EXPECT_NE(cell(p, info, 15, 0), cell(p, info, 0, 15));
  // Every pixel of the top-right cell is the max's colour: nearest-neighbour blocks.
  for (int64_t y = info.data_y; y < info.data_y + 32; ++y) {
    for (int64_t x = info.data_x + 480; x < info.data_x + 512; ++x) ASSERT_EQ(p.at(x, y), kBright);
  }
  // A frame one pixel outside the cells.
  EXPECT_EQ(p.at(info.data_x - 1, info.data_y + 100), kBlack);
  EXPECT_EQ(p.at(info.data_x + 100, info.data_y + info.data_height), kBlack);
  // Ticks below the frame at the middle of cells 0, 2, 4, ..., none between.
  const int64_t below = info.data_y + info.data_height + 2;
  EXPECT_EQ(p.at(info.data_x + 16, below), kBlack);
  EXPECT_EQ(p.at(info.data_x + 2 * 32 + 16, below), kBlack);
  EXPECT_EQ(p.at(info.data_x + 32 + 16, below), kWhite);
  // Tick labels under the ticks and left of the frame.
  EXPECT_GT(p.dark_pixels(static_cast<int>(info.data_x), static_cast<int>(below + 4),
                          static_cast<int>(info.data_x + 40), static_cast<int>(below + 20)),
            10);
  EXPECT_GT(p.dark_pixels(0, static_cast<int>(info.data_y), static_cast<int>(info.data_x - 6),
                          static_cast<int>(info.data_y + info.data_height)),
            30);
  // The title in the band above the frame.
  EXPECT_GT(p.dark_pixels(0, 0, p.width, static_cast<int>(info.data_y - 2)), 50);
}

// The colour bar right of the cells: bright at the top, dark at the bottom, in a frame, with
// ticks and their values further right.
TEST_F(ImageTest, ColourBarHasTheColourMapAndLabelledTicks) {
  const MemoryGrid g({16, 16, 1}, [](int64_t x, int64_t y, int64_t) {
    return static_cast<float>(x + 16 * y) / 255.0f;
  });
  Picture p;
  const SliceImageInfo info = draw(g, "z=0", &p);
  const int64_t row = info.data_y + info.data_height / 2;
  int64_t x = info.data_x + info.data_width + 1;
  while (x < p.width && p.at(x, row) == kWhite) ++x;  // the gap, up to the bar's frame
  ASSERT_LT(x + 5, p.width) << "no colour bar";
  EXPECT_EQ(p.at(x, row), kBlack);
  EXPECT_EQ(p.at(x + 3, info.data_y), kBright);
  EXPECT_EQ(p.at(x + 3, info.data_y + info.data_height - 1), kDark);
  int64_t right = x + 1;
  while (right < p.width && p.at(right, row) != kBlack) ++right;  // across the bar
  ASSERT_LT(right, p.width);
  // Values 0, 0.2, ..., 1: ticks at the ends, labels beside them.
  EXPECT_EQ(p.at(right + 2, info.data_y), kBlack);
  EXPECT_EQ(p.at(right + 2, info.data_y + info.data_height - 1), kBlack);
  EXPECT_GT(p.dark_pixels(static_cast<int>(right + 5), static_cast<int>(info.data_y - 6), p.width,
                          static_cast<int>(info.data_y + 8)),
            10);
  EXPECT_GT(p.dark_pixels(static_cast<int>(right + 5), static_cast<int>(info.data_y + 20), p.width,
                          static_cast<int>(info.data_y + info.data_height)),
            40);
}

// A slice wider than the picture's limit: blocks of 3x3 cells averaged into a pixel.
TEST_F(ImageTest, LargeSliceIsScaledDownByAveraging) {
  const MemoryGrid g({2100, 1200, 1},
                     [](int64_t x, int64_t, int64_t) { return x >= 1051 ? 1.0f : 0.0f; });
  Picture p;
  const SliceImageInfo info = draw(g, "z=0", &p);
  EXPECT_EQ(info.block, 3);
  EXPECT_EQ(info.scale, 1);
  EXPECT_EQ(info.data_width, 700);
  EXPECT_EQ(info.data_height, 400);
  EXPECT_LT(p.width, 1000);
  const int64_t y = info.data_y + 200;
  EXPECT_EQ(p.at(info.data_x + 349, y), kDark);    // cells 1047..1049: 0
  EXPECT_EQ(p.at(info.data_x + 351, y), kBright);  // cells 1053..1055: 1
  // Cells 1050..1052 hold 0, 1, 1: their mean 2/3 is viridis(2/3), between stops 5 and 6.
  EXPECT_EQ(p.at(info.data_x + 350, y), (Rgb{57, 182, 119}));
}

// An x-slice: y along the picture, z upwards (the top row is the last plane); the field of a
// grid of several named in the title; cells that are not finite left white.
TEST_F(ImageTest, XSliceOfOneFieldOfSeveral) {
  const MemoryGrid g(
      {4, 8, 16},
      [](int64_t, int64_t y, int64_t z) { return y == 3 && z == 5 ? NAN : static_cast<float>(z); },
      {"u", "v"});
  Picture p;
  const SliceImageInfo info = draw(g, "x=1", &p, /*component=*/1);
  EXPECT_EQ(info.title, "ramp: field v, x = 1, step 100");
  EXPECT_EQ(info.min, 1000);  // v, not u
  EXPECT_EQ(info.max, 1015);
  EXPECT_EQ(info.cells_x, 8);
  EXPECT_EQ(info.cells_y, 16);
  EXPECT_EQ(info.scale, 32);
  EXPECT_EQ(cell(p, info, 0, 15), kBright);
  EXPECT_EQ(cell(p, info, 7, 0), kDark);
  EXPECT_EQ(cell(p, info, 3, 5), kWhite);
  EXPECT_NE(cell(p, info, 3, 6), kWhite);
}

TEST(GridDisplayName, IsTheDirectorysBaseName) {
  EXPECT_EQ(grid_display_name("/data/runs/heat"), "heat");
  EXPECT_EQ(grid_display_name("scratch/demo/"), "demo");
  EXPECT_EQ(grid_display_name("."), std::filesystem::current_path().filename().string());
}

}  // namespace
}  // namespace deepgrid
