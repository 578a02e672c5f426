// The report every run ends with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepgrid {

struct RunReport {
  std::string method;
  std::string stencil;
  int stencil_points = 0;
  int flops_per_update = 0;
  std::string shape;
  std::string dtype;
  std::string boundary;
  bool flush_subnormals = false;  // computed with subnormals flushed to zero (RunOptions)
  int threads = 0;
  int bt = 0;                        // steps per pass over memory
  std::string tile;                  // x-y tile of the wavefront, "NXxNY"
  int64_t band_rows = 0;             // stream in bands of rows (0: whole planes)
  std::string device;                // the device method: the device's name (docs/devices.md)
  std::string device_placement;      // the device method: "device-resident", "host-resident"
  uint64_t device_memory = 0;        // the device method: bytes the run allocated on the device
  uint64_t device_bytes_copied = 0;  // the device method: between host and device, both ways
  double device_copy_seconds = 0;    // the device method: wall time of those copies
  int64_t points = 0;                // grid points
  int64_t steps = 0;                 // steps advanced by this run
  int64_t step_from = 0;             // the grid's time step before and after
  int64_t step_to = 0;
  int64_t step_target = 0;     // the step the run is to reach (step_to unless it stopped early)
  double seconds = 0;          // wall time of the whole run, including I/O
  double compute_seconds = 0;  // wall time spent computing
  double io_wait_seconds = 0;  // wall time blocked waiting for the disk
  // Of io_wait_seconds, the stream methods' waits for writes (write buffers to come free,
  // planes to become durable); the rest waited for reads. A run whose waits are for writes has
  // a disk slower at writing than the sweeps compute.
  double io_wait_for_writes_seconds = 0;
  std::string io_backend;  // stream methods: "uring" or "threads"
  bool direct_io = false;  // the data files were opened with O_DIRECT
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t peak_memory = 0;     // the process's peak resident set (VmHWM)
  uint64_t engine_memory = 0;   // bytes the engine allocated for grids and buffers
  bool resumed = false;         // this run finished an interrupted one (resume.h)
  int64_t snapshots = 0;        // snapshots written (RunOptions::snapshots)
  double snapshot_seconds = 0;  // wall time spent writing them
  // On a virtual machine: CPU time the hypervisor took from this machine's `cpus` CPUs during
  // the run, summed over them (machine-wide, /proc/stat steal). The host's own work for the
  // guest (its disk emulation, other guests) shows up here, and the run's speed includes it.
  double stolen_cpu_seconds = 0;
  int cpus = 0;

  // Sets stolen_cpu_seconds to what the hypervisor took since stolen_cpu_seconds() returned
  // `at_start`, and cpus to the machine's online CPUs.
  void record_steal_since(double at_start);
  // stolen_cpu_seconds over the CPU time the machine had during the run.
  double stolen_share() const {
    return seconds > 0 && cpus > 0 ? stolen_cpu_seconds / (seconds * cpus) : 0;
  }

  double updates() const { return static_cast<double>(points) * static_cast<double>(steps); }
  // Million lattice updates per second over the whole run.
  double mlups() const { return seconds > 0 ? updates() / seconds / 1e6 : 0; }
  // Useful GFlop/s: flops_per_update for each nominal update (no redundant halo work).
  double gflops() const { return seconds > 0 ? updates() * flops_per_update / seconds / 1e9 : 0; }
  // The same two figures over the compute part only.
  double compute_mlups() const {
    return compute_seconds > 0 ? updates() / compute_seconds / 1e6 : 0;
  }

  std::string to_json() const;  // one line, one object
  std::string to_text() const;  // a few aligned lines for people
};

}  // namespace deepgrid
