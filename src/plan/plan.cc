#include "plan/plan.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <vector>

#include "core/file_util.h"
#include "core/int_math.h"
#include "core/threads.h"
#include "deepgrid/plane_transfer.h"
#include "plan/incore_bench.h"
#include "store/grid_paths.h"

namespace deepgrid {

std::string_view method_name(Method m) {
  switch (m) {
    case Method::kAuto:
      return "auto";
    case Method::kInCore:
      return "incore";
    case Method::kStream:
      return "stream";
    case Method::kNaive:
      return "naive";
    case Method::kMmap:
      return "mmap";
    case Method::kTiled:
      return "tiled";
    case Method::kDevice:
      return "device";
  }
  return "?";
}

Result<Method> parse_method(std::string_view text) {
  if (text == "auto") return Method::kAuto;
  if (text == "incore") return Method::kInCore;
  if (text == "stream") return Method::kStream;
  if (text == "naive") return Method::kNaive;
  if (text == "mmap") return Method::kMmap;
  if (text == "tiled") return Method::kTiled;
  if (text == "device") return Method::kDevice;
  return invalid_argument("unknown method '" + std::string(text) +
                          "'; use auto, incore, stream, naive, mmap, tiled or device");
}

Result<DeviceOverlap> parse_device_overlap(std::string_view text) {
  if (text == "auto") return DeviceOverlap::kAuto;
  if (text == "on") return DeviceOverlap::kOn;
  if (text == "off") return DeviceOverlap::kOff;
  return invalid_argument("--device-overlap '" + std::string(text) + "' is not auto, on or off");
}
namespace {

// Sweeps in bands that the planner weighs when left to choose (kAutoBandRows): their cost must
// be under this share of whole planes' to be taken, for what the model leaves out (the commit
// of a second copy of the files, a crash costing the whole sweep).
constexpr double kBandsWorthIt = 0.9;

// Whether the planner may sweep this run in bands: on the CPU (stream_plan.cc's
// check_bands), and room for a second copy of the data files beside them, counting a copy
// kept there already (the grid's directory `dir` known).
bool bands_allowed(const Manifest& m, const std::string& dir, const RunOptions& opt,
                   Method method) {
  if (opt.band_rows != kAutoBandRows || method != Method::kStream || dir.empty() ||
      !opt.device.empty()) {
    return false;
  }
  std::vector<std::string> paths;
  std::map<std::string, uint64_t> need;  // per directory: the copies of its files
  for (const DataFile& f : m.layout.files) {
    paths.push_back(internal::join_path(dir, f.path));
    need[internal::parent_path(paths.back())] += static_cast<uint64_t>(f.bytes);
  }
  const auto room = internal::room_for_copies(paths);
  return room.ok() && std::ranges::all_of(need, [&](const auto& dir_need) {
           return room->at(dir_need.first) >= dir_need.second;
         });
}

// The band heights weighed: the grid's rows split evenly into 2, 3, 4, 5, 6, 7, 8, 10, 12, ...
// bands (a quarter more each time), so that no band is much shorter than the others (a band
// costs its planes' height, however few of its rows are its own), down to 16 rows; and whose
// writes stay O_DIRECT: bands of a block at least, which share their edge blocks
// (stream::bands_share_edge_blocks), or where rows wrap across the grid's ends rows of whole
// 4096-byte blocks (rounded up to them).
std::vector<int64_t> band_heights(const Manifest& m, bool wrap) {
  const int64_t ny = m.shape.ny;
  const int64_t row = m.shape.nx * static_cast<int64_t>(dtype_size(m.dtype));
  const int64_t granule = wrap ? kDirectIoAlignment / std::gcd(row, kDirectIoAlignment) : 1;
  const int64_t least =
      std::max<int64_t>(16, wrap ? granule : internal::ceil_div(kDirectIoAlignment, row));
  std::vector<int64_t> out;
  for (int64_t bands = 2;; bands = std::max(bands + 1, bands * 5 / 4)) {
    const int64_t even = internal::ceil_div(ny, bands);
    const int64_t rows = internal::ceil_div(std::max(even, least), granule) * granule;
    if (rows < ny && (out.empty() || rows < out.back())) out.push_back(rows);
    if (even <= least) break;
  }
  return out;
}

// The stream plan `chosen` with its stages' tiles in chains (StreamPlan::chain_tiles), their
// edges in the budget (a shallower block where they need its room), where that is predicted
// no slower; else `chosen`.
StreamPlan chained(const Manifest& m, const RunOptions& opt, StreamOptions so,
                   const StreamPlan& chosen) {
  so.carry_edges = true;
  so.bt = chosen.bt;
  so.cache_bt = chosen.cache_bt;
  so.tile_x = chosen.tile_x;
  so.tile_y = chosen.tile_y;
  so.cache_bytes = chosen.cache_bytes;
  so.band_rows = chosen.band_rows;
  const Result<StreamPlan> q = plan_stream(m, opt.scheme, opt.boundary, opt.steps, so);
  return q.ok() && q->chain_tiles > 0 && q->cost.steps <= chosen.cost.steps ? *q : chosen;
}

// The stream plan: bands of the rows asked for, whole planes, or, left to choose, the cheapest
// of whole planes and band_heights() where bands_allowed() (`method`: the run's, resolved).
// At several threads the choice weighs tiles on their own, and the plan chosen then runs them
// in chains: chains' smaller halo count led the choice to narrower tiles that computed 0.90x
// as fast at two threads, where the plan chosen without them computed 1.02-1.10x faster in
// chains (Zen 1 VMs, sessions 82-84, medians of rounds; docs/performance/incore.md).
Result<StreamPlan> choose_stream_plan(const Manifest& m, const std::string& dir,
                                      const RunOptions& opt, Method method, StreamOptions so) {
  if (so.carry_edges && internal::resolved_threads(so.threads) >= 2) {
    so.carry_edges = false;
    Result<StreamPlan> chosen = choose_stream_plan(m, dir, opt, method, so);
    return chosen.ok() ? Result<StreamPlan>(chained(m, opt, so, *chosen)) : chosen;
  }
  so.band_rows = std::max<int64_t>(opt.band_rows, 0);
  Result<StreamPlan> whole = plan_stream(m, opt.scheme, opt.boundary, opt.steps, so);
  if (!bands_allowed(m, dir, opt, method)) return whole;
  // Whole planes that do not fit the budget at all leave bands the only plans.
  std::optional<StreamPlan> best;
  const double bar = whole.ok() ? kBandsWorthIt * whole->cost.steps : 0;
  for (const int64_t rows : band_heights(m, bands_wrap(m, opt.boundary, opt.placement))) {
    so.band_rows = rows;
    const Result<StreamPlan> q = plan_stream(m, opt.scheme, opt.boundary, opt.steps, so);
    if (q.ok() && (!whole.ok() || q->cost.steps < bar) &&
        (!best || q->cost.steps < best->cost.steps)) {
      best = *q;
    }
  }
  return best ? Result<StreamPlan>(*best) : whole;
}

// mmap: the in-core engine with its grids in scratch files in `scratch_dir`. Tiles sized for
// the machine's tuned working set.
InCoreOptions incore_options(const RunOptions& opt, const MachineProfile& machine, Method method,
                             const std::string& scratch_dir) {
  InCoreOptions io;
  io.threads = opt.threads;
  io.bt = opt.bt;
  io.tile_x = opt.tile_x;
  io.tile_y = opt.tile_y;
  if (machine.cache_bytes > 0) io.cache_bytes = machine.cache_bytes;
  io.tuned_bt = machine.tuned_bt;
  io.flush_subnormals = opt.flush_subnormals;
  if (method == Method::kMmap) io.scratch_dir = scratch_dir;
  return io;
}

// What the in-core method allocates: the engine and the buffers of its plane transfers.
uint64_t incore_memory(const Manifest& m, const RunOptions& opt, const InCoreOptions& io) {
  return dispatch_dtype(m.dtype, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<uint64_t>(InCoreEngine<T>::memory_bytes(m.shape, opt.scheme, opt.steps, io) +
                                 io::plane_transfer_bytes(m));
  });
}

// What an in-core run of the grid takes, with the machine's tiles.
uint64_t incore_run_memory(const Manifest& m, const RunOptions& opt,
                           const MachineProfile& machine) {
  return incore_memory(m, opt, incore_options(opt, machine, Method::kInCore, ""));
}

uint64_t incore_scratch_bytes(const Manifest& m, const RunOptions& opt, const InCoreOptions& io) {
  return dispatch_dtype(m.dtype, [&](auto tag) {
    return static_cast<uint64_t>(
        InCoreEngine<decltype(tag)>::scratch_bytes(m.shape, opt.scheme, opt.steps, io));
  });
}

// A stream sweep's reads and writes together move this many times the read-only bandwidth.
constexpr double kConcurrentDirections = 1.15;

// CPU time the stream engine itself spends per byte a sweep moves, beside the stencil: putting
// read planes into frames, hashing written ones, submitting and completing the I/O, filling and
// draining the pipeline. Measured on a Xeon VM (2026-11-26): the 512x512x4096 f32 grid at
// 16x its budget took 14.6 s in three sweeps of bt 16 against 11.7-12.6 s in one of bt 48 with
// the same stages, about 0.3 CPU-s per GiB moved; timers gave 0.11 of it to the frames and the
// hashes alone.
constexpr double kSweepCpuSecondsPerByte = 0.3 / (1 << 30);

// Disk bandwidth / compute rate, what the out-of-core planners weigh disk traffic with (0:
// unknown, keep their default).
double disk_bytes_per_update(const MachineProfile& machine, double directions) {
  if (machine.compute_mlups <= 0 || machine.disk_read_bps <= 0) return 0;
  return directions * machine.disk_read_bps / (machine.compute_mlups * 1e6);
}

// The device method's time: per pass, its kernels over the points it computes (redundant halo
// work included) with their launches, and its copies (device-resident: the grid loaded and
// stored once; wavefront: the pass's planes up, the grid down, with their commands), one after
// the other or, overlapped on a GPU, the longest of its compute queue and its two transfer
// queues (DeviceCosts); the disk once, or per sweep beside them (three tiers).
void predict_device_time(const Manifest& m, int64_t steps, const MachineProfile& machine,
                         double disk_s, RunPlan* plan) {
  const DevicePlan& d = plan->device;
  const double rate = machine.device_mlups * 1e6, copy_bps = machine.device_copy_bps;
  const double points = static_cast<double>(m.shape.points());
  const double grid = static_cast<double>(d.grid_bytes);
  const bool resident = d.placement == DevicePlacement::kDeviceResident;
  const bool three = d.placement == DevicePlacement::kThreeTiers;
  const bool beside = !resident && d.overlap && d.costs.copies_apart;
  const double plane = grid / static_cast<double>(m.shape.nz);
  const double commands =
      rate > 0 ? static_cast<double>(three ? d.pass_planes : d.chunks) * d.costs.copy_command / rate
               : 0;
  const double up = resident || copy_bps <= 0
                        ? 0
                        : static_cast<double>(d.pass_planes) * plane / copy_bps + commands;
  const double down = resident || copy_bps <= 0 ? 0 : grid / copy_bps + commands;
  if (copy_bps > 0 && resident) plan->predicted_copy_seconds = 2 * grid / copy_bps;
  plan->predicted_io_seconds = three ? 0 : disk_s;
  plan->predicted_seconds = plan->predicted_io_seconds + plan->predicted_copy_seconds;
  for (int64_t done = 0; done < steps; done += d.pass_steps) {
    const double levels = static_cast<double>(std::min<int64_t>(d.pass_steps, steps - done));
    const double launches = static_cast<double>(d.chunks) * levels * d.costs.launch;
    const double compute = rate > 0 ? (points * levels * d.redundancy + launches) / rate : 0;
    plan->predicted_compute_seconds += compute;
    plan->predicted_copy_seconds += up + down;
    plan->predicted_io_seconds += three ? disk_s : 0;
    const double device = beside ? std::max({compute, up, down}) : compute + up + down;
    plan->predicted_seconds += three ? std::max(device, disk_s) : device;
  }
}

Result<RunPlan> plan_tiled_run(const Manifest& m, const RunOptions& opt,
                               const MachineProfile& machine, RunPlan plan, double read_s,
                               double write_s, double rate) {
  if (!opt.scheme.is_stencil() || !opt.probes.empty()) {
    return invalid_argument(
        "the tiled method runs plain stencils without sources or receivers "
        "only; use --method stream (or incore, auto)");
  }
  TiledOptions to;
  to.threads = opt.threads;
  to.bt = opt.bt;
  to.mem_budget = opt.mem_budget;
  to.block_y = opt.tile_x;  // --tile NYxNZ: the tiled method's blocks
  to.block_z = opt.tile_y;
  to.flush_subnormals = opt.flush_subnormals;
  // Reads and writes of a pass follow each other: one direction's bandwidth at a time.
  if (const double d = disk_bytes_per_update(machine, 1); d > 0) to.disk_bytes_per_update = d;
  DG_ASSIGN_OR_RETURN(plan.tiled, plan_tiled(m, opt.scheme.stencil(), opt.boundary, opt.steps, to));
  plan.memory_bytes = static_cast<uint64_t>(plan.tiled.memory_bytes);
  plan.disk_bytes = static_cast<uint64_t>(plan.tiled.disk_bytes);
  const double points = static_cast<double>(m.shape.points());
  for (int64_t done = 0; done < opt.steps; done += plan.tiled.bt) {
    const double levels = static_cast<double>(std::min<int64_t>(plan.tiled.bt, opt.steps - done));
    const double compute = rate > 0 ? points * levels * plan.tiled.redundancy / rate : 0;
    const double io = read_s * plan.tiled.read_amplification + write_s;
    plan.predicted_compute_seconds += compute;
    plan.predicted_io_seconds += io;
    plan.predicted_seconds += compute + io;
  }
  return plan;
}

// The device method: the grid held on the device (host memory for the plane transfers), or
// in host memory and sent through the device as a wavefront (once, or twice periodic), or on
// disk, the stream engine's sweeps feeding the device (three tiers: their I/O buffers and,
// periodic, the planes kept for the sweep's other end); the device's budget proven by plan_device.
// The prediction takes the device's measured rates (0: the disk alone): predict_device_time.
Result<RunPlan> plan_device_run(const Manifest& m, const RunOptions& opt,
                                const MachineProfile& machine, RunPlan plan, double read_s,
                                double write_s) {
  DeviceOptions o;
  o.device = opt.device;
  o.device_mem = static_cast<int64_t>(opt.device_mem);
  o.bt = opt.bt;
  o.boundary = opt.boundary.kind;
  o.flush_subnormals = opt.flush_subnormals;
  if (opt.device_overlap != DeviceOverlap::kAuto) {
    o.overlap = opt.device_overlap == DeviceOverlap::kOn;
  }
  const int64_t transfers = io::plane_transfer_bytes(m) + m.layout.plane_bytes;
  o.host_mem = static_cast<int64_t>(opt.mem_budget);
  o.host_transfer_bytes = transfers;
  o.io_plane_bytes = m.layout.plane_buffer_bytes();
  if (machine.device_mlups > 0 && machine.device_copy_bps > 0) {
    const double point_bytes = static_cast<double>(opt.scheme.component_count()) *
                               static_cast<double>(dtype_size(m.dtype));
    o.copy_point_updates = machine.device_mlups * 1e6 * point_bytes / machine.device_copy_bps;
  }
  if (machine.device_mlups > 0) {  // (read_s + write_s: 0 where the disk is not measured)
    o.disk_point_updates =
        (read_s + write_s) * machine.device_mlups * 1e6 / static_cast<double>(m.shape.points());
  }
  DG_ASSIGN_OR_RETURN(plan.device,
                      plan_device(m.shape, opt.scheme, m.dtype, opt.probes, opt.steps, o));
  const DevicePlan& d = plan.device;
  if (d.placement == DevicePlacement::kThreeTiers) {
    // The stream engine's sweeps, one stage of the device's depth, up to 4 planes read ahead
    // (as --mem allows).
    StreamPlan& s = plan.stream;
    s.bt = s.cache_bt = d.pass_steps;
    const int64_t room = (static_cast<int64_t>(opt.mem_budget) - d.host_bytes) /
                         (kMinThreeTierIoBuffers * m.layout.plane_buffer_bytes());
    s.block = static_cast<int>(std::clamp<int64_t>(room, 1, 4));
    // The host's threads check and hash the planes a block at a time beside a GPU; a CPU
    // device computes on the same cores, which a team would take from it (on PoCL, 2 cores,
    // three tiers at 16x ran 1.5-2x longer with a team of 2, whose threads spin after each
    // block's checksums).
    s.threads = d.device.gpu ? internal::resolved_threads(opt.threads) : 1;
    s.io_buffers = kMinThreeTierIoBuffers * s.block;
    s.sweeps = (opt.steps + s.bt - 1) / s.bt;
    s.flush_subnormals = d.flush_subnormals;
    s.memory_bytes = s.io_buffers * m.layout.plane_buffer_bytes() + d.host_bytes;
    s.minimum_bytes = s.memory_bytes;
    plan.stream_options.io = opt.io;
    plan.stream_options.mem_budget = opt.mem_budget;
    plan.memory_bytes = static_cast<uint64_t>(s.memory_bytes);
  } else {
    plan.memory_bytes = static_cast<uint64_t>(transfers + d.host_bytes);
  }
  if (opt.mem_budget != 0 && plan.memory_bytes > opt.mem_budget) {
    return invalid_argument("the device method's " + std::string(placement_name(d.placement)) +
                            " placement needs " + format_size(plan.memory_bytes) +
                            " of host memory for this grid but --mem is " +
                            format_size(opt.mem_budget) + "; raise --mem");
  }
  predict_device_time(m, opt.steps, machine, read_s + write_s, &plan);
  return plan;
}

// " in chains of up to N along y (...)": tiles that hand their edge rows on (WavefrontPlan's and
// StreamPlan's chain_tiles; empty for 0).
std::string chains_text(int64_t chain_tiles) {
  if (chain_tiles <= 0) return "";
  char buf[96];
  std::snprintf(buf, sizeof buf,
                " in chains of up to %lld along y (each takes its edge rows from the one before)",
                static_cast<long long>(chain_tiles));
  return buf;
}

// " of u (u@1, m read where they lie)": what a lean stream plan's carried planes hold (empty
// when they hold every component).
std::string ring_fields(const Scheme& scheme, uint64_t aliased) {
  if (aliased == 0) return "";
  std::string held, left;
  for (int c = 0; c < scheme.component_count(); ++c) {
    std::string& to = c < 64 && (aliased >> c & 1) != 0 ? left : held;
    to += (to.empty() ? "" : ", ") + scheme.components()[static_cast<size_t>(c)];
  }
  return " of " + held + " (" + left + " read where they lie)";
}

// The stream's window of coefficients shared by its stages (StreamPlan::window_components), as
// `plan` describes it: ", a window of 34 planes of m for every stage".
std::string coefficient_window(const Scheme& scheme, const StreamPlan& p) {
  if (p.window_components == 0) return "";
  std::string names;
  for (int c = scheme.component_count() - p.window_components; c < scheme.component_count(); ++c)
    names += (names.empty() ? "" : ", ") + scheme.components()[static_cast<size_t>(c)];
  return ", a window of " + std::to_string(p.window_frames) + " planes of " + names +
         " for every stage";
}

// The plan of `method` (not kAuto) for the run.
Result<RunPlan> plan_method(const Manifest& m, const std::string& dir, const RunOptions& opt,
                            const MachineProfile& machine, Method method) {
  RunPlan plan;
  plan.method = method;
  const double points = static_cast<double>(m.shape.points());
  const double grid_bytes = static_cast<double>(m.shape.nz * m.layout.plane_buffer_bytes());
  const double rate = machine.compute_mlups * 1e6;
  const double read_s = machine.disk_read_bps > 0 ? grid_bytes / machine.disk_read_bps : 0;
  const double write_s = machine.disk_write_bps > 0 ? grid_bytes / machine.disk_write_bps : 0;
  if (plan.method == Method::kInCore || plan.method == Method::kMmap) {
    const InCoreOptions io = incore_options(opt, machine, plan.method, dir);
    const uint64_t memory = incore_memory(m, opt, io);
    if (opt.mem_budget != 0 && memory > opt.mem_budget) {
      return invalid_argument("the " + std::string(method_name(plan.method)) + " method needs " +
                              format_size(memory) + " for this grid but --mem is " +
                              format_size(opt.mem_budget) + "; raise --mem or use --method stream");
    }
    plan.memory_bytes = memory;
    plan.disk_bytes = incore_scratch_bytes(m, opt, io);
    plan.incore = plan_wavefront(m.shape, opt.scheme, dtype_size(m.dtype), opt.steps, io);
    const double incore_rate = machine.incore_rate() * 1e6;
    plan.predicted_compute_seconds =
        incore_rate > 0 ? points * static_cast<double>(opt.steps) / incore_rate : 0;
    // The load and store as earlier in-core runs took them (the first touch of the engine's
    // memory with them), else the disks' rate alone.
    const double load_store = machine.incore_load_store_seconds_per_byte * grid_bytes;
    plan.predicted_io_seconds =
        plan.method == Method::kInCore && load_store > 0 ? load_store : read_s + write_s;
    plan.predicted_seconds = plan.predicted_compute_seconds + plan.predicted_io_seconds;
    return plan;
  }
  if (plan.method == Method::kTiled) {
    return plan_tiled_run(m, opt, machine, std::move(plan), read_s, write_s, rate);
  }
  if (plan.method == Method::kDevice)
    return plan_device_run(m, opt, machine, std::move(plan), read_s, write_s);
  StreamOptions& so = plan.stream_options;
  so.threads = opt.threads;
  so.bt = plan.method == Method::kNaive ? 1 : opt.bt;
  so.cache_bt = opt.cache_bt;
  so.mem_budget = opt.mem_budget;
  so.io = opt.io;
  so.tile_x = opt.tile_x;
  so.tile_y = opt.tile_y;
  so.cache_bytes = machine.cache_bytes;
  so.flush_subnormals = opt.flush_subnormals;
  so.placement = opt.placement;  // (whether bands read across the grid's ends)
  for (const SourceSpec& source : opt.probes.sources) {
    const int c = opt.scheme.component_index(source.field);
    if (c >= 0 && c < 64) so.source_components |= uint64_t{1} << c;
  }
  // Reads and writes go to the disks concurrently, but share them: measured on this class of
  // machine (virtio disk), a sweep moved 1.8 GB/s of reads and writes together where reads
  // alone gave 1.6 GB/s.
  if (machine.disk_sweep_bps > 0 && machine.compute_mlups > 0) {
    so.disk_bytes_per_update = machine.disk_sweep_bps / (machine.compute_mlups * 1e6);
    so.disk_rate_observed = true;
  } else if (const double d = disk_bytes_per_update(machine, kConcurrentDirections); d > 0) {
    so.disk_bytes_per_update = d;
  }
  const double cpu_per_byte = machine.io_cpu_seconds_per_byte + kSweepCpuSecondsPerByte;
  so.io_cpu_updates_per_byte = cpu_per_byte * rate;
  DG_ASSIGN_OR_RETURN(plan.stream, choose_stream_plan(m, dir, opt, plan.method, so));
  plan.memory_bytes = static_cast<uint64_t>(plan.stream.memory_bytes);
  if (plan.stream.bands > 0) plan.disk_bytes = static_cast<uint64_t>(grid_bytes);
  // The planner's own cost of the plan it chose, in seconds at the in-core rate (the disk's
  // only where a rate was measured: otherwise the planner weighed a default).
  const double step_seconds = rate > 0 ? points / rate : 0;
  const bool disk_known = machine.disk_sweep_bps > 0 || machine.disk_read_bps > 0;
  plan.predicted_compute_seconds = plan.stream.cost.compute_steps * step_seconds;
  plan.predicted_io_seconds = disk_known ? plan.stream.cost.disk_steps * step_seconds : 0;
  plan.predicted_seconds =
      disk_known ? plan.stream.cost.steps * step_seconds : plan.predicted_compute_seconds;
  return plan;
}

// Grids from this size on are worth weighing the stream against the in-core method for
// (weighs_stream): below it the in-core method's load, first touch and store take a second or
// two on the development VMs, about what measuring the machine takes the first time.
constexpr uint64_t kWeighStreamFrom = uint64_t{1} << 30;

// The stream must be predicted this much faster than the in-core method to be taken instead:
// the in-core method's predictions fell short of its runs (19.7 s predicted, 24-32 s run for
// 16 steps of 2048x2048x256 on a Zen 4 VM), the stream's did not (10.5 s, 8.2-8.7 s run), so
// the margin only guards the model's errors the other way.
constexpr double kStreamWorthIt = 0.8;

// Stream plans within budgets from `most` bytes down, by fourths, predicted to run within
// this share of the fastest: the smallest of them is taken. A larger budget buys longer blocks
// of z-steps, which the model credits, but its memory must first be touched, which it does
// not: on the development VM the kernel's first touch of fresh memory ran at 0.35-0.9 GB/s
// (the host backing the guest's pages), and a 16-step run of 2048x2048x256 planned within
// 8.49 GiB (3.17 GiB used, predicted 6.95 s) took 13.0-15.2 s where one between them took
// 8.35 s within 256 MiB (predicted 10.5 s).
constexpr double kNearlyFastest = 1.1;

std::optional<RunPlan> fastest_stream(const Manifest& m, const std::string& dir, RunOptions opt,
                                      const MachineProfile& machine, uint64_t most) {
  constexpr int kBudgets = 5;
  std::vector<RunPlan> plans;
  for (int k = 0; k < kBudgets; ++k, most /= 4) {
    opt.mem_budget = most;
    Result<RunPlan> p = plan_method(m, dir, opt, machine, Method::kStream);
    if (!p.ok()) break;  // below the stream's minimum, and so the smaller budgets
    plans.push_back(std::move(p).value());
  }
  if (plans.empty()) return std::nullopt;
  const double fastest = std::ranges::min(plans, {}, &RunPlan::predicted_seconds).predicted_seconds;
  // Smallest budget first; the fastest is among them, so one is found.
  return *std::ranges::find_if(plans.rbegin(), plans.rend(), [&](const RunPlan& p) {
    return p.predicted_seconds <= kNearlyFastest * fastest;
  });
}

}  // namespace

