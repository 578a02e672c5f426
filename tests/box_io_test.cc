// Boxes of a stored grid: random boxes (steps included) read and written against a plain
// in-memory copy of the grid, over several store directories, both dtypes.
#include "deepgrid/box_io.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <vector>

#include "deepgrid/fsck.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

struct Case {
  Shape shape;
  DType dtype;
  int stores;
};

class BoxIoTest : public ::testing::TestWithParam<Case> {
 protected:
  // A grid with random values, striped over the stores in chunks of a few planes.
  Grid make_grid() {
    CreateOptions o;
    o.shape = GetParam().shape;
    o.dtype = GetParam().dtype;
    o.init = {InitSpec::Kind::kRandom, 0, 7};
    o.chunk_target_bytes = 3 * round_up(o.shape.plane_points() * 8, kDirectIoAlignment);
    for (int s = 0; s < GetParam().stores; ++s) {
      o.stores.push_back(tmp_ / ("store" + std::to_string(s)));
      std::filesystem::create_directory(o.stores.back());
    }
    auto g = Grid::create(tmp_ / "g", o);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return std::move(g).value();
  }

  testing::TempDir tmp_;
};

AxisRange random_range(std::mt19937& rng, int64_t n) {
  const int64_t step = std::uniform_int_distribution<int64_t>(1, 3)(rng);
  const int64_t start = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
  const int64_t max_count = (n - 1 - start) / step + 1;
  return {start, std::uniform_int_distribution<int64_t>(1, max_count)(rng), step};
}

Box random_box(std::mt19937& rng, const Shape& s) {
  return {random_range(rng, s.nz), random_range(rng, s.ny), random_range(rng, s.nx)};
}

// Flat index in (z, y, x) order of every point of the box, in box order.
std::vector<int64_t> box_indices(const Shape& s, const Box& b) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < b.z.count; ++k) {
    for (int64_t j = 0; j < b.y.count; ++j) {
      for (int64_t i = 0; i < b.x.count; ++i) {
        const int64_t z = b.z.start + k * b.z.step, y = b.y.start + j * b.y.step;
        out.push_back((z * s.ny + y) * s.nx + b.x.start + i * b.x.step);
      }
    }
  }
  return out;
}

template <typename T>
std::vector<T> read_all(const Grid& g) {
  std::vector<T> v(static_cast<size_t>(g.shape().points()));
  EXPECT_TRUE(g.read_planes(0, g.shape().nz, v.data()).ok());
  return v;
}

template <typename T>
void check_random_reads(const Grid& g) {
  const std::vector<T> all = read_all<T>(g);
  std::mt19937 rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    const Box b = random_box(rng, g.shape());
    std::vector<T> got(static_cast<size_t>(b.points()));
    ASSERT_TRUE(read_box(g, b, got.data()).ok());
    const std::vector<int64_t> idx = box_indices(g.shape(), b);
    for (size_t i = 0; i < idx.size(); ++i) {
      ASSERT_EQ(got[i], all[static_cast<size_t>(idx[i])]) << "trial " << trial << " value " << i;
    }
  }
}

template <typename T>
void check_random_writes(Grid& g) {
  std::vector<T> expect = read_all<T>(g);
  std::mt19937 rng(2);
  T next = 1000;
  for (int trial = 0; trial < 100; ++trial) {
    // Every fourth box is whole planes or whole rows: the paths that skip reading first.
    Box b = random_box(rng, g.shape());
    if (trial % 4 == 0) b.y = {0, g.shape().ny, 1};
    if (trial % 4 <= 1) b.x = {0, g.shape().nx, 1};
    std::vector<T> values(static_cast<size_t>(b.points()));
    for (T& v : values) v = next++;
    ASSERT_TRUE(write_box(g, b, values.data()).ok());
    const std::vector<int64_t> idx = box_indices(g.shape(), b);
    for (size_t i = 0; i < idx.size(); ++i) expect[static_cast<size_t>(idx[i])] = values[i];
  }
  EXPECT_EQ(read_all<T>(g), expect);
}

