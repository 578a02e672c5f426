// The machine profile: measured rates are positive, cached per machine after the first
// measurement, remeasured on request, and a damaged cache is measured over.
#include "deepgrid/machine.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "temp_dir.h"

namespace deepgrid {
namespace {

class MachineProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("DEEPGRID_CACHE_DIR", (tmp_.path() / "cache").c_str(), 1);
    CreateOptions co;
    co.shape = {64, 48, 40};
    co.init = *parse_init("random:1");
    ASSERT_TRUE(Grid::create((tmp_.path() / "g").string(), co).ok());
  }

  Result<MachineProfile> profile(bool remeasure = false) {
    const Grid g = Grid::open((tmp_.path() / "g").string()).value();
    return machine_profile(g, Stencil::preset("7pt").value(), 1, remeasure);
  }

  testing::TempDir tmp_;
};

TEST_F(MachineProfileTest, MeasuresOnceThenReadsTheCache) {
  EXPECT_EQ(machine_cache_path(), (tmp_.path() / "cache" / "machine.json").string());
  const MachineProfile first = profile().value();
  EXPECT_FALSE(first.cached);
  EXPECT_GT(first.compute_mlups, 0);
  EXPECT_GT(first.disk_read_bps, 0);

  std::ifstream in(machine_cache_path());
  const nlohmann::json cache = nlohmann::json::parse(in);
  EXPECT_EQ(cache["compute_mlups"].size(), 1u);
  EXPECT_EQ(cache["disk_read_bytes_per_second"].size(), 1u);

  const MachineProfile second = profile().value();
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(second.compute_mlups, first.compute_mlups);
  EXPECT_EQ(second.disk_read_bps, first.disk_read_bps);

  EXPECT_FALSE(profile(/*remeasure=*/true).value().cached);
}

TEST_F(MachineProfileTest, ADamagedCacheIsMeasuredOver) {
  ASSERT_TRUE(profile().ok());
  std::ofstream(machine_cache_path()) << "{ not json";
  const MachineProfile p = profile().value();
  EXPECT_FALSE(p.cached);
  EXPECT_GT(p.compute_mlups, 0);
  EXPECT_TRUE(profile().value().cached) << "the cache was rewritten";
}

}  // namespace
}  // namespace deepgrid