bool weighs_stream(const Manifest& m, const RunOptions& opt) {
  return opt.method == Method::kAuto && opt.device.empty() && opt.placement.is_whole() &&
         static_cast<uint64_t>(m.shape.nz * m.layout.plane_buffer_bytes()) >= kWeighStreamFrom;
}

uint64_t auto_stream_budget(const Manifest& m, const RunOptions& opt) {
  return incore_run_memory(m, opt, opt.machine);
}

Result<RunPlan> plan_run(const Grid& grid, const RunOptions& opt, const MachineProfile& machine) {
  return plan_run(grid.manifest(), grid.dir(), opt, machine);
}

// Left to choose: the device where one is named; in-core where the grid fits the budget (or
// there is none) unless weighs_stream() and the stream is predicted faster; else the stream.
Result<RunPlan> plan_run(const Manifest& m, const std::string& dir, const RunOptions& opt,
                         const MachineProfile& machine) {
  if (opt.method != Method::kAuto) return plan_method(m, dir, opt, machine, opt.method);
  if (!opt.device.empty()) return plan_method(m, dir, opt, machine, Method::kDevice);
  const uint64_t incore = incore_run_memory(m, opt, machine);
  if (opt.mem_budget != 0 && incore > opt.mem_budget) {
    return plan_method(m, dir, opt, machine, Method::kStream);
  }
  DG_ASSIGN_OR_RETURN(RunPlan in_core, plan_method(m, dir, opt, machine, Method::kInCore));
  if (!weighs_stream(m, opt) || !machine.known()) return in_core;
  std::optional<RunPlan> stream = fastest_stream(m, dir, opt, machine, incore);
  if (!stream || stream->predicted_seconds >= kStreamWorthIt * in_core.predicted_seconds) {
    if (stream) in_core.stream_predicted_seconds = stream->predicted_seconds;
    return in_core;
  }
  stream->incore_predicted_seconds = in_core.predicted_seconds;
  return std::move(stream).value();
}

