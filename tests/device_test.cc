// The device layer and the device method's plan: choosing a device, the device budget
// accounted before anything is allocated, refusals that say what to do, kernels' build errors,
// and the command line (devices, --device, --device-mem). Results against the reference are
// in stream_test (EngineGolden/device: every preset, boundary, dtype, scheme and probes).
#include "device/device.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "engines/device_engine.h"
#include "engines/device_wavefront.h"
#include "engines/subnormals.h"
#include "plan/device_rates.h"
#include "reference.h"
#include "test_schemes.h"

namespace deepgrid {
namespace {

using testing::run_cli;

// The device tests need one (PoCL's CPU device in CI); without, they say why they skip.
class DeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto all = device::list_devices();
    ASSERT_TRUE(all.ok()) << all.status().message();
    if (all->empty()) {
      GTEST_SKIP() << "no OpenCL device here (a build without OpenCL, or no driver: "
                      "scripts/setup.sh installs PoCL's CPU device)";
    }
    first_ = all->front();
  }
  device::DeviceInfo first_;
};

void expect_one_line_naming(const Status& s, const std::vector<std::string>& words) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
  for (const std::string& w : words)
    EXPECT_NE(s.message().find(w), std::string::npos) << s.message();
}

// The wavefront's rings, simulated slot by slot over whole passes in run_wavefront's order:
// every plane a chunk's level reads (its window and rz planes each side, within the pass) is
// still in its slot, and so is every plane a copy down takes. Each copy counts as landing as
// early and as late as its events allow: a chunk's copy up right after the level-1 step it
// waits for (overlapped: before the chunk before it starts), a copy down just before the
// last-level step that waits for it.
TEST(DeviceWavefrontTest, EveryStepAndCopyDownFindsItsPlanesInTheirSlots) {
  for (const bool periodic : {false, true}) {
    for (const bool overlap : {false, true}) {
      for (const int64_t rz : {1, 2, 4}) {
        for (const int levels : {1, 2, 3, 6}) {
          for (const int64_t chunk : {1, 2, 3, 5}) {
            const int64_t nz = 23, lag = overlap ? 2 : 1;
            const internal::DeviceWavefront w(0, nz, nz, periodic, levels, rz, chunk, overlap);
            SCOPED_TRACE(::testing::Message()
                         << "periodic " << periodic << " overlap " << overlap << " rz " << rz
                         << " levels " << levels << " chunk " << chunk);
            std::vector<std::vector<int64_t>> held;  // per ring, the plane in each slot
            for (int k = 0; k <= levels; ++k) {
              held.emplace_back(static_cast<size_t>(w.ring(k)), -1);
            }
            auto put = [&](int k, int64_t j) {  // chunk j's planes of level k into their slots
              const auto [lo, hi] = w.window(k, j);
              for (int64_t u = lo; u < hi; ++u) held[k][static_cast<size_t>(u % w.ring(k))] = u;
            };
            auto holds = [&](int k, int64_t lo, int64_t hi) {
              for (int64_t u = std::max<int64_t>(lo, 0); u < std::min(hi, w.planes()); ++u) {
                if (held[k][static_cast<size_t>(u % w.ring(k))] != u) return false;
              }
              return true;
            };
            auto down = [&](int64_t j) {
              const auto [lo, hi] = w.output(j);
              EXPECT_TRUE(holds(levels, lo, hi)) << "chunk " << j << " down";
            };
            put(0, 0);
            for (int64_t j = 0; j < w.chunks(); ++j) {
              if (overlap && j + 1 < w.chunks()) put(0, j + 1);
              for (int k = 1; k <= levels; ++k) {
                if (k == levels && j >= lag) down(j - lag);
                const auto [lo, hi] = w.window(k, j);
                if (lo < hi) {
                  EXPECT_TRUE(holds(k - 1, lo - rz, hi + rz)) << "chunk " << j << " level " << k;
                }
                put(k, j);
                if (k == 1 && !overlap && j + 1 < w.chunks()) put(0, j + 1);
              }
            }
            for (int64_t j = std::max<int64_t>(0, w.chunks() - lag); j < w.chunks(); ++j) down(j);
          }
        }
      }
    }
  }
}

