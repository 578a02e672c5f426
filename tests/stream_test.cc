// Every engine against the scalar reference, bitwise, through real files (EngineGolden, one
// suite with the method as its parameter: incore, stream, mmap, tiled, the device's
// placements): presets, both dtypes, every boundary, odd shapes, bt from 1 to past the step
// count, step counts that bt does not divide, forced tiles (tiled: forced blocks), one and three
// stripes, both I/O backends. The stream engine's own cases are stream_sweep_cases.cc (stages,
// chains, needed boxes, blocks, stopping, resuming), stream_band_cases.cc (bands of rows) and
// stream_fault_cases.cc (I/O faults); its plan and cost model are stream_plan_test.cc.
#include <gtest/gtest.h>

#include <string>

#include "engines/device_engine.h"
#include "stream_golden.h"

namespace deepgrid {
namespace {

using testing::kCoupledScheme;
using testing::kFusedFormScheme;
using testing::kKernelScheme;
using testing::kLeadingCoefficientScheme;
using testing::kThreeLevelScheme;

// The shared suite: each case through the method under test.
class EngineGolden : public StreamGolden, public ::testing::WithParamInterface<EngineUnderTest> {
 protected:
  void SetUp() override {
    if (method() == Method::kDevice && !device_available()) {
      GTEST_SKIP() << "no OpenCL device here (a build without OpenCL, or no driver: "
                      "scripts/setup.sh installs PoCL's CPU device)";
    }
  }
  Method method() const { return GetParam().method; }
  bool in_bands() const { return GetParam().band_rows > 0; }
  void expect_all_boundaries(Case c) {
    c.method = method();
    c.band_rows = GetParam().band_rows;
    c.threads = GetParam().threads;
    if (GetParam().overlapped) c.device_overlap = DeviceOverlap::kOn;
    if (GetParam().placement != DevicePlacement::kDeviceResident) {
      c.device_mem = host_resident_budget(c, testing_scheme(c.stencil));
    }
    if (GetParam().placement == DevicePlacement::kThreeTiers) {
      c.mem = three_tier_host_budget(c, testing_scheme(c.stencil));
    }
    StreamGolden::expect_all_boundaries(c);
  }
};

TEST_P(EngineGolden, PresetsDtypesAndBoundaries) {
  for (const char* st : {"7pt", "13pt", "19pt", "27pt", "5pt", "9pt"}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      expect_all_boundaries({st, {23, 17, 13}, dt, 5, 0, 1, io::Backend::kUring});
    }
  }
  expect_all_boundaries({"25pt", {19, 11, 12}, DType::kF32, 3, 0, 1, io::Backend::kUring});
}

// Subnormals flushed to zero: every engine gives the bits of the reference computed in that
// mode (which differ from IEEE's here), at every depth and boundary.
TEST_P(EngineGolden, SubnormalsFlushedWhenAsked) {
  for (const char* st : {"7pt", "27pt"}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      Case c{st, {23, 17, 13}, dt, 5, 0, 1, io::Backend::kUring};
      c.flush_subnormals = true;
      expect_all_boundaries(c);
    }
  }
  for (int bt : {1, 3, 9}) {
    Case c{"7pt", {21, 9, 11}, DType::kF32, 7, bt, 1, io::Backend::kUring};
    c.flush_subnormals = true;
    expect_all_boundaries(c);
  }
}

TEST_P(EngineGolden, EveryDepthIncludingDeeperThanTheRun) {
  for (int bt : {1, 2, 3, 4, 7, 9}) {
    expect_all_boundaries({"7pt", {21, 9, 11}, DType::kF32, 7, bt, 1, io::Backend::kUring});
  }
  expect_all_boundaries({"13pt", {9, 8, 5}, DType::kF64, 5, 2, 1, io::Backend::kUring});
}

// Small forced tiles: interior tiles, edge tiles and tiles narrower than their halo (stream:
// each carrying its rings across blocks of z-steps; tiled: blocks of NYxNZ, so blocks split
// along y and z with interior faces, single rows and planes, and halos wider than blocks).
TEST_P(EngineGolden, ForcedTiles) {
  for (int bt : {1, 3, 5}) {
    for (auto [tx, ty] : {std::pair{4, 3}, {7, 5}, {1, 1}, {23, 2}}) {
      Case c{"7pt", {23, 17, 13}, DType::kF32, 6, bt, 1, io::Backend::kUring};
      c.tile_x = tx;
      c.tile_y = ty;
      expect_all_boundaries(c);
    }
  }
  Case c{"27pt", {19, 14, 9}, DType::kF64, 5, 2, 1, io::Backend::kThreads};
  c.tile_x = 5;
  c.tile_y = 6;
  expect_all_boundaries(c);
}

