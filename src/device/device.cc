// What device.h says of devices whatever the backend: descriptions and the choice of one.
#include "device/device.h"

#include <charconv>
#include <nlohmann/json.hpp>
#include <system_error>

#include "deepgrid/geometry.h"

namespace deepgrid::device {

std::string DeviceInfo::describe() const {
  return std::to_string(index) + ": " + name + " (" + (gpu ? "gpu" : "cpu") + ", " +
         format_size(static_cast<uint64_t>(memory_bytes)) + (fp64 ? ", fp64" : ", no fp64") + "; " +
         platform + ", driver " + driver + ")";
}

std::string DeviceInfo::to_json() const {
  return nlohmann::json{{"index", index},
                        {"platform", platform},
                        {"name", name},
                        {"vendor", vendor},
                        {"driver", driver},
                        {"version", version},
                        {"type", gpu ? "gpu" : "cpu"},
                        {"fp64", fp64},
                        {"f32_subnormals", f32_subnormals},
                        {"memory_bytes", memory_bytes},
                        {"max_buffer_bytes", max_buffer_bytes},
                        {"compute_units", compute_units}}
      .dump();
}

int64_t default_device_budget(const DeviceInfo& info) {
  return info.memory_bytes - info.memory_bytes / 16;
}

Result<DeviceInfo> choose_device(std::string_view which) {
  if (!built_with_devices()) {
    return unsupported(
        "this deepgrid was built without OpenCL, so it cannot run on devices; install "
        "ocl-icd-opencl-dev and opencl-headers (scripts/setup.sh) and rebuild");
  }
  DG_ASSIGN_OR_RETURN(const std::vector<DeviceInfo> all, list_devices());
  if (all.empty()) {
    return invalid_argument(
        "no OpenCL device was found: install your GPU's OpenCL driver (or pocl-opencl-icd for "
        "the CPU) and check with 'clinfo -l'; 'deepgrid devices' lists what deepgrid sees");
  }
  std::string listing;
  for (const DeviceInfo& d : all) listing += (listing.empty() ? "" : "; ") + d.describe();
  if (which.empty() || which == "gpu" || which == "cpu") {
    const bool want_gpu = which != "cpu";
    for (const DeviceInfo& d : all) {
      if (d.gpu == want_gpu) return d;
    }
    if (which.empty()) return all.front();
    return invalid_argument("no " + std::string(which) + " device was found (there is " + listing +
                            "); use --device ID");
  }
  size_t index = 0;
  const auto [end, error] = std::from_chars(which.data(), which.data() + which.size(), index);
  if (error != std::errc() || end != which.data() + which.size()) {
    return invalid_argument("--device takes a device's number, gpu or cpu, not '" +
                            std::string(which) + "'; 'deepgrid devices' lists them");
  }
  if (index >= all.size()) {
    return invalid_argument("there is no device " + std::string(which) + " (there is " + listing +
                            "); 'deepgrid devices' lists them");
  }
  return all[index];
}

}  // namespace deepgrid::device