namespace {

// to_text's reason for the method, where the run weighed the stream against the in-core method.
std::string weighed(const RunPlan& plan) {
  char text[160] = "";
  if (plan.incore_predicted_seconds > 0) {
    std::snprintf(text, sizeof text,
                  " (chosen: the in-core method, loading, computing and storing in turn, is "
                  "predicted at %.2f s)",
                  plan.incore_predicted_seconds);
  } else if (plan.stream_predicted_seconds > 0) {
    std::snprintf(text, sizeof text,
                  " (kept: the stream, its disk traffic beside its steps, is predicted at "
                  "%.2f s, not under %.1f of this)",
                  plan.stream_predicted_seconds, kStreamWorthIt);
  }
  return text;
}

}  // namespace

std::string RunPlan::to_text(const Manifest& m, const RunOptions& opt) const {
  char buf[2048];
  int n = std::snprintf(
      buf, sizeof buf, "grid        %s %s (%s)\nstencil     %s, %lld steps\nmethod      %s%s\n",
      m.shape.to_string().c_str(), std::string(dtype_name(m.dtype)).c_str(),
      format_size(static_cast<uint64_t>(m.shape.nz * m.layout.plane_bytes)).c_str(),
      opt.scheme.describe().c_str(), static_cast<long long>(opt.steps),
      std::string(method_name(method)).c_str(), weighed(*this).c_str());
  const bool incore_engine = method == Method::kInCore || method == Method::kMmap;
  if (incore_engine) {
    n += std::snprintf(buf + n, sizeof buf - n,
                       "blocking    bt %d, tiles %lldx%lld%s, %d threads%s%s\n", incore.bt,
                       static_cast<long long>(incore.tile_x), static_cast<long long>(incore.tile_y),
                       chains_text(incore.chain_tiles).c_str(), incore.threads,
                       incore.turns ? ", each step writing u over u@1" : "",
                       incore.output_bypasses_caches ? ", output stored past the caches" : "");
  } else if (method == Method::kDevice) {
    n += std::snprintf(buf + n, sizeof buf - n, "device      %s\n",
                       device.device.describe().c_str());
    if (device.placement == DevicePlacement::kDeviceResident) {
      n += std::snprintf(buf + n, sizeof buf - n,
                         "placement   device-resident: two copies of the grid, %s of "
                         "--device-mem %s; loaded once, every step on the device, stored once\n",
                         format_size(static_cast<uint64_t>(device.device_bytes)).c_str(),
                         format_size(static_cast<uint64_t>(device.budget)).c_str());
    } else {
      const bool host = device.placement == DevicePlacement::kHostResident;
      const std::string where =
          host ? std::string(device.host_copies == 2 ? "two copies of the grid"
                                                     : "the grid, passed through in place,") +
                     " in host memory (" + format_size(static_cast<uint64_t>(device.host_bytes)) +
                     ")"
               : "the grid on disk, swept in place by the stream engine (reads ahead, writes "
                 "behind, its record and commits)";
      n += std::snprintf(
          buf + n, sizeof buf - n,
          "placement   %s: %s; each %s of bt %d steps sends it through the device as a "
          "wavefront of %lld chunks of %lld planes (%.0f%% redundant work), %s, in rings of "
          "%lld planes: %s of --device-mem %s\n",
          std::string(placement_name(device.placement)).c_str(), where.c_str(),
          host ? "pass" : "sweep", device.pass_steps, static_cast<long long>(device.chunks),
          static_cast<long long>(device.chunk_planes), 100 * (device.redundancy - 1),
          device.overlap ? "copies beside the steps" : "copies and steps in turn",
          static_cast<long long>(device.ring_planes),
          format_size(static_cast<uint64_t>(device.device_bytes)).c_str(),
          format_size(static_cast<uint64_t>(device.budget)).c_str());
    }
  } else if (method == Method::kTiled) {
    n += std::snprintf(
        buf + n, sizeof buf - n,
        "blocking    bt %d (%lld passes), blocks %lldx%lldx%lld (%lld per pass, %.0f%% redundant "
        "halo work, reads %.2fx the grid per pass), %d threads\n"
        "buffers     2 block buffers of %s, an I/O buffer of %s\n"
        "minimum     %s (bt 1)\n",
        tiled.bt, static_cast<long long>(tiled.passes), static_cast<long long>(m.shape.nx),
        static_cast<long long>(tiled.block_y), static_cast<long long>(tiled.block_z),
        static_cast<long long>(tiled.blocks), 100 * (tiled.redundancy - 1),
        tiled.read_amplification, tiled.threads,
        format_size(static_cast<uint64_t>(tiled.block_buffer_bytes)).c_str(),
        format_size(static_cast<uint64_t>(tiled.io_buffer_bytes)).c_str(),
        format_size(static_cast<uint64_t>(tiled.minimum_bytes)).c_str());
  } else {
    n += std::snprintf(
        buf + n, sizeof buf - n,
        "blocking    bt %d (%lld sweeps) in stages of %d steps, tiles %lldx%lld%s (%.0f%% "
        "redundant halo work, sized for %s per thread), blocks of %d z-steps, %d threads\n"
        "buffers     %lld plane frames for level 0 and between stages, %lld tiles x %d "
        "stages carrying %lld planes each%s%s, %lld I/O buffers (%lld for writes%s)\n"
        "minimum     %s (bt 1)\n",
        stream.bt, static_cast<long long>(stream.sweeps), stream.cache_bt,
        static_cast<long long>(stream.tile_x), static_cast<long long>(stream.tile_y),
        chains_text(stream.chain_tiles).c_str(), 100 * (stream.redundancy - 1),
        format_size(static_cast<uint64_t>(stream.cache_bytes)).c_str(), stream.block,
        stream.threads, static_cast<long long>(stream.frames), static_cast<long long>(stream.tiles),
        stream.stages, static_cast<long long>(stream.carried_planes),
        ring_fields(opt.scheme, stream.aliased).c_str(),
        coefficient_window(opt.scheme, stream).c_str(), static_cast<long long>(stream.io_buffers),
        static_cast<long long>(stream.write_buffers),
        stream.write_buffers < 2 * int64_t{stream.block}
            ? ", claimed before the last stage: the previous block's writes finish meanwhile"
            : "",
        format_size(static_cast<uint64_t>(stream.minimum_bytes)).c_str());
    if (stream.bands > 0) {
      n += std::snprintf(
          buf + n, sizeof buf - n,
          "bands       %lld of %lld rows, each swept as planes of %lld rows (its "
          "halo rows read again, and computed again: %.0f%% more work), written "
          "out of place\n",
          static_cast<long long>(stream.bands), static_cast<long long>(stream.band_rows),
          static_cast<long long>(stream.band_height), 100 * (stream.band_redundancy - 1));
    }
  }
  if (method == Method::kMmap) {
    n += std::snprintf(buf + n, sizeof buf - n,
                       "disk        %s of scratch files in the grid directory: the two padded grid "
                       "copies, MAP_SHARED and paged by the OS\n",
                       format_size(disk_bytes).c_str());
  } else if (method == Method::kTiled) {
    n += std::snprintf(buf + n, sizeof buf - n,
                       "disk        %s for the second copy of the grid, beside its data files\n",
                       format_size(disk_bytes).c_str());
  } else if (stream.bands > 0) {
    n += std::snprintf(buf + n, sizeof buf - n,
                       "disk        %s for a second copy of the data files while the run sweeps\n",
                       format_size(disk_bytes).c_str());
  }
  const bool overlapped =
      method == Method::kStream || method == Method::kNaive ||
      (method == Method::kDevice && device.placement == DevicePlacement::kThreeTiers);
  char copies[64] = "";
  if (method == Method::kDevice) {
    std::snprintf(copies, sizeof copies, ", copies %.2f s", predicted_copy_seconds);
  }
  std::string budget;
  if (opt.mem_budget != 0) {
    budget = " of --mem " + format_size(opt.mem_budget);
  } else if (incore_predicted_seconds > 0) {
    budget = " of " + format_size(stream_options.mem_budget) + ", the budget it was planned for";
  }
  std::snprintf(buf + n, sizeof buf - n,
                "memory      %s%s%s\npredicted   %.2f s (compute %.2f s%s, disk %.2f s%s)\n",
                format_size(memory_bytes).c_str(), budget.c_str(),
                method == Method::kMmap ? ", besides the mappings" : "", predicted_seconds,
                predicted_compute_seconds, copies, predicted_io_seconds,
                overlapped                ? ", overlapped"
                : method == Method::kMmap ? "; paging not modelled"
                                          : "");
  return buf;
}