TEST_P(EngineGolden, OddShapes) {
  for (Shape s : {Shape{1, 1, 1}, Shape{64, 48, 1}, Shape{2, 3, 40}, Shape{1, 7, 3}}) {
    expect_all_boundaries({"7pt", s, DType::kF32, 4, 3, 1, io::Backend::kUring});
  }
}

TEST_P(EngineGolden, StripesAndBothBackends) {
  for (io::Backend be : {io::Backend::kUring, io::Backend::kThreads}) {
    for (int stripes : {1, 3}) {
      expect_all_boundaries({"27pt", {40, 24, 30}, DType::kF32, 6, 4, stripes, be});
    }
  }
}

TEST_P(EngineGolden, SchemesOfSeveralFields) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only (refusal tested in "
                    "SchemeTest.TheTiledMethodRefusesSchemes)";
  }
  for (const char* sc : {"wave2", "wave4", "wave8", "heat-var", kCoupledScheme, kFusedFormScheme,
                         kThreeLevelScheme, kLeadingCoefficientScheme}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      expect_all_boundaries({sc, {21, 13, 11}, dt, 5, 0, 1, io::Backend::kUring});
    }
  }
  for (int bt : {1, 2, 3, 7}) {
    Case c{"wave4", {17, 12, 14}, DType::kF32, 7, bt, 1, io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    expect_all_boundaries(c);
    c.stencil = kCoupledScheme;
    c.stripes = 3;
    expect_all_boundaries(c);
    c.stencil = kThreeLevelScheme;
    expect_all_boundaries(c);
    c.stencil = kLeadingCoefficientScheme;
    expect_all_boundaries(c);
  }
}

// Grids of schemes with coefficient fields keep them in coefficient files (store.h): every
// engine reads them from there, computes the same bits, and never writes them. Components of
// whole 4096-byte blocks (version 5's records) and not (version 6's: padded records, the
// coefficients moved after the ring's part as they are read).
TEST_P(EngineGolden, SchemesWithCoefficientFiles) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  for (const char* sc : {"wave4", "heat-var", kCoupledScheme, kFusedFormScheme}) {
    for (DType dt : {DType::kF32, DType::kF64}) {
      for (const Shape& s : {Shape{32, dt == DType::kF32 ? 32 : 16, 12}, Shape{21, 13, 9}}) {
        Case c{sc, s, dt, 5, 0, 1, io::Backend::kUring};
        c.coef_files = true;
        expect_all_boundaries(c);
      }
    }
  }
  for (int bt : {1, 3}) {
    Case c{"wave8", {32, 64, 14}, DType::kF32, 7, bt, 3, io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    c.coef_files = true;
    expect_all_boundaries(c);
  }
}

// A user's kernel (test_schemes.h) against the same C function called point by point: any
// bt, forced tiles, both dtypes, and grids that periodic frames wrap around several times.

TEST_P(EngineGolden, UsersKernels) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  if (method() == Method::kDevice) {
    GTEST_SKIP() << "users' kernels run on the CPU only (refusal tested in "
                    "DeviceTest.AUsersKernelIsRefusedWithTheFix)";
  }
  for (DType dt : {DType::kF32, DType::kF64}) {
    expect_all_boundaries({kKernelScheme, {21, 13, 11}, dt, 5, 0, 1, io::Backend::kUring});
  }
  for (int bt : {1, 2, 3, 7}) {
    Case c{kKernelScheme,        {17, 12, 14}, bt % 2 ? DType::kF64 : DType::kF32, 7, bt, 1,
           io::Backend::kThreads};
    c.tile_x = 5;
    c.tile_y = 4;
    expect_all_boundaries(c);
  }
  for (Shape s : {Shape{2, 1, 5}, Shape{3, 2, 2}}) {
    expect_all_boundaries({kKernelScheme, s, DType::kF32, 4, 3, 1, io::Backend::kUring});
  }
}

