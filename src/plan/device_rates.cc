#include "plan/device_rates.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/stopwatch.h"
#include "device/device.h"
#include "engines/device_engine.h"
#include "plan/machine_cache.h"

namespace deepgrid::internal {
namespace {

constexpr char kStepSection[] = "device_step_mlups";
// (Copies of a chunk's bytes at once from pinned host memory since session 61: the figures
// cached before came from a 256x256 plane at a time, about 20 GB/s on an H200 where 64 MiB at
// once ran at 55, as its predictions implied.)
constexpr char kCopySection[] = "device_pinned_chunk_copy_bytes_per_second";
constexpr int64_t kSampleSteps = 8;

// The side of the sample's square planes: 512 on a GPU, where 7pt f32 on 256x256 planes ran
// at 0.75 of its rate on 512x512 planes of a large grid (an H200), 256 on a CPU device.
int64_t sample_side(const device::DeviceInfo& info) { return info.gpu ? 512 : 256; }

// The sample's bytes: 256 MiB on a GPU (smaller kernels time the launches), 16 MiB on a CPU
// device, at most a quarter of `budget` (the sample's two copies in half of it).
int64_t sample_bytes(const device::DeviceInfo& info, int64_t budget) {
  return std::min((info.gpu ? int64_t{256} : int64_t{16}) << 20, budget / 4);
}

// The steps' rate of a device-resident run of the sample grid.
Result<double> measure_step_mlups(const device::DeviceInfo& info, const Scheme& scheme, DType dtype,
                                  const Shape& sample) {
  DeviceOptions o;
  o.device = std::to_string(info.index);
  o.bt = static_cast<int>(kSampleSteps);
  const int64_t value = static_cast<int64_t>(dtype_size(dtype));
  const int64_t plane_bytes = sample.nx * sample.ny * scheme.component_count() * value;
  o.device_mem = 2 * plane_bytes * sample.nz;
  DG_ASSIGN_OR_RETURN(const DevicePlan plan,
                      plan_device(sample, scheme, dtype, {}, kSampleSteps, o));
  DG_ASSIGN_OR_RETURN(DeviceEngine e, DeviceEngine::create(sample, scheme, dtype, plan));
  // Ones: normal numbers that stay normal (no subnormal slow paths on any device).
  DG_ASSIGN_OR_RETURN(const device::HostMemory pinned, e.host_memory(plane_bytes));
  std::byte* plane = pinned.data();
  for (int64_t i = 0; i < plane_bytes; i += value) {
    if (dtype == DType::kF32) {
      const float one = 1;
      std::memcpy(plane + i, &one, sizeof one);
    } else {
      const double one = 1;
      std::memcpy(plane + i, &one, sizeof one);
    }
  }
  for (int64_t z = 0; z < sample.nz; ++z) DG_RETURN_IF_ERROR(e.load_plane(z, plane));
  const Boundary zero;
  DG_RETURN_IF_ERROR(e.advance(zero, 1, {}, {}, {}).status());  // the kernels built
  DG_RETURN_IF_ERROR(e.store_plane(0, plane));                  // and done
  const auto start = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(e.advance(zero, kSampleSteps, {}, {}, {}).status());
  return static_cast<double>(sample.points() * kSampleSteps) / seconds_since(start) / 1e6;
}

// A wavefront's chunk at most: the host memory the copies' measurement takes beyond --mem (the
// H200's chunks at 16x were 8-21 MiB).
constexpr int64_t kCopySampleBytes = int64_t{16} << 20;

// Bytes per second one way of copies between pinned host memory and the device of up to
// kCopySampleBytes at once, as the wavefronts' passes copy a chunk of planes (both ways, one
// after the other).
Result<double> measure_copy_bps(const device::DeviceInfo& info, int64_t sample_bytes) {
  const int64_t bytes = std::min(sample_bytes, kCopySampleBytes);
  DG_ASSIGN_OR_RETURN(device::Device d, device::Device::open(info, bytes));
  DG_ASSIGN_OR_RETURN(const device::Buffer buffer, d.allocate(bytes, "the copy sample"));
  DG_ASSIGN_OR_RETURN(const device::HostMemory host, d.host_memory(bytes));
  std::memset(host.data(), 0, static_cast<size_t>(bytes));
  DG_RETURN_IF_ERROR(d.write(buffer, 0, host.data(), bytes));  // the first copy sets up
  constexpr int kRounds = 4;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kRounds; ++i) {
    DG_RETURN_IF_ERROR(d.write(buffer, 0, host.data(), bytes));
    DG_RETURN_IF_ERROR(d.read(buffer, 0, host.data(), bytes));
  }
  return 2.0 * kRounds * static_cast<double>(bytes) / seconds_since(start);
}

}  // namespace

Result<DeviceRates> device_rates(const std::string& device, const Scheme& scheme, DType dtype,
                                 int64_t budget, bool remeasure) {
  DG_ASSIGN_OR_RETURN(const device::DeviceInfo info, device::choose_device(device));
  if (budget <= 0) budget = device::default_device_budget(info);
  const std::string device_key = info.name + " / " + info.driver;
  const std::string step_key =
      device_key + " / " + scheme.name() + ":" + std::to_string(scheme.points()) + " / " +
      std::string(dtype_name(dtype)) + " / " + std::to_string(sample_side(info)) + "x" +
      std::to_string(sample_side(info)) + " planes";
  // A sample the budget cut short has keys of its own: its rates serve later runs under the
  // same budget (a plan and the run after it agree), never a full sample's.
  const int64_t bytes = sample_bytes(info, budget);
  const bool cut = bytes < sample_bytes(info, device::default_device_budget(info));
  const std::string cut_key = cut ? " / a sample of " + std::to_string(bytes) + " bytes" : "";
  auto cached = [&](const std::string& suffix) {
    DeviceRates c;
    c.step_mlups = cached_machine_number(kStepSection, step_key + suffix).value_or(0);
    c.copy_bps = cached_machine_number(kCopySection, device_key + suffix).value_or(0);
    c.cached = c.step_mlups > 0 && c.copy_bps > 0;
    return c;
  };
  if (!remeasure) {
    if (const DeviceRates full = cached(""); full.cached) return full;
    if (cut) {
      if (const DeviceRates small = cached(cut_key); small.cached) return small;
    }
  }
  const int64_t side = sample_side(info);
  const int64_t plane_bytes =
      side * side * scheme.component_count() * static_cast<int64_t>(dtype_size(dtype));
  const int64_t planes = bytes / plane_bytes;
  if (planes < 2 * scheme.radius_z() + 2) return DeviceRates{};
  DeviceRates r;
  DG_ASSIGN_OR_RETURN(r.step_mlups,
                      measure_step_mlups(info, scheme, dtype, Shape{side, side, planes}));
  DG_ASSIGN_OR_RETURN(r.copy_bps, measure_copy_bps(info, bytes));
  cache_machine_number(kStepSection, step_key + cut_key, r.step_mlups);
  cache_machine_number(kCopySection, device_key + cut_key, r.copy_bps);
  return r;
}

}  // namespace deepgrid::internal
