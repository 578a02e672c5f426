#include "deepgrid/report.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "core/process_stats.h"
#include "deepgrid/geometry.h"

namespace deepgrid {

void RunReport::record_steal_since(double at_start) {
  stolen_cpu_seconds = deepgrid::stolen_cpu_seconds() - at_start;
  cpus = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string RunReport::to_json() const {
  nlohmann::json j = {
      {"method", method},
      {"stencil", stencil},
      {"stencil_points", stencil_points},
      {"flops_per_update", flops_per_update},
      {"shape", shape},
      {"dtype", dtype},
      {"boundary", boundary},
      {"flush_subnormals", flush_subnormals},
      {"threads", threads},
      {"bt", bt},
      {"tile", tile},
      {"band_rows", band_rows},
      {"device", device},
      {"device_placement", device_placement},
      {"device_memory_bytes", device_memory},
      {"device_bytes_copied", device_bytes_copied},
      {"device_copy_seconds", device_copy_seconds},
      {"points", points},
      {"steps", steps},
      {"step_from", step_from},
      {"step_to", step_to},
      {"step_target", step_target},
      {"resumed", resumed},
      {"seconds", seconds},
      {"compute_seconds", compute_seconds},
      {"io_wait_seconds", io_wait_seconds},
      {"io_wait_for_writes_seconds", io_wait_for_writes_seconds},
      {"io_backend", io_backend},
      {"direct_io", direct_io},
      {"mlups", mlups()},
      {"gflops", gflops()},
      {"compute_mlups", compute_mlups()},
      {"bytes_read", bytes_read},
      {"bytes_written", bytes_written},
      {"peak_memory_bytes", peak_memory},
      {"engine_memory_bytes", engine_memory},
      {"stolen_cpu_seconds", stolen_cpu_seconds},
      {"cpus", cpus},
      {"snapshots", snapshots},
      {"snapshot_seconds", snapshot_seconds},
  };
  return j.dump();
}

std::string RunReport::to_text() const {
  const std::string disk_note = !direct_io ? " (buffered: this filesystem refuses O_DIRECT)"
                                : io_backend.empty() ? " (O_DIRECT)"
                                                     : " (O_DIRECT, " + io_backend + ")";
  char buf[1024];
  std::snprintf(buf, sizeof buf, ", %.3f s of it for writes", io_wait_for_writes_seconds);
  const std::string writes_note = io_wait_for_writes_seconds > 0 ? buf : "";
  const std::string how =
      device.empty()
          ? std::to_string(threads) + (threads == 1 ? " thread" : " threads") + ", bt " +
                std::to_string(bt) + ", tiles " + tile +
                (band_rows > 0 ? ", bands of " + std::to_string(band_rows) + " rows" : "")
          : "on " + device + ", " + device_placement + ", " + format_size(device_memory) +
                " of device memory" + (bt > 1 ? ", bt " + std::to_string(bt) : "");
  std::snprintf(
      buf, sizeof buf,
      "method      %s, %s\n"
      "problem     %s %s, %s, boundary %s%s\n"
      "steps       %lld (time step %lld -> %lld)\n"
      "time        %.3f s (compute %.3f s, waiting for the disk %.3f s%s)\n"
      "speed       %.1f MLUP/s, %.2f GFlop/s (compute only: %.1f MLUP/s)\n"
      "disk        %s read, %s written%s\n"
      "memory      %s peak resident, %s in grids and buffers\n",
      method.c_str(), how.c_str(), shape.c_str(), dtype.c_str(), stencil.c_str(), boundary.c_str(),
      flush_subnormals ? ", subnormals flushed to zero" : "", static_cast<long long>(steps),
      static_cast<long long>(step_from), static_cast<long long>(step_to), seconds, compute_seconds,
      io_wait_seconds, writes_note.c_str(), mlups(), gflops(), compute_mlups(),
      format_size(bytes_read).c_str(), format_size(bytes_written).c_str(), disk_note.c_str(),
      format_size(peak_memory).c_str(), format_size(engine_memory).c_str());
  std::string text = buf;
  if (!device.empty()) {
    std::snprintf(buf, sizeof buf, "device      %s copied between host and device in %.3f s\n",
                  format_size(device_bytes_copied).c_str(), device_copy_seconds);
    text += buf;
  }
  if (snapshots > 0) {
    std::snprintf(buf, sizeof buf, "snapshots   %lld written in %.3f s\n",
                  static_cast<long long>(snapshots), snapshot_seconds);
    text += buf;
  }
  // Shown from 1% of the machine's CPU time on, so that bare metal and idle hosts stay quiet.
  if (stolen_share() >= 0.01) {
    std::snprintf(buf, sizeof buf,
                  "hypervisor  took %.3f s of CPU time (%.0f%% of %d CPUs over the run) for the "
                  "host's own work, e.g. its disk emulation\n",
                  stolen_cpu_seconds, 100 * stolen_share(), cpus);
    text += buf;
  }
  return text;
}

}  // namespace deepgrid
