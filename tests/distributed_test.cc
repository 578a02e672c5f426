// The pieces of distributed grids that need no MPI: the decomposition, halo extents, the plane
// transfers of a halo exchange, and the top-level manifest.
#include "deepgrid/distributed.h"

#include <gtest/gtest.h>

#include <map>

namespace deepgrid {
namespace {

TEST(Decomposition, SlabsAreBalancedAndTileThePlanes) {
  for (int64_t nz : {1, 5, 13, 64}) {
    for (int ranks = 1; ranks <= std::min<int64_t>(nz, 7); ++ranks) {
      auto slabs = decompose_z(nz, ranks);
      ASSERT_TRUE(slabs.ok());
      ASSERT_EQ(static_cast<int>(slabs->size()), ranks);
      int64_t z = 0, smallest = nz, largest = 0;
      for (const Slab& s : *slabs) {
        EXPECT_EQ(s.z0, z);
        smallest = std::min(smallest, s.planes());
        largest = std::max(largest, s.planes());
        z = s.z1;
      }
      EXPECT_EQ(z, nz);
      EXPECT_LE(largest - smallest, 1);
      EXPECT_GE(smallest, 1);
    }
  }
}

TEST(Decomposition, MoreRanksThanPlanesAreRefused) {
  auto slabs = decompose_z(3, 4);
  ASSERT_FALSE(slabs.ok());
  EXPECT_EQ(slabs.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(slabs.status().message().find("use at most 3 ranks"), std::string::npos);
}

TEST(Decomposition, HalosClipAtEndsThatAreNotPeriodic) {
  const Slab first{0, 4}, middle{4, 8}, last{8, 10};
  EXPECT_EQ(needed_halo(first, 10, 3, false), (HaloExtent{0, 3}));
  EXPECT_EQ(needed_halo(middle, 10, 6, false), (HaloExtent{4, 2}));
  EXPECT_EQ(needed_halo(last, 10, 3, false), (HaloExtent{3, 0}));
  EXPECT_EQ(needed_halo(first, 10, 3, true), (HaloExtent{3, 3}));
  EXPECT_EQ(needed_halo(last, 10, 30, true), (HaloExtent{30, 30}));
}

TEST(Decomposition, WiderHalosSufficeUnlessTheyPassAnEnd) {
  const Slab middle{4, 8};
  EXPECT_TRUE(halo_suffices({4, 2}, {2, 2}, middle, 10, false));
  EXPECT_FALSE(halo_suffices({1, 2}, {2, 2}, middle, 10, false));
  EXPECT_FALSE(halo_suffices({5, 2}, {2, 2}, middle, 10, false));  // reaches below plane 0
  EXPECT_TRUE(halo_suffices({5, 2}, {2, 2}, middle, 10, true));
  const Slab first{0, 4};  // its part must end at plane 0 unless z is periodic
  EXPECT_FALSE(halo_suffices({2, 2}, {0, 2}, first, 10, false));
  EXPECT_TRUE(halo_suffices({0, 3}, {0, 2}, first, 10, false));
}

// Every halo plane of every part gets the plane it stands for, from the rank that owns it.
TEST(HaloTransfers, EveryHaloPlaneComesFromItsOwner) {
  for (int64_t nz : {1, 4, 9}) {
    for (int ranks = 1; ranks <= std::min<int64_t>(nz, 4); ++ranks) {
      for (bool periodic : {false, true}) {
        for (int64_t halo : {1, 2, 7}) {
          const std::vector<Slab> slabs = *decompose_z(nz, ranks);
          std::vector<PartInfo> parts;
          for (const Slab& s : slabs)
            parts.push_back({s, needed_halo(s, nz, halo, periodic), "", {}});
          const auto transfers = halo_transfers(parts, nz, periodic);
          std::map<std::pair<int, int64_t>, int> filled;
          for (const PlaneTransfer& t : transfers) {
            const PartInfo& from = parts[static_cast<size_t>(t.from_rank)];
            const PartInfo& to = parts[static_cast<size_t>(t.to_rank)];
            const int64_t source = from.global_plane(t.from_plane);
            EXPECT_GE(source, from.slab.z0);
            EXPECT_LT(source, from.slab.z1);
            const int64_t wanted = to.global_plane(t.to_plane);
            EXPECT_EQ(wrap_plane(wanted, nz, periodic), source);
            EXPECT_TRUE(wanted < to.slab.z0 || wanted >= to.slab.z1);
            ++filled[{t.to_rank, t.to_plane}];
          }
          int64_t halo_planes = 0;
          for (const PartInfo& p : parts) halo_planes += p.halo.below + p.halo.above;
          EXPECT_EQ(static_cast<int64_t>(filled.size()), halo_planes);
          EXPECT_EQ(static_cast<int64_t>(transfers.size()), halo_planes);  // each once
        }
      }
    }
  }
}

DistributedManifest two_parts() {
  DistributedManifest m;
  m.id = "0123456789abcdef";
  m.shape = {8, 6, 10};
  m.dtype = DType::kF64;
  m.step = 12;
  m.parts = {{{0, 5}, {0, 2}, "/ssd/0/p", {"/ssd/0"}}, {{5, 10}, {2, 0}, "/ssd/1/p", {"/ssd/1"}}};
  m.history.push_back({"2026-11-22T20:34:04Z", "create", "{\"ranks\":2}"});
  return m;
}

TEST(DistributedManifest, RoundTrips) {
  const DistributedManifest m = two_parts();
  auto back = DistributedManifest::from_json(m.to_json());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), m.to_json());
  EXPECT_EQ(back->ranks(), 2);
  EXPECT_EQ(back->parts[1].halo, (HaloExtent{2, 0}));
  EXPECT_EQ(back->parts[0].stores, std::vector<std::string>{"/ssd/0"});
}

TEST(DistributedManifest, InconsistentManifestsAreRefused) {
  auto damaged = [](auto change) {
    DistributedManifest m = two_parts();
    change(m);
    return DistributedManifest::from_json(m.to_json()).status();
  };
  EXPECT_EQ(damaged([](auto& m) { m.parts[1].slab.z0 = 4; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts[1].slab.z1 = 9; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts[0].halo.below = -1; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts.clear(); }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.version = 99; }).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(DistributedManifest::from_json("{\"format\": \"other\"}").status().code(),
            ErrorCode::kCorrupt);
  const Status serial = DistributedManifest::from_json("{\"format\": \"deepgrid-grid\"}").status();
  EXPECT_EQ(serial.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(serial.message().find("without mpirun"), std::string::npos) << serial.message();
  EXPECT_EQ(DistributedManifest::from_json("not json").status().code(), ErrorCode::kCorrupt);
}

}  // namespace
}  // namespace deepgrid