// A shot and receivers inside temporal blocking: sources in planes of every level (one in a
// corner, so periodic copies and halos of several tiles hold it), receivers on tile edges.
TEST_P(EngineGolden, SourcesAndReceivers) {
  if (method() == Method::kTiled) {
    GTEST_SKIP() << "the tiled comparison method runs plain stencils only";
  }
  if (in_bands()) {
    // Sources in the halo rows of the bands beside theirs, receivers on the bands' first and
    // last rows (bands of 4 rows: rows 3-4, 7-8 meet), at every depth; a grid of several
    // fields with a receiver on another component.
    Probes probes = testing::shot_and_corner();
    for (int64_t y : {3, 4, 6, 7, 8, 11}) probes.receivers.push_back({"u", 5, y, 7});
    probes.sources.back().y = 4;
    Probes wave_probes = probes;
    wave_probes.receivers.push_back({"u@1", 3, 4, 13});
    for (int bt : {1, 3, 0}) {
      for (const char* st : {"7pt", "13pt", "wave4"}) {
        Case c{st, {17, 12, 14},       bt == 3 ? DType::kF32 : DType::kF64, 7, bt,
               1,  io::Backend::kUring};
        c.tile_x = 5;
        c.tile_y = 3;
        c.probes = st == std::string("wave4") ? &wave_probes : &probes;
        expect_all_boundaries(c);
      }
    }
    return;
  }
  Probes probes = testing::shot_and_corner();
  for (int64_t x : {0, 4, 5, 16}) probes.receivers.push_back({"u", x, 6, 7});
  probes.receivers.push_back({"u@1", 3, 3, 13});
  for (int bt : {1, 3, 0}) {
    Case c{"wave4", {17, 12, 14}, DType::kF64, 7, bt, 1, io::Backend::kUring};
    c.tile_x = 5;
    c.tile_y = 4;
    c.probes = &probes;
    expect_all_boundaries(c);
  }
  // Lean wavefronts (wavefront.h) read u@1 and m where their values already lie: a receiver
  // on m reads it there, and a source on u@1 (a ring level must then hold u@1) keeps the rings
  // whole, and at bt 1 keeps u@1 from taking turns with u (the in-core engine).
  Probes older = testing::shot_and_corner();
  older.receivers = {{"m", 9, 6, 7}, {"u@1", 8, 6, 7}};
  Probes on_u1 = probes;
  on_u1.sources.back().field = "u@1";
  for (const Probes* p : {&older, &on_u1}) {
    for (int bt : {4, 1}) {
      Case c{"wave2", {17, 12, 14}, DType::kF32, 8, bt, 1, io::Backend::kUring};
      c.tile_x = 6;
      c.tile_y = 5;
      c.probes = p;
      expect_all_boundaries(c);
    }
  }
  Case c{"heat-var", {17, 12, 14}, DType::kF32, 9, 4, 1, io::Backend::kThreads};
  SourceSpec heat;
  heat.x = 2, heat.y = 2, heat.z = 2;
  heat.series = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  Probes heater;
  heater.sources.push_back(heat);
  heater.receivers.push_back({"u", 2, 3, 2});
  c.probes = &heater;
  c.cache_bt = 2;
  expect_all_boundaries(c);
}

INSTANTIATE_TEST_SUITE_P(
    Methods, EngineGolden,
    ::testing::Values(EngineUnderTest{Method::kInCore}, EngineUnderTest{Method::kStream},
                      EngineUnderTest{Method::kStream, DevicePlacement::kDeviceResident, false, 4,
                                      1},
                      EngineUnderTest{Method::kMmap}, EngineUnderTest{Method::kTiled},
                      EngineUnderTest{Method::kDevice},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kHostResident, true},
                      EngineUnderTest{Method::kDevice, DevicePlacement::kThreeTiers, true}),
    [](const auto& param_info) {
      std::string name(method_name(param_info.param.method));
      if (param_info.param.placement != DevicePlacement::kDeviceResident) {
        name += "_" + std::string(placement_name(param_info.param.placement));
      }
      if (param_info.param.overlapped) name += "_overlapped";
      if (param_info.param.band_rows > 0) name += "_bands";
      if (param_info.param.threads > 0)
        name += "_" + std::to_string(param_info.param.threads) + "_thread";
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

}  // namespace
}  // namespace deepgrid
