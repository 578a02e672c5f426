// Receivers' traces on disk: written whole once, then only the rows that changed.
#include "deepgrid/probes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "deepgrid/npy.h"
#include "deepgrid/traces_file.h"
#include "temp_dir.h"

namespace deepgrid {
namespace {

// Overwrites the value of (row, receiver) in the .npy file at `path`, as another writer would.
void poke(const std::string& path, const Traces& t, int64_t row, int64_t r, double v) {
  const int64_t offset = read_npy_header(path)->data_offset +
                         (row * t.receivers + r) * static_cast<int64_t>(sizeof(double));
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(offset);
  f.write(reinterpret_cast<const char*>(&v), sizeof v);
}

TEST(TracesFile, IsWrittenWholeOnceAndThenOnlyWhereItChanged) {
  const testing::TempDir tmp;
  const std::string path = tmp.path().string() + "/traces.npy";
  Traces t = run_traces(10, 15, 3);  // steps 11..15
  *t.at(11, 0) = 1.5;
  ASSERT_TRUE(write_traces_npy(t, path).ok());
  Traces back = read_traces_npy(path).value();
  ASSERT_EQ(back.steps, 5);
  ASSERT_EQ(back.receivers, 3);
  EXPECT_EQ(back.values[0], 1.5);
  EXPECT_TRUE(std::isnan(back.values[1]));

  // Step 13 is recorded; the file's row of step 15 is changed behind the traces' back. Saving
  // again writes step 13's row and leaves step 15's alone: it did not change in memory.
  *t.at(13, 2) = -2.0;
  poke(path, t, 4, 1, 42.0);
  ASSERT_TRUE(write_traces_npy(t, path).ok());
  back = read_traces_npy(path).value();
  EXPECT_EQ(back.values[2 * 3 + 2], -2.0);
  EXPECT_EQ(back.values[4 * 3 + 1], 42.0);
  EXPECT_EQ(back.values[0], 1.5);

  // Nothing changed since: nothing is written.
  poke(path, t, 2, 2, 7.0);
  ASSERT_TRUE(write_traces_npy(t, path).ok());
  EXPECT_EQ(read_traces_npy(path)->values[2 * 3 + 2], 7.0);

  // Another path gets the whole traces.
  const std::string other = tmp.path().string() + "/other.npy";
  ASSERT_TRUE(write_traces_npy(t, other).ok());
  back = read_traces_npy(other).value();
  EXPECT_EQ(back.values[2 * 3 + 2], -2.0);
  EXPECT_TRUE(std::isnan(back.values[4 * 3 + 1]));
}

// A run holds a few steps' rows at a time: each save writes them where they belong in the
// whole run's file, and a resumed run loads its window back from it.
// No receivers (no caller saves those today): the file is a valid (steps, 0) array, not a
// division by the row size's zero.
TEST(TracesFile, NoReceiversMakeAnEmptyArray) {
  const testing::TempDir tmp;
  const std::string path = tmp.path().string() + "/traces.npy";
  Traces t = run_traces(0, 7, 0);
  ASSERT_TRUE(write_traces_npy(t, path).ok());
  const std::string header = npy_header(DType::kF64, {7, 0});
  EXPECT_EQ(std::filesystem::file_size(path), header.size());
  std::ifstream in(path, std::ios::binary);
  std::string head(header.size(), '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  EXPECT_EQ(head, header);
}

TEST(TracesFile, AWindowOfRowsIsSavedInPlaceAndLoadedBack) {
  const testing::TempDir tmp;
  const std::string path = tmp.path().string() + "/traces.npy";
  Traces t = run_traces(10, 20, 2, 4);  // steps 11..20, four held at a time
  ASSERT_EQ(t.values.size(), 8u);
  EXPECT_TRUE(t.holds(11) && t.holds(14));
  EXPECT_FALSE(t.holds(15) || t.holds(10));
  *t.at(12, 1) = 1.5;
  ASSERT_TRUE(write_traces_npy(t, path).ok());  // whole: 10 rows
  hold_from(&t, 15);
  EXPECT_TRUE(t.holds(18) && !t.holds(14) && !t.holds(19));
  EXPECT_TRUE(std::isnan(t.values[0]));
  *t.at(18, 0) = -2.0;
  ASSERT_TRUE(write_traces_npy(t, path).ok());  // in place
  hold_from(&t, 19);
  EXPECT_EQ(t.held_steps(), 2);  // the run ends at step 20
  EXPECT_FALSE(t.holds(21));
  *t.at(20, 1) = 3.0;
  ASSERT_TRUE(write_traces_npy(t, path).ok());

  const Traces back = read_traces_npy(path).value();
  ASSERT_EQ(back.steps, 10);
  ASSERT_EQ(back.values.size(), 20u);
  for (size_t i = 0; i < back.values.size(); ++i) {
    const double want = i == 1 * 2 + 1 ? 1.5 : i == 7 * 2 + 0 ? -2.0 : i == 9 * 2 + 1 ? 3.0 : 0;
    if (want == 0) {
      EXPECT_TRUE(std::isnan(back.values[i])) << i;
    } else {
      EXPECT_EQ(back.values[i], want) << i;
    }
  }

  // Resumed at step 17: the window is read from the file, and later saves update it in place.
  Traces again = run_traces(10, 20, 2, 4, 17);
  load_held_rows(&again, path);
  EXPECT_EQ(again.saved_path, path);
  EXPECT_EQ(again.values[1 * 2 + 0], -2.0);  // step 18
  EXPECT_EQ(again.values[3 * 2 + 1], 3.0);   // step 20
  *again.at(17, 0) = 4.0;
  poke(path, back, 0, 0, 9.0);  // step 11, outside the window: left alone
  ASSERT_TRUE(write_traces_npy(again, path).ok());
  const Traces last = read_traces_npy(path).value();
  EXPECT_EQ(last.values[6 * 2 + 0], 4.0);
  EXPECT_EQ(last.values[0], 9.0);
  EXPECT_EQ(last.values[1 * 2 + 1], 1.5);

  // A file of another run's shape is not loaded: the next save writes the file whole.
  Traces other = run_traces(10, 21, 2, 4);
  load_held_rows(&other, path);
  EXPECT_TRUE(other.saved_path.empty());
  EXPECT_TRUE(std::isnan(other.values[2 * 2 + 1]));
}

// Moving the window past rows it never held would lose an engine's values: a bug, stopped.
TEST(TracesFileDeathTest, AWindowDoesNotSkipSteps) {
  Traces t = run_traces(0, 100, 1, 8);
  hold_from(&t, 9);
  EXPECT_DEATH(hold_from(&t, 18), "internal error");
}

// Each plane sees exactly its own probes, in the order given (sources at one point then add
// up in the order the user gave, as before the index).
TEST(ProbesByPlane, EachPlaneSeesItsOwnInTheOrderGiven) {
  Probes given;
  for (int64_t z : {5, 2, 5, 0, 2, 5}) given.receivers.push_back({"u", 1, 1, z});
  for (int64_t z : {3, 3, 0}) {
    SourceSpec source;
    source.x = source.y = 2;
    source.z = z;
    given.sources.push_back(source);
  }
  auto p = resolve_probes(given, {4, 4, 8}, {"u"});
  ASSERT_TRUE(p.ok()) << p.status().message();
  auto indices = [](std::span<const uint32_t> s) {
    return std::vector<uint32_t>(s.begin(), s.end());
  };
  EXPECT_EQ(indices(p->receivers_on(5)), (std::vector<uint32_t>{0, 2, 5}));
  EXPECT_EQ(indices(p->receivers_on(2)), (std::vector<uint32_t>{1, 4}));
  EXPECT_EQ(indices(p->receivers_on(0)), (std::vector<uint32_t>{3}));
  EXPECT_TRUE(p->receivers_on(1).empty());
  EXPECT_TRUE(p->receivers_on(7).empty());
  EXPECT_EQ(indices(p->sources_on(3)), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(indices(p->sources_on(0)), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(p->sources_on(5).empty());
}

}  // namespace
}  // namespace deepgrid