TEST_F(DeviceTest, DevicesAreChosenByNumberOrKind) {
  EXPECT_EQ(device::choose_device("0")->name, first_.name);
  EXPECT_TRUE(device::choose_device("").ok());
  const auto cpu = device::choose_device("cpu");
  if (cpu.ok()) {
    EXPECT_FALSE(cpu->gpu);
  }
  expect_one_line_naming(device::choose_device("99").status(),
                         {"no device 99", "deepgrid devices"});
  expect_one_line_naming(device::choose_device("fast").status(), {"'fast'", "gpu or cpu"});
}

TEST_F(DeviceTest, AllocationsAreCountedAgainstTheBudgetAndGivenBack) {
  device::Device d = device::Device::open(first_, 1 << 20).value();
  {
    device::Buffer a = d.allocate(768 << 10, "first").value();
    EXPECT_EQ(d.allocated(), 768 << 10);
    const auto b = d.allocate(512 << 10, "the second buffer");
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), ErrorCode::kResource);
    expect_one_line_naming(b.status(), {"the second buffer", "--device-mem"});
  }
  EXPECT_EQ(d.allocated(), 0);
  EXPECT_EQ(d.peak_allocated(), 768 << 10);
  EXPECT_TRUE(d.allocate(1 << 20, "all of it").ok());
}

