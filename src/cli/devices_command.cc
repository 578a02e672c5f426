// deepgrid devices: the accelerators this deepgrid can run on (OpenCL platforms and devices),
// what --device names.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command_support.h"
#include "cli/commands.h"
#include "device/device.h"

namespace deepgrid::cli {
namespace {

struct DevicesArgs {
  bool json = false;
};

int cmd_devices(const DevicesArgs& a) {
  const std::vector<device::DeviceInfo> all = get(device::list_devices());
  if (a.json) {
    nlohmann::json j = {{"opencl", device::built_with_devices()},
                        {"devices", nlohmann::json::array()}};
    for (const device::DeviceInfo& d : all)
      j["devices"].push_back(nlohmann::json::parse(d.to_json()));
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  if (!device::built_with_devices()) {
    std::printf(
        "this deepgrid was built without OpenCL: it runs on the CPU only (install "
        "ocl-icd-opencl-dev and opencl-headers, scripts/setup.sh, and rebuild)\n");
    return 0;
  }
  if (all.empty()) {
    std::printf(
        "no OpenCL device was found: install your GPU's OpenCL driver (or pocl-opencl-icd for "
        "the CPU) and check with 'clinfo -l'\n");
    return 0;
  }
  for (const device::DeviceInfo& d : all) {
    std::printf("%s\n    %s, %s, %d compute units, largest buffer %s\n", d.describe().c_str(),
                d.vendor.c_str(), d.version.c_str(), d.compute_units,
                format_size(static_cast<uint64_t>(d.max_buffer_bytes)).c_str());
  }
  std::printf("run on one with: deepgrid run DIR --steps N --device ID (or gpu, cpu)\n");
  return 0;
}

}  // namespace

Command add_devices_command(CLI::App& app) {
  auto a = std::make_shared<DevicesArgs>();
  auto* cmd = app.add_subcommand(
      "devices",
      "List the accelerators deepgrid can run on (OpenCL platforms and devices): what "
      "--device ID names, with memory, double precision, vendor and driver");
  cmd->add_flag("--json", a->json, "Print them as one JSON object");
  return {cmd, [a] { return cmd_devices(*a); }};
}

}  // namespace deepgrid::cli