std::string RunPlan::to_json() const {
  nlohmann::json j = {{"method", std::string(method_name(method))},
                      {"memory_bytes", memory_bytes},
                      {"predicted_seconds", predicted_seconds},
                      {"predicted_compute_seconds", predicted_compute_seconds},
                      {"predicted_io_seconds", predicted_io_seconds},
                      {"disk_bytes", disk_bytes}};
  if (incore_predicted_seconds > 0) {
    j["incore_predicted_seconds"] = incore_predicted_seconds;
    j["mem_budget"] = stream_options.mem_budget;
  }
  if (stream_predicted_seconds > 0) j["stream_predicted_seconds"] = stream_predicted_seconds;
  if (method == Method::kInCore || method == Method::kMmap) {
    j["bt"] = incore.bt;
    j["tile"] = {incore.tile_x, incore.tile_y};
    j["chain_tiles"] = incore.chain_tiles;
    j["threads"] = incore.threads;
    j["turns"] = incore.turns;
    j["output_bypasses_caches"] = incore.output_bypasses_caches;
  } else if (method == Method::kDevice) {
    j["device"] = nlohmann::json::parse(device.device.to_json());
    j["placement"] = std::string(placement_name(device.placement));
    j["device_bytes"] = device.device_bytes;
    j["host_bytes"] = device.host_bytes;
    j["predicted_copy_seconds"] = predicted_copy_seconds;
    j["bt"] = device.pass_steps;
    if (device.placement != DevicePlacement::kDeviceResident) {
      j["overlap"] = device.overlap;
      j["chunks"] = device.chunks;
      j["chunk_planes"] = device.chunk_planes;
      j["ring_planes"] = device.ring_planes;
      j["redundancy"] = device.redundancy;
    }
    j["device_budget_bytes"] = device.budget;
  } else if (method == Method::kTiled) {
    j["bt"] = tiled.bt;
    j["passes"] = tiled.passes;
    j["threads"] = tiled.threads;
    j["block"] = {tiled.block_y, tiled.block_z};
    j["blocks"] = tiled.blocks;
    j["redundancy"] = tiled.redundancy;
    j["read_amplification"] = tiled.read_amplification;
    j["block_buffer_bytes"] = tiled.block_buffer_bytes;
    j["io_buffer_bytes"] = tiled.io_buffer_bytes;
    j["minimum_bytes"] = tiled.minimum_bytes;
  } else {
    j["bt"] = stream.bt;
    j["sweeps"] = stream.sweeps;
    j["threads"] = stream.threads;
    j["cache_bt"] = stream.cache_bt;
    j["stages"] = stream.stages;
    j["frames"] = stream.frames;
    j["carried_planes"] = stream.carried_planes;
    j["window_frames"] = stream.window_frames;
    j["tile"] = {stream.tile_x, stream.tile_y};
    j["tile_cache_bytes"] = stream.cache_bytes;
    j["tiles"] = stream.tiles;
    j["block"] = stream.block;
    j["redundancy"] = stream.redundancy;
    j["chain_tiles"] = stream.chain_tiles;
    j["io_buffers"] = stream.io_buffers;
    j["write_buffers"] = stream.write_buffers;
    j["minimum_bytes"] = stream.minimum_bytes;
    if (stream.bands > 0) {
      j["bands"] = stream.bands;
      j["band_rows"] = stream.band_rows;
      j["band_height"] = stream.band_height;
      j["band_redundancy"] = stream.band_redundancy;
    }
  }
  return j.dump();
}

}  // namespace deepgrid