TEST_F(DeviceTest, ValuesGoThereAndBackAndKernelsRunInOrder) {
  device::Device d = device::Device::open(first_, 1 << 20).value();
  const device::Buffer b = d.allocate(8 * 4, "values").value();
  const float in[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(d.write(b, 0, in, sizeof in).ok());
  const std::string src =
      "__kernel void twice(__global float* u, const int k) { u[get_global_id(0)] *= k; }";
  device::Kernel k = d.kernel(src, "", "twice").value();
  ASSERT_TRUE(k.set(0, b).ok());
  ASSERT_TRUE(k.set(1, int32_t{3}).ok());
  device::Range r;
  r.offset = {2, 0, 0};
  r.size = {4, 1, 1};
  ASSERT_TRUE(d.launch(k, r).ok());
  ASSERT_TRUE(d.launch(k, r).ok());
  float out[8] = {};
  ASSERT_TRUE(d.read(b, 0, out, sizeof out).ok());
  const float want[8] = {1, 2, 27, 36, 45, 54, 7, 8};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

// Host memory for the copies: pinned where the runtime maps a host buffer (PoCL does),
// outside the device's budget, and values go up from it and come back into it.
TEST_F(DeviceTest, HostMemoryIsPinnedWhereTheRuntimeCanAndCopiesGoThroughIt) {
  device::Device d = device::Device::open(first_, 1 << 10).value();
  const int64_t n = 1 << 16;  // floats: more than the device budget holds
  const auto from = d.host_memory(4 * n), to = d.host_memory(4 * n);
  ASSERT_TRUE(from.ok() && to.ok()) << from.status().message();
  EXPECT_TRUE(from->pinned());
  EXPECT_EQ(from->bytes(), 4 * n);
  EXPECT_EQ(d.allocated(), 0);
  auto* values = reinterpret_cast<float*>(from->data());
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(i) * 0.5f;
  const device::Buffer b = d.allocate(1 << 10, "a test's buffer").value();
  for (int64_t at = 0; at < 4 * n; at += 1 << 10) {  // through a buffer of 256 floats
    const auto up = d.write_async(b, 0, from->data() + at, 1 << 10);
    ASSERT_TRUE(up.ok()) << up.status().message();
    const auto down = d.read_async(b, 0, to->data() + at, 1 << 10, {*up});
    ASSERT_TRUE(down.ok()) << down.status().message();
    ASSERT_TRUE(d.wait(*down).ok());
  }
  EXPECT_EQ(std::memcmp(from->data(), to->data(), static_cast<size_t>(4 * n)), 0);
}

TEST_F(DeviceTest, AKernelThatDoesNotBuildGivesItsBuildLog) {
  device::Device d = device::Device::open(first_, 1 << 20).value();
  const auto k =
      d.kernel("__kernel void broken(__global float* u) { u[0] = nothing; }", "", "broken");
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("clBuildProgram"), std::string::npos);
  EXPECT_NE(k.status().message().find("nothing"), std::string::npos) << k.status().message();
}

// x86 flushes a result (FTZ) when it is below the smallest normal number once rounded to the
// dtype's precision with an unbounded exponent; rounded into the subnormal range instead, a
// result just below it becomes the smallest normal itself. MIN * (1 - 0.75 * 2^-p) (p the
// precision) is such a result: x86 flushes it, IEEE's subnormal rounding gives MIN. The
// device's emulation must tell them apart.
template <typename T>
void expect_flushed_like_x86_at_the_smallest_normal() {
  constexpr T kMin = std::numeric_limits<T>::min();
  constexpr int kPrecision = std::numeric_limits<T>::digits;
  const double below = -1.5 * std::ldexp(1.0, -kPrecision - 1);  // -0.75 * 2^-p
  const Stencil st = Stencil::from_points("corner", {{0, 0, 0, 1}, {1, 0, 0, below}}).value();
  const Shape shape{2, 1, 1};
  const DType dtype = sizeof(T) == 4 ? DType::kF32 : DType::kF64;
  const Boundary neumann{Boundary::Kind::kNeumann, 0};
  const std::vector<T> u = {kMin, kMin};
  std::vector<T> want;
  {
    const internal::SubnormalsFlushed flushed(true);
    want = testing::reference_run(u, shape, Scheme(st), neumann, 1);
  }
  ASSERT_EQ(want[0], T{0}) << "x86 flushes the corner case";
  ASSERT_EQ(testing::reference_run(u, shape, Scheme(st), neumann, 1)[0], kMin) << "IEEE does not";
  DeviceOptions o;
  o.device = "0";
  o.flush_subnormals = true;
  const DevicePlan plan = plan_device(shape, st, dtype, {}, 1, o).value();
  DeviceEngine e = DeviceEngine::create(shape, st, dtype, plan).value();
  ASSERT_TRUE(e.load_plane(0, reinterpret_cast<const std::byte*>(u.data())).ok());
  ASSERT_EQ(e.advance(neumann, 1, {}, {}, {}).value(), 1);
  std::vector<T> got(2);
  ASSERT_TRUE(e.store_plane(0, reinterpret_cast<std::byte*>(got.data())).ok());
  EXPECT_EQ(testing::first_bitwise_difference(want, got), -1) << got[0] << " " << got[1];
}

TEST_F(DeviceTest, SubnormalsAreFlushedAsX86FlushesThemAtTheSmallestNormal) {
  if (!internal::can_flush_subnormals()) GTEST_SKIP() << "this build cannot flush subnormals";
  expect_flushed_like_x86_at_the_smallest_normal<float>();
  if (first_.fp64) expect_flushed_like_x86_at_the_smallest_normal<double>();
}

TEST_F(DeviceTest, AUsersKernelIsRefusedWithTheFix) {
  const Scheme kernel = Scheme::from_json(testing::kKernelScheme).value();
  const auto plan = plan_device({8, 8, 8}, kernel, DType::kF32, {}, 3, {});
  expect_one_line_naming(plan.status(), {"CPU only", "--method incore or stream"});
}

// The placement follows the budgets: two copies of the grid on the device (device-resident)
// when they fit; else a wavefront through it, its rings within the budget, computing every
// plane once, from host memory (host-resident) or, when --mem does not hold two copies, from
// disk (three tiers); below the rings of one step and one-plane chunks, a refusal with that
// minimum.
TEST_F(DeviceTest, ThePlacementFollowsTheBudgetAndTooSmallOneIsRefusedWithTheMinimum) {
  const Shape s{40, 30, 20};
  const Scheme wave = Scheme::preset("wave4").value();
  DeviceOptions o;
  o.device = "0";
  const int64_t plane = s.nx * s.ny * 3 * 8;
  const int64_t two_copies = 2 * s.nz * plane;
  o.device_mem = two_copies;
  const auto resident = plan_device(s, wave, DType::kF64, {}, 5, o);
  ASSERT_TRUE(resident.ok()) << resident.status().message();
  EXPECT_EQ(resident->placement, DevicePlacement::kDeviceResident);
  EXPECT_EQ(resident->device_bytes, two_copies);
  EXPECT_EQ(resident->host_bytes, 0);

  for (int bt : {0, 1, 3}) {
    o.bt = bt;
    o.device_mem = two_copies - 1;
    const auto slabs = plan_device(s, wave, DType::kF64, {}, 5, o);
    ASSERT_TRUE(slabs.ok()) << slabs.status().message();
    EXPECT_EQ(slabs->placement, DevicePlacement::kHostResident);
    EXPECT_LE(slabs->device_bytes, o.device_mem);
    EXPECT_EQ(slabs->host_copies, 1);  // (passed through in place)
    EXPECT_EQ(slabs->host_bytes, two_copies / 2);
    EXPECT_GE(slabs->chunks, 2);
    EXPECT_GE(slabs->chunks * slabs->chunk_planes, s.nz + slabs->pass_steps * 2);
    EXPECT_GE(slabs->pass_steps, 1);
    EXPECT_LE(slabs->pass_steps, bt > 0 ? bt : 5);
    EXPECT_EQ(slabs->redundancy, 1);  // (not periodic)
  }
  // Periodic z, the grid twice in host memory: a pass reads its first planes again at its end.
  o.bt = 0;
  o.device_mem = two_copies / 4;
  o.boundary = Boundary::Kind::kPeriodic;
  const auto periodic = plan_device(s, wave, DType::kF64, {}, 5, o);
  ASSERT_TRUE(periodic.ok()) << periodic.status().message();
  EXPECT_EQ(periodic->host_copies, 2);
  EXPECT_EQ(periodic->host_bytes, two_copies);
  o.boundary = Boundary::Kind::kDirichlet;
  // --mem below the grid: it stays on disk (three tiers) and host memory holds I/O buffers
  // and, periodic, the planes the sweep reads again at its other end: the depth cut to what
  // --mem holds of them; below one step's, refused with that size.
  o.io_plane_bytes = 32 << 10;
  o.host_mem = two_copies / 2 - 1;
  const auto three = plan_device(s, wave, DType::kF64, {}, 5, o);
  ASSERT_TRUE(three.ok()) << three.status().message();
  EXPECT_EQ(three->placement, DevicePlacement::kThreeTiers);
  EXPECT_LE(three->host_bytes + kMinThreeTierIoBuffers * o.io_plane_bytes, o.host_mem);
  o.boundary = Boundary::Kind::kPeriodic;
  o.host_mem = 2 * 2 * plane + kMinThreeTierIoBuffers * o.io_plane_bytes;  // one step, rz 2
  const auto shallow = plan_device(s, wave, DType::kF64, {}, 5, o);
  ASSERT_TRUE(shallow.ok()) << shallow.status().message();
  EXPECT_EQ(shallow->pass_steps, 1);
  o.host_mem -= 1;
  expect_one_line_naming(plan_device(s, wave, DType::kF64, {}, 5, o).status(),
                         {"--mem", format_size(o.host_mem + 1)});
  o.boundary = Boundary::Kind::kDirichlet;
  const auto not_periodic = plan_device(s, wave, DType::kF64, {}, 5, o);  // keeps no planes
  ASSERT_TRUE(not_periodic.ok()) << not_periodic.status().message();
  EXPECT_EQ(not_periodic->host_bytes, 0);
  o.host_mem = 0;

  // Rings of one step: a plane and two below it for level 0 and a plane for level 1.
  const int64_t minimum = (1 + 2 * 2 + 1) * plane;
  o.device_mem = minimum;
  EXPECT_TRUE(plan_device(s, wave, DType::kF64, {}, 5, o).ok());
  o.device_mem = minimum - 1;
  expect_one_line_naming(plan_device(s, wave, DType::kF64, {}, 5, o).status(),
                         {"--device-mem", format_size(minimum)});
  o.device_mem = first_.memory_bytes + 1;
  expect_one_line_naming(plan_device(s, wave, DType::kF64, {}, 5, o).status(),
                         {"--device-mem", "more than"});
}

TEST_F(DeviceTest, TheCommandLineListsDevicesPlacesGridsAndRefusesASmallBudget) {
  testing::TempDir tmp;
  const auto listed = run_cli({"devices"});
  ASSERT_EQ(listed.exit_code, 0) << listed;
  EXPECT_NE(listed.out.find("0: " + first_.name), std::string::npos) << listed;
  const auto json = nlohmann::json::parse(run_cli({"devices", "--json"}).out);
  EXPECT_TRUE(json["opencl"].get<bool>());
  EXPECT_EQ(json["devices"][0]["name"], first_.name);

  const std::string g = (tmp.path() / "g").string();
  ASSERT_EQ(run_cli({"create", g, "--shape", "32x32x32", "--init", "random:1"}).exit_code, 0);
  const std::string before = run_cli({"checksum", g}).out;
  const auto small = run_cli(
      {"run", g, "--stencil", "7pt", "--steps", "3", "--device", "0", "--device-mem", "12KiB"});
  EXPECT_EQ(small.exit_code, 2) << small;
  EXPECT_NE(small.err.find("16.00 KiB"), std::string::npos) << small;  // rings of 3 + 1 planes
  EXPECT_EQ(run_cli({"checksum", g}).out, before) << "a refused run changes nothing";

  // Below the grid's two copies (256 KiB), the grid goes through the device as a wavefront,
  // with the bits of the in-core method.
  const std::string twin = (tmp.path() / "twin").string();
  ASSERT_EQ(run_cli({"create", twin, "--shape", "32x32x32", "--init", "random:1"}).exit_code, 0);
  const std::vector<std::string> slabs = {
      "--stencil", "7pt", "--steps", "9", "--device", "0", "--bt", "3", "--device-mem", "100KiB"};
  std::vector<std::string> plan_slabs = {"plan", g};
  plan_slabs.insert(plan_slabs.end(), slabs.begin(), slabs.end());
  const auto planned = run_cli(plan_slabs);
  EXPECT_NE(planned.out.find("host-resident"), std::string::npos) << planned;
  std::vector<std::string> run_slabs = {"run", g, "--json"};
  run_slabs.insert(run_slabs.end(), slabs.begin(), slabs.end());
  const auto streamed = run_cli(run_slabs);
  ASSERT_EQ(streamed.exit_code, 0) << streamed;
  EXPECT_EQ(nlohmann::json::parse(streamed.out)["device_placement"], "host-resident");
  ASSERT_EQ(
      run_cli({"run", twin, "--stencil", "7pt", "--steps", "9", "--method", "incore"}).exit_code,
      0);
  EXPECT_EQ(run_cli({"checksum", g}).out, run_cli({"checksum", twin}).out);

  // The same wavefront with copies beside the steps: the same bits.
  std::vector<std::string> overlapped = slabs;
  overlapped.insert(overlapped.end(), {"--device-overlap", "on"});
  std::vector<std::string> plan_overlapped = {"plan", g, "--json"};
  plan_overlapped.insert(plan_overlapped.end(), overlapped.begin(), overlapped.end());
  const auto three = run_cli(plan_overlapped);
  ASSERT_EQ(three.exit_code, 0) << three;
  EXPECT_EQ(nlohmann::json::parse(three.out)["overlap"], true) << three;
  std::vector<std::string> run_overlapped = {"run", g};
  run_overlapped.insert(run_overlapped.end(), overlapped.begin(), overlapped.end());
  ASSERT_EQ(run_cli(run_overlapped).exit_code, 0);
  ASSERT_EQ(
      run_cli({"run", twin, "--stencil", "7pt", "--steps", "9", "--method", "incore"}).exit_code,
      0);
  EXPECT_EQ(run_cli({"checksum", g}).out, run_cli({"checksum", twin}).out);
  const auto bad = run_cli({"plan", g, "--stencil", "7pt", "--steps", "3", "--device", "0",
                            "--device-overlap", "maybe"});
  EXPECT_EQ(bad.exit_code, 2) << bad;
  EXPECT_NE(bad.err.find("auto, on or off"), std::string::npos) << bad;

  const auto plan = run_cli({"plan", g, "--stencil", "7pt", "--steps", "3", "--device", "0"});
  ASSERT_EQ(plan.exit_code, 0) << plan;
  EXPECT_NE(plan.out.find("device-resident"), std::string::npos) << plan;
  const auto ran = run_cli({"run", g, "--stencil", "7pt", "--steps", "3", "--device", "0"});
  ASSERT_EQ(ran.exit_code, 0) << ran;
  ASSERT_EQ(
      run_cli({"run", twin, "--stencil", "7pt", "--steps", "3", "--method", "incore"}).exit_code,
      0);
  EXPECT_EQ(run_cli({"checksum", g}).out, run_cli({"checksum", twin}).out);
}

// A machine without any OpenCL platform (the ICD loader pointed at an empty directory of
// vendors): `devices` says so with the fix, and a run or plan on a device is refused with it
// (exit 2), the grid unchanged.
TEST(NoOpenCLPlatform, DevicesSaysSoAndDeviceRunsAreRefusedWithTheFix) {
  if (!nlohmann::json::parse(run_cli({"devices", "--json"}).out)["opencl"].get<bool>()) {
    GTEST_SKIP() << "a build without OpenCL: it loads no platforms to leave out";
  }
  testing::TempDir tmp;
  const std::string g = (tmp.path() / "g").string();
  ASSERT_EQ(run_cli({"create", g, "--shape", "16x16x8", "--init", "random:1"}).exit_code, 0);
  const std::string before = run_cli({"checksum", g}).out;
  std::filesystem::create_directory(tmp.path() / "no-vendors");
  ::setenv("OCL_ICD_VENDORS", (tmp.path() / "no-vendors").c_str(), 1);
  const auto listed = run_cli({"devices"});
  EXPECT_EQ(listed.exit_code, 0) << listed;
  EXPECT_NE(listed.out.find("no OpenCL device was found"), std::string::npos) << listed;
  EXPECT_NE(listed.out.find("clinfo -l"), std::string::npos) << listed;
  EXPECT_TRUE(nlohmann::json::parse(run_cli({"devices", "--json"}).out)["devices"].empty());
  for (const char* command : {"run", "plan"}) {
    const auto refused =
        run_cli({command, g, "--stencil", "7pt", "--steps", "2", "--device", "gpu"});
    EXPECT_EQ(refused.exit_code, 2) << refused;
    EXPECT_NE(refused.err.find("'deepgrid devices' lists what deepgrid sees"), std::string::npos)
        << refused;
  }
  ::unsetenv("OCL_ICD_VENDORS");
  EXPECT_EQ(run_cli({"checksum", g}).out, before) << "a refused run changes nothing";
}

// plan measures the device (a sample of the stencil, then cached) and predicts the kernels,
// the copies and the disk: a wavefront through the device copies more than a grid held on it,
// and computes as much.
TEST_F(DeviceTest, PlanPredictsTheDeviceTimeFromItsMeasuredRates) {
  testing::TempDir tmp;
  const std::string g = (tmp.path() / "g").string();
  ASSERT_EQ(run_cli({"create", g, "--shape", "32x32x64", "--init", "random:1"}).exit_code, 0);
  const std::vector<std::string> args = {"plan", g,   "--stencil", "7pt", "--steps", "8",
                                         "--bt", "2", "--device",  "0",   "--json"};
  const auto resident = run_cli(args);
  ASSERT_EQ(resident.exit_code, 0) << resident;
  const auto r = nlohmann::json::parse(resident.out);
  EXPECT_EQ(r["placement"], "device-resident");
  EXPECT_GT(r["machine"]["device_mlups"].get<double>(), 0) << r;
  EXPECT_GT(r["machine"]["device_copy_bytes_per_second"].get<double>(), 0) << r;
  EXPECT_GT(r["predicted_compute_seconds"].get<double>(), 0) << r;
  EXPECT_GT(r["predicted_copy_seconds"].get<double>(), 0) << r;
  const double kernels_and_copies =
      r["predicted_compute_seconds"].get<double>() + r["predicted_copy_seconds"].get<double>();
  EXPECT_GE(r["predicted_seconds"].get<double>(), kernels_and_copies * (1 - 1e-9));  // (order)

  std::vector<std::string> wavefront_args = args;
  wavefront_args.insert(wavefront_args.end(), {"--device-mem", "100KiB"});
  const auto wavefront = run_cli(wavefront_args);
  ASSERT_EQ(wavefront.exit_code, 0) << wavefront;
  const auto s = nlohmann::json::parse(wavefront.out);
  EXPECT_EQ(s["placement"], "host-resident");
  EXPECT_GT(s["predicted_copy_seconds"].get<double>(), r["predicted_copy_seconds"].get<double>())
      << s;
  // As many updates (the same sum in other passes: equal up to rounding), each plan at the
  // device rate it read: tests running beside this one may measure the device again and
  // rewrite the shared machine cache between the two plans.
  auto updates = [](const nlohmann::json& p) {
    return p["predicted_compute_seconds"].get<double>() *
           p["machine"]["device_mlups"].get<double>();
  };
  EXPECT_GE(updates(s), updates(r) * (1 - 1e-9)) << r << "\n" << s;
}

// Rates measured on a sample that the budget cut short are cached under the sample's size: the
// next plan under that budget takes them (a plan and the run after it then agree), a full
// budget measures its own, and once a full sample's rates are cached every budget takes those.
TEST_F(DeviceTest, RatesOfASampleCutShortAreCachedForThatSampleOnly) {
  testing::TempDir tmp;
  const char* const shared = std::getenv("DEEPGRID_CACHE_DIR");
  const std::string restore = shared != nullptr ? shared : "";
  ::setenv("DEEPGRID_CACHE_DIR", (tmp.path() / "cache").c_str(), 1);
  const Scheme st(Stencil::preset("7pt").value());
  // (A quarter of it, 4 MiB, is the sample: 16 planes of 256x256 on a CPU device, 4 of
  // 512x512 on a GPU, where a budget of 4 MiB left one plane and no rates: an H200, session 83.)
  const int64_t small = 16 << 20;
  auto rates = [&](int64_t budget) {
    auto r = internal::device_rates("0", st, DType::kF32, budget, false);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : internal::DeviceRates{};
  };
  const internal::DeviceRates first = rates(small);
  EXPECT_FALSE(first.cached);
  EXPECT_GT(first.step_mlups, 0);
  EXPECT_GT(first.copy_bps, 0);
  const internal::DeviceRates again = rates(small);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.step_mlups, first.step_mlups);
  EXPECT_EQ(again.copy_bps, first.copy_bps);
  const internal::DeviceRates full = rates(0);
  EXPECT_FALSE(full.cached);
  const internal::DeviceRates after = rates(small);
  EXPECT_TRUE(after.cached);
  EXPECT_EQ(after.step_mlups, full.step_mlups);
  EXPECT_EQ(after.copy_bps, full.copy_bps);
  if (shared != nullptr) {
    ::setenv("DEEPGRID_CACHE_DIR", restore.c_str(), 1);
  } else {
    ::unsetenv("DEEPGRID_CACHE_DIR");
  }
}

