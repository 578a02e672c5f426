// internal: what the device method's cost model needs from a device, measured on it: its step
// kernel's rate for a scheme and dtype, and how fast values go between host and device.
#pragma once

#include <cstdint>
#include <string>

#include "deepgrid/dtype.h"
#include "deepgrid/scheme.h"
#include "deepgrid/status.h"

namespace deepgrid::internal {

struct DeviceRates {
  double step_mlups = 0;  // device-resident steps of the scheme, kernels only
  double copy_bps = 0;    // host <-> device, bytes per second one way (both ways together)
  bool cached = false;    // came from machine.json rather than a measurement
};

// The rates of the device `device` names (device::choose_device's argument) for `scheme` and
// `dtype`: cached in machine.json per device, driver, scheme and dtype (machine.h), measured
// where missing (or with `remeasure`): the steps on a sample grid held on the device (512x512
// planes on a GPU, 256x256 on a CPU device), the copies of up to 16 MiB at once each way from
// pinned host memory (as a wavefront copies a chunk); the sample 16 MiB on a CPU device,
// 256 MiB on a GPU (smaller kernels there time the launches), and no more than a quarter of
// `budget` (the device bytes the run may use; 0: the device's default). A sample the budget
// cut short is cached under its own size, for runs under that budget when no full sample's
// rates are cached; one too small for a few planes is not measured (rates 0: the plan
// predicts no device time).
Result<DeviceRates> device_rates(const std::string& device, const Scheme& scheme, DType dtype,
                                 int64_t budget, bool remeasure);

}  // namespace deepgrid::internal
