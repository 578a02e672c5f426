// The pieces of distributed grids that need no MPI: the decomposition over a process grid,
// halo extents, the box transfers of a halo exchange, and the top-level manifest.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "store/distributed_manifest.h"

namespace deepgrid {
namespace {

// Every point of the grid lies in exactly one block; per axis the pieces are balanced.
TEST(Decomposition, BlocksAreBalancedAndTileTheGrid) {
  for (const Shape shape : {Shape{5, 7, 13}, Shape{1, 3, 4}, Shape{9, 2, 6}}) {
    for (const ProcessGrid g :
         {ProcessGrid{{1, 1, 4}}, ProcessGrid{{2, 2, 1}}, ProcessGrid{{1, 2, 2}},
          ProcessGrid{{1, 3, 1}}, ProcessGrid{{1, 1, 1}}}) {
      if (!check_process_grid(g, shape, g.ranks()).ok()) continue;
      const std::vector<Block> blocks = decompose(shape, g);
      ASSERT_EQ(static_cast<int>(blocks.size()), g.ranks());
      std::vector<int> owners(static_cast<size_t>(shape.points()), 0);
      for (size_t r = 0; r < blocks.size(); ++r) {
        const Block& b = blocks[r];
        EXPECT_GE(b.points(), 1) << b.to_string();
        for (int a = 0; a < 3; ++a) {
          const int p = g.p[static_cast<size_t>(a)];
          const int64_t n = a == 0 ? shape.nx : a == 1 ? shape.ny : shape.nz;
          EXPECT_LE(b.size(a), (n + p - 1) / p);
          EXPECT_GE(b.size(a), n / p);
        }
        for (int64_t z = b[kAxisZ].lo; z < b[kAxisZ].hi; ++z)
          for (int64_t y = b[kAxisY].lo; y < b[kAxisY].hi; ++y)
            for (int64_t x = b[kAxisX].lo; x < b[kAxisX].hi; ++x)
              ++owners[static_cast<size_t>((z * shape.ny + y) * shape.nx + x)];
      }
      EXPECT_EQ(std::count(owners.begin(), owners.end(), 1), shape.points()) << g.to_string();
    }
  }
}

TEST(Decomposition, ZSlabsAreProcessGridsOfOneColumn) {
  const std::vector<Block> blocks = decompose({6, 5, 10}, ProcessGrid{{1, 1, 3}});
  EXPECT_EQ(blocks[0], (Block{{Span{0, 6}, Span{0, 5}, Span{0, 4}}}));
  EXPECT_EQ(blocks[1], (Block{{Span{0, 6}, Span{0, 5}, Span{4, 7}}}));
  EXPECT_EQ(blocks[2], (Block{{Span{0, 6}, Span{0, 5}, Span{7, 10}}}));
  // x fastest: rank 1 is the x neighbour of rank 0, rank 2 its y neighbour.
  const std::vector<Block> grid = decompose({6, 5, 10}, ProcessGrid{{2, 2, 1}});
  EXPECT_EQ(grid[1][kAxisX], (Span{3, 6}));
  EXPECT_EQ(grid[1][kAxisY], (Span{0, 3}));
  EXPECT_EQ(grid[2][kAxisX], (Span{0, 3}));
  EXPECT_EQ(grid[2][kAxisY], (Span{3, 5}));
}

TEST(Decomposition, ProcessGridsAreParsedAndChecked) {
  auto g = parse_process_grid("2x3x1");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*g, (ProcessGrid{{2, 3, 1}}));
  EXPECT_EQ(g->to_string(), "2x3x1");
  for (const char* bad : {"0x1x1", "2x2", "2x2x", "ax1x1", "", "2x2x1x1", "-1x1x1"}) {
    const Status st = parse_process_grid(bad).status();
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("PXxPYxPZ"), std::string::npos) << st.message();
  }
  const Status product = check_process_grid({{2, 2, 1}}, {8, 8, 8}, 3);
  EXPECT_EQ(product.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(product.message().find("has 4 ranks but the job has 3"), std::string::npos)
      << product.message();
  const Status extent = check_process_grid({{1, 4, 1}}, {8, 3, 8}, 4);
  EXPECT_EQ(extent.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(extent.message().find("use at most 3 ranks along y"), std::string::npos)
      << extent.message();
  EXPECT_TRUE(check_process_grid({{1, 3, 1}}, {8, 3, 8}, 3).ok());
}

// z-slabs while they stay thick; then z and y; then as few thin pieces as possible.
TEST(Decomposition, TheChosenProcessGridPrefersZThenY) {
  const auto chosen = [](const Shape& s, int ranks) {
    auto g = choose_process_grid(s, ranks);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return g.ok() ? g->to_string() : std::string();
  };
  EXPECT_EQ(chosen({256, 256, 512}, 4), "1x1x4");
  EXPECT_EQ(chosen({64, 64, 8}, 4), "2x2x1");  // 32 points wide: not thin
  EXPECT_EQ(chosen({256, 256, 64}, 4), "1x2x2");
  EXPECT_EQ(chosen({256, 256, 32}, 4), "1x4x1");
  EXPECT_EQ(chosen({256, 64, 32}, 4), "2x2x1");
  EXPECT_EQ(chosen({40, 40, 8}, 4), "1x1x4");  // every split is thin: z-slabs, the cheapest
  EXPECT_EQ(chosen({4, 4, 3}, 4), "1x4x1");    // too few planes for 4 slabs
  EXPECT_EQ(chosen({8, 8, 8}, 1), "1x1x1");
  const Status refused = choose_process_grid({1, 1, 3}, 4).status();
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("use fewer ranks"), std::string::npos) << refused.message();
}

TEST(Decomposition, HalosClipAtEndsThatAreNotPeriodic) {
  const Shape s{6, 8, 10};
  const Block corner{{Span{0, 3}, Span{0, 4}, Span{0, 5}}};
  const Block inner{{Span{3, 6}, Span{2, 6}, Span{5, 10}}};
  const HaloExtent c = needed_halo(corner, s, {1, 2, 3}, false);
  EXPECT_EQ(c.below, (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(c.above, (std::array<int64_t, 3>{1, 2, 3}));
  const HaloExtent i = needed_halo(inner, s, {4, 3, 7}, false);
  EXPECT_EQ(i.below, (std::array<int64_t, 3>{3, 2, 5}));
  EXPECT_EQ(i.above, (std::array<int64_t, 3>{0, 2, 0}));
  const HaloExtent p = needed_halo(corner, s, {4, 3, 30}, true);
  EXPECT_EQ(p.below, (std::array<int64_t, 3>{4, 3, 30}));
  EXPECT_EQ(p.above, (std::array<int64_t, 3>{4, 3, 30}));
  // An axis the block spans whole needs none, periodic or not: the part wraps onto itself.
  const Block slab{{Span{0, 6}, Span{0, 8}, Span{5, 10}}};
  const HaloExtent z_only = needed_halo(slab, s, {2, 2, 2}, true);
  EXPECT_EQ(z_only.below, (std::array<int64_t, 3>{0, 0, 2}));
  EXPECT_EQ(z_only.above, (std::array<int64_t, 3>{0, 0, 2}));
}

TEST(Decomposition, WiderHalosSufficeUnlessTheyPassAnEnd) {
  const Shape s{6, 8, 10};
  const Block inner{{Span{2, 4}, Span{2, 6}, Span{4, 8}}};
  const HaloExtent need = needed_halo(inner, s, {1, 2, 2}, false);
  EXPECT_TRUE(halo_suffices(need, need, inner, s, false));
  HaloExtent wider = need;
  wider.below[kAxisY] = 2;
  EXPECT_TRUE(halo_suffices(wider, need, inner, s, false));
  wider.below[kAxisY] = 3;  // reaches past y = 0
  EXPECT_FALSE(halo_suffices(wider, need, inner, s, false));
  EXPECT_TRUE(halo_suffices(wider, need, inner, s, true));
  HaloExtent narrower = need;
  narrower.above[kAxisX] = 0;
  EXPECT_FALSE(halo_suffices(narrower, need, inner, s, false));
}

// Every halo point of every part (faces, edges, corners) is filled exactly once, from the rank
// that owns the point it stands for (wrapped on every axis for periodic grids), and no block
// point is overwritten; thin blocks (narrower than the halo) take points from ranks further away.
TEST(HaloTransfers, EveryHaloPointComesFromItsOwner) {
  for (const Shape shape : {Shape{5, 4, 6}, Shape{2, 3, 2}, Shape{7, 1, 3}}) {
    for (const ProcessGrid g :
         {ProcessGrid{{1, 1, 2}}, ProcessGrid{{2, 1, 1}}, ProcessGrid{{1, 2, 2}},
          ProcessGrid{{2, 1, 2}}, ProcessGrid{{1, 1, 1}}}) {
      if (!check_process_grid(g, shape, g.ranks()).ok()) continue;
      for (bool periodic : {false, true}) {
        for (const std::array<int64_t, 3> halo :
             {std::array<int64_t, 3>{1, 1, 1}, std::array<int64_t, 3>{2, 0, 3}}) {
          SCOPED_TRACE(shape.to_string() + " " + g.to_string() + (periodic ? " periodic" : ""));
          std::vector<PartInfo> parts;
          for (const Block& b : decompose(shape, g))
            parts.push_back({b, needed_halo(b, shape, halo, periodic), "", {}});
          std::map<std::pair<int, std::array<int64_t, 3>>, int> filled;
          for (const BoxTransfer& t : halo_transfers(parts, shape, periodic)) {
            const PartInfo& from = parts[static_cast<size_t>(t.from_rank)];
            const PartInfo& to = parts[static_cast<size_t>(t.to_rank)];
            ASSERT_EQ(t.from.points(), t.to.points());
            const int64_t n[] = {shape.nx, shape.ny, shape.nz};
            for (int64_t k = 0; k < t.to.size(kAxisZ); ++k)
              for (int64_t j = 0; j < t.to.size(kAxisY); ++j)
                for (int64_t i = 0; i < t.to.size(kAxisX); ++i) {
                  const int64_t d[] = {i, j, k};
                  std::array<int64_t, 3> local{};
                  bool in_block = true;
                  for (int a = 0; a < 3; ++a) {
                    local[static_cast<size_t>(a)] = t.to[a].lo + d[a];
                    const int64_t wanted = to.origin(a) + t.to[a].lo + d[a];
                    const int64_t source = from.origin(a) + t.from[a].lo + d[a];
                    EXPECT_EQ(wrap_index(wanted, n[a], periodic), source);
                    EXPECT_GE(source, from.block[a].lo);
                    EXPECT_LT(source, from.block[a].hi);
                    in_block = in_block && wanted >= to.block[a].lo && wanted < to.block[a].hi;
                  }
                  EXPECT_FALSE(in_block);
                  ++filled[{t.to_rank, local}];
                }
          }
          int64_t halo_points = 0;
          for (const PartInfo& p : parts) halo_points += p.held().points() - p.block.points();
          EXPECT_EQ(static_cast<int64_t>(filled.size()), halo_points);
          for (const auto& [point, times] : filled) EXPECT_EQ(times, 1);
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
  m.procs = {{2, 1, 1}};
  const std::vector<Block> blocks = decompose(m.shape, m.procs);
  m.parts = {
      {blocks[0], {{0, 0, 0}, {2, 0, 0}}, "/ssd/0/deepgrid-0123456789abcdef.part.0", {"/ssd/0"}},
      {blocks[1], {{2, 0, 0}, {0, 0, 0}}, "/ssd/1/deepgrid-0123456789abcdef.part.1", {"/ssd/1"}}};
  m.history.push_back({"2026-11-22T20:34:04Z", "create", "{\"ranks\":2}"});
  return m;
}

TEST(DistributedManifest, RoundTrips) {
  const DistributedManifest m = two_parts();
  auto back = DistributedManifest::from_json(m.to_json());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), m.to_json());
  EXPECT_EQ(back->ranks(), 2);
  EXPECT_EQ(back->procs, (ProcessGrid{{2, 1, 1}}));
  EXPECT_EQ(back->parts[1].halo, (HaloExtent{{2, 0, 0}, {0, 0, 0}}));
  EXPECT_EQ(back->parts[1].shape(), (Shape{6, 6, 10}));
  EXPECT_EQ(back->parts[0].stores, std::vector<std::string>{"/ssd/0"});
}

// A grid of several fields records them and its scheme (version 6); one of one field keeps
// version 5, which older deepgrids read.
TEST(DistributedManifest, FieldsAndSchemeRoundTrip) {
  DistributedManifest m = two_parts();
  EXPECT_NE(m.to_json().find("\"version\": 5"), std::string::npos);
  m.fields = {"u", "u@1", "m"};
  m.scheme = R"({"name":"wave2"})";
  const std::string text = m.to_json();
  EXPECT_NE(text.find("\"version\": 6"), std::string::npos);
  auto back = DistributedManifest::from_json(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->fields, m.fields);
  EXPECT_EQ(back->scheme, m.scheme);
  EXPECT_EQ(back->components(), 3);
  const Manifest whole = back->as_grid();
  EXPECT_EQ(whole.component_index("m"), 2);
  EXPECT_EQ(whole.shape, m.shape);
  EXPECT_EQ(whole.step, m.step);
}

// A part's share of the probes: a source at every point the part holds that stands for it
// (periodic copies in its halos included), receivers in its block only, in part coordinates.
TEST(DistributedProbes, PartsApplySourcesInTheirHalosAndRecordTheirOwnReceivers) {
  const Shape shape{8, 6, 10};
  PartInfo part;  // block x in [4, 8), halos of 3 each side: holds global x = 1 .. 10
  part.block = {{Span{4, 8}, Span{0, 6}, Span{0, 10}}};
  part.halo = {{3, 0, 0}, {3, 0, 0}};
  SourceSpec spec;
  ResolvedProbes all;
  all.sources = {{0, 0, 2, 3}, {0, 2, 1, 1}, {1, 5, 0, 9}};
  all.source_specs = {&spec, &spec, &spec};
  all.receivers = {{0, 3, 0, 0}, {0, 4, 5, 9}, {0, 7, 1, 2}, {0, 0, 1, 2}};
  std::vector<int64_t> index;
  const ResolvedProbes periodic = part_probes(all, part, shape, true, &index);
  // x = 0 is held as x = 8 (local 7); x = 2 as local 1 and as x = 10 (local 9); x = 5: local 4.
  ASSERT_EQ(periodic.sources.size(), 4u);
  EXPECT_EQ(periodic.sources[0].x, 7);
  EXPECT_EQ(periodic.sources[1].x, 1);
  EXPECT_EQ(periodic.sources[2].x, 9);
  EXPECT_EQ(periodic.sources[3].x, 4);
  EXPECT_EQ(periodic.sources[3].component, 1);
  EXPECT_EQ(periodic.sources[3].z, 9);
  EXPECT_EQ(index, (std::vector<int64_t>{1, 2}));
  ASSERT_EQ(periodic.receivers.size(), 2u);
  EXPECT_EQ(periodic.receivers[0].x, 3);  // global 4
  EXPECT_EQ(periodic.receivers[1].x, 6);  // global 7
  part.halo = {{3, 0, 0}, {0, 0, 0}};     // not periodic: clipped at the grid's end
  const ResolvedProbes open = part_probes(all, part, shape, false, &index);
  ASSERT_EQ(open.sources.size(), 2u);  // x = 2 (local 1) and x = 5 (local 4)
  EXPECT_EQ(open.sources[0].x, 1);
  EXPECT_EQ(open.sources[1].x, 4);
}

TEST(DistributedManifest, InconsistentManifestsAreRefused) {
  auto damaged = [](auto change) {
    DistributedManifest m = two_parts();
    change(m);
    return DistributedManifest::from_json(m.to_json()).status();
  };
  EXPECT_EQ(damaged([](auto& m) { m.parts[1].block[kAxisX].lo = 3; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts[1].block[kAxisZ].hi = 9; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts[0].halo.below[1] = -1; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.procs = {{1, 1, 2}}; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.procs = {{3, 1, 1}}; }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.parts.clear(); }).code(), ErrorCode::kCorrupt);
  EXPECT_EQ(damaged([](auto& m) { m.version = 99; }).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(DistributedManifest::from_json("{\"format\": \"other\"}").status().code(),
            ErrorCode::kCorrupt);
  const Status serial = DistributedManifest::from_json("{\"format\": \"deepgrid-grid\"}").status();
  EXPECT_EQ(serial.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(serial.message().find("without mpirun"), std::string::npos) << serial.message();
  EXPECT_EQ(DistributedManifest::from_json("not json").status().code(), ErrorCode::kCorrupt);
}

// A part is where deepgrid puts it, in its first store or beside the manifest: a crafted
// manifest cannot lead a run, a re-layout or a removal to a directory outside the grid.
TEST(DistributedManifest, PartsOutsideTheirRootAreRefused) {
  auto refused = [](auto change) {
    DistributedManifest m = two_parts();
    change(m);
    const Status st = DistributedManifest::from_json(m.to_json()).status();
    return st.code() == ErrorCode::kCorrupt;
  };
  EXPECT_TRUE(refused([](auto& m) { m.parts[0].dir = "/home/someone"; }));
  EXPECT_TRUE(
      refused([](auto& m) { m.parts[0].dir = "/ssd/0/../deepgrid-0123456789abcdef.part.0"; }));
  EXPECT_TRUE(refused([](auto& m) { m.parts[1].dir = "/ssd/1/deepgrid-0123456789abcdef.part.0"; }));
  EXPECT_TRUE(refused([](auto& m) { m.parts[0].stores = {"ssd/0"}; }));
  EXPECT_TRUE(refused([](auto& m) { m.id = "../../x"; }));
  EXPECT_TRUE(refused([](auto& m) {
    m.parts[0].stores.clear();
    m.parts[0].dir = "/elsewhere/victim";
  }));
  // Without stores, a part is found beside the manifest whatever directory it was made in
  // (a grid directory moved as a whole still opens); a store's path is made normal.
  DistributedManifest m = two_parts();
  m.parts[0].stores.clear();
  m.parts[0].dir = "/old/place/deepgrid-0123456789abcdef.part.0";
  m.parts[1].stores = {"/ssd/x/../1/"};
  m.parts[1].dir = "/ssd/1/deepgrid-0123456789abcdef.part.1";
  auto placed = distributed_manifest_in(m.to_json(), "/new/place");
  ASSERT_TRUE(placed.ok()) << placed.status().message();
  EXPECT_EQ(placed->parts[0].dir, "/new/place/deepgrid-0123456789abcdef.part.0");
  EXPECT_EQ(placed->parts[1].stores, std::vector<std::string>{"/ssd/1"});
}

// A version 4 manifest (z-slabs, written before process grids) still opens, as px = py = 1.
TEST(DistributedManifest, ZSlabManifestsOfVersion4StillOpen) {
  const std::string v4 =
      R"({"format": "deepgrid-distributed", "version": 4, "id": "0123456789abcdef",
    "shape": {"nx": 8, "ny": 6, "nz": 10}, "dtype": "f32", "byte_order": "little", "step": 3,
    "decomposition": {"axis": "z", "ranks": 2, "parts": [
      {"rank": 0, "z0": 0, "z1": 5, "halo_below": 0, "halo_above": 2, "dir": "/a/deepgrid-0123456789abcdef.part.0", "stores": []},
      {"rank": 1, "z0": 5, "z1": 10, "halo_below": 2, "halo_above": 0, "dir": "/a/deepgrid-0123456789abcdef.part.1", "stores": []}]},
    "history": []})";
  auto m = DistributedManifest::from_json(v4);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->procs, (ProcessGrid{{1, 1, 2}}));
  EXPECT_EQ(m->parts[1].block, (Block{{Span{0, 8}, Span{0, 6}, Span{5, 10}}}));
  EXPECT_EQ(m->parts[1].halo, (HaloExtent{{0, 0, 2}, {0, 0, 0}}));
  EXPECT_EQ(m->parts[0].shape(), (Shape{8, 6, 7}));
  EXPECT_EQ(m->step, 3);
  // Written again, it is a version 5 manifest that reads back the same.
  const std::string again = m->to_json();
  EXPECT_NE(again.find("\"version\": 5"), std::string::npos) << again;
  auto back = DistributedManifest::from_json(again);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->parts[1].block, m->parts[1].block);
}

}  // namespace
}  // namespace deepgrid