// bench --device-ratio runs the device method a second time out of the device's memory (here
// out of --mem too: three tiers), and device rows say what went between host and device.
TEST_F(DeviceTest, BenchRunsTheDeviceOutOfItsMemoryToo) {
  testing::TempDir tmp;
  const auto bench = run_cli({"bench", "--methods", "device", "--device", "0", "--device-ratio",
                              "8", "--mem-ratio", "4", "--shape", "32x32x64", "--steps", "3",
                              "--dir", (tmp.path() / "bench").string(), "--json"});
  ASSERT_EQ(bench.exit_code, 0) << bench;
  const auto rows = nlohmann::json::parse(bench.out);
  ASSERT_EQ(rows.size(), 2u) << bench;
  EXPECT_EQ(rows[0]["device_placement"], "device-resident");
  EXPECT_EQ(rows[1]["device_placement"], "three-tier");
  EXPECT_LE(rows[1]["device_memory_bytes"].get<int64_t>(), 32 << 10);  // grid / 8
  for (const auto& row : rows) {
    EXPECT_GT(row["device_bytes_copied"].get<int64_t>(), 0) << row.dump();
    EXPECT_EQ(row["steps"], 3);
  }
  // --device-overlap reaches the budgeted run: at grid / 16 (4 planes) the rings of one step
  // with copies beside the steps (6 planes) do not fit, and it is refused.
  const auto tight = run_cli({"bench", "--methods", "device", "--device", "0", "--device-ratio",
                              "16", "--mem-ratio", "4", "--shape", "32x32x64", "--steps", "1",
                              "--device-overlap", "on", "--dir", (tmp.path() / "tight").string()});
  EXPECT_EQ(tight.exit_code, 2) << tight;
  EXPECT_NE(tight.err.find("copies beside the steps"), std::string::npos) << tight;
}

}  // namespace
}  // namespace deepgrid