// The padding after each plane stays zero (docs/format.md).
void check_padding_zero(const Grid& g) {
  const Layout& l = g.manifest().layout;
  for (int64_t z = 0; z < g.shape().nz; ++z) {
    const PlaneLocation loc = g.manifest().locate(z);
    std::ifstream in(g.file_path(loc.file), std::ios::binary);
    in.seekg(loc.offset + l.plane_bytes);
    std::vector<char> pad(static_cast<size_t>(l.plane_stride - l.plane_bytes));
    in.read(pad.data(), static_cast<std::streamsize>(pad.size()));
    ASSERT_TRUE(in);
    EXPECT_EQ(std::count(pad.begin(), pad.end(), 0), static_cast<long>(pad.size()))
        << "plane " << z;
  }
}

TEST_P(BoxIoTest, RandomBoxesReadWhatTheGridHolds) {
  Grid g = make_grid();
  dispatch_dtype(g.dtype(), [&](auto tag) { check_random_reads<decltype(tag)>(g); });
}

// Box writes change only the box's values, keep the step, and commit the touched planes'
// checksums (fsck finds nothing).
TEST_P(BoxIoTest, RandomBoxesWriteOnlyTheirValues) {
  std::string dir;
  int64_t step = 0;
  {
    Grid g = make_grid();
    dir = g.dir();
    step = g.manifest().step;
    dispatch_dtype(g.dtype(), [&](auto tag) { check_random_writes<decltype(tag)>(g); });
    check_padding_zero(g);
  }
  auto reopened = Grid::open(dir);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_EQ(reopened->manifest().step, step);
  const FsckReport fsck = fsck_grid(*reopened).value();
  EXPECT_TRUE(fsck.has_checksums);
  EXPECT_FALSE(fsck.damage_found()) << fsck.damaged.size() << " planes differ from their checksums";
}

TEST_P(BoxIoTest, WholeGridBoxIsTheGrid) {
  Grid g = make_grid();
  dispatch_dtype(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const Box all = whole_grid_box(g.shape());
    std::vector<T> v(static_cast<size_t>(all.points()));
    ASSERT_TRUE(read_box(g, all, v.data()).ok());
    EXPECT_EQ(v, read_all<T>(g));
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, BoxIoTest,
                         ::testing::Values(Case{{37, 53, 11}, DType::kF32, 1},
                                           Case{{37, 53, 11}, DType::kF64, 3},
                                           Case{{300, 40, 9}, DType::kF64, 2},
                                           Case{{1024, 1, 7}, DType::kF32, 2}));

class BoxChecks : public ::testing::Test {
 protected:
  testing::TempDir tmp_;
};

TEST_F(BoxChecks, OutsideTheGridOrBadStepIsRefused) {
  const Shape s{10, 20, 30};
  EXPECT_TRUE(check_box(s, whole_grid_box(s)).ok());
  Box b = whole_grid_box(s);
  b.z = {25, 3, 2};  // reaches 29
  EXPECT_TRUE(check_box(s, b).ok());
  b.z = {25, 4, 2};  // reaches 31
  const Status st = check_box(s, b);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("along z"), std::string::npos) << st.message();
  b = whole_grid_box(s);
  b.x.step = 0;
  EXPECT_EQ(check_box(s, b).code(), ErrorCode::kInvalidArgument);
  b = whole_grid_box(s);
  b.y = {-1, 1, 1};
  EXPECT_EQ(check_box(s, b).code(), ErrorCode::kInvalidArgument);
  b.y = {-1, 0, 1};  // empty: nothing is read
  EXPECT_TRUE(check_box(s, b).ok());
}

TEST_F(BoxChecks, WritingAReadOnlyGridIsRefused) {
  CreateOptions o;
  o.shape = {8, 8, 4};
  ASSERT_TRUE(Grid::create(tmp_ / "g", o).ok());
  Grid g = Grid::open(tmp_ / "g", Grid::Mode::kReadOnly).value();
  std::vector<float> v(64, 1.0f);
  Box b = whole_grid_box(o.shape);
  b.z = {0, 1, 1};
  const Status st = write_box(g, b, v.data());
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("read-only"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace deepgrid
