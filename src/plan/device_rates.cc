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
// (Copies from pinned host memory since session 60: the pageable figures cached before, 5x
// slower on an H200, are not taken for them.)
constexpr char kCopySection[] = "device_pinned_copy_bytes_per_second";
constexpr int64_t kSampleSteps = 8;
constexpr int64_t kSampleSide = 256;

// The sample's planes of `plane_bytes`: its full size, or what half of `budget` holds of two
// copies.
int64_t device_sample_planes(const device::DeviceInfo& info, int64_t plane_bytes, int64_t budget) {
  const int64_t full = (info.gpu ? int64_t{256} : int64_t{16}) << 20;
  return std::min(full, budget / 4) / plane_bytes;
}

// One device-resident run of the sample: the steps' rate, and the copies' of loading and
// storing it from pinned host memory, as the wavefronts' passes copy (a GPU's copies from
// pageable memory ran at a fifth of the rate on an H200: docs/performance/devices.md).
Result<DeviceRates> measure(const device::DeviceInfo& info, const Scheme& scheme, DType dtype,
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
  const Boundary zero;
  auto load = [&] {
    for (int64_t z = 0; z < sample.nz; ++z) DG_RETURN_IF_ERROR(e.load_plane(z, plane));
    return Status::Ok();
  };
  DG_RETURN_IF_ERROR(load());
  DG_RETURN_IF_ERROR(e.advance(zero, 1, {}, {}, {}).status());  // the kernels built
  const DeviceEngine::Traffic t0 = e.traffic();
  DG_RETURN_IF_ERROR(load());
  const DeviceEngine::Traffic t1 = e.traffic();
  // The copies made equal on the device (advance's first act after a load), waited for.
  DG_RETURN_IF_ERROR(e.advance(zero, 0, {}, {}, {}).status());
  DG_RETURN_IF_ERROR(e.store_plane(0, plane));
  const auto start = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(e.advance(zero, kSampleSteps, {}, {}, {}).status());
  const double step_seconds = seconds_since(start);
  const DeviceEngine::Traffic t2 = e.traffic();
  for (int64_t z = 0; z < sample.nz; ++z) DG_RETURN_IF_ERROR(e.store_plane(z, plane));
  const DeviceEngine::Traffic t3 = e.traffic();
  DeviceRates r;
  r.step_mlups = static_cast<double>(sample.points() * kSampleSteps) / step_seconds / 1e6;
  const double copy_seconds =
      (t1.copy_seconds - t0.copy_seconds) + (t3.copy_seconds - t2.copy_seconds);
  if (copy_seconds > 0) {
    r.copy_bps = static_cast<double>((t1.bytes - t0.bytes) + (t3.bytes - t2.bytes)) / copy_seconds;
  }
  return r;
}

}  // namespace

Result<DeviceRates> device_rates(const std::string& device, const Scheme& scheme, DType dtype,
                                 int64_t budget, bool remeasure) {
  DG_ASSIGN_OR_RETURN(const device::DeviceInfo info, device::choose_device(device));
  if (budget <= 0) budget = device::default_device_budget(info);
  const std::string device_key = info.name + " / " + info.driver;
  const std::string step_key = device_key + " / " + scheme.name() + ":" +
                               std::to_string(scheme.points()) + " / " +
                               std::string(dtype_name(dtype));
  DeviceRates r;
  if (!remeasure) {
    r.step_mlups = cached_machine_number(kStepSection, step_key).value_or(0);
    r.copy_bps = cached_machine_number(kCopySection, device_key).value_or(0);
    r.cached = r.step_mlups > 0 && r.copy_bps > 0;
    if (r.cached) return r;
  }
  const int64_t plane_bytes = kSampleSide * kSampleSide * scheme.component_count() *
                              static_cast<int64_t>(dtype_size(dtype));
  const int64_t planes = device_sample_planes(info, plane_bytes, budget);
  if (planes < 2 * scheme.radius_z() + 2) return DeviceRates{};
  DG_ASSIGN_OR_RETURN(r, measure(info, scheme, dtype, Shape{kSampleSide, kSampleSide, planes}));
  if (planes == device_sample_planes(info, plane_bytes, device::default_device_budget(info))) {
    cache_machine_number(kStepSection, step_key, r.step_mlups);
    cache_machine_number(kCopySection, device_key, r.copy_bps);
  }
  return r;
}

}  // namespace deepgrid::internal
