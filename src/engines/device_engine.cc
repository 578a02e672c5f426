#include "engines/device_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/decomposition.h"
#include "core/stopwatch.h"
#include "engines/device_launch.h"
#include "engines/device_wavefront.h"

namespace deepgrid {
namespace {

using internal::ProbeBuffers;
using internal::ProbeList;
using internal::seconds_since;
using internal::sources_on_coefficients;
using internal::StepLauncher;

// A wavefront pass's points computed per point advanced: periodic, each level but the last
// also computes the planes past each end that later levels read.
double wavefront_redundancy(int64_t nz, int levels, int64_t rz, bool periodic) {
  if (!periodic) return 1;
  double computed = 0;
  for (int k = 1; k <= levels; ++k) {
    computed += static_cast<double>(nz + 2 * int64_t{levels - k} * rz);
  }
  return computed / (static_cast<double>(nz) * levels);
}

// A step over the points of `box`, from `in` to `out`.
Status launch_box(device::Device& d, StepLauncher& step, const internal::Ring& in,
                  const internal::Ring& out, const Block& box) {
  return step.launch(d, in, out, internal::xy_range(box), {{box[kAxisZ].lo, box[kAxisZ].hi}});
}

bool has_points(const Block& b) {
  return b.size(kAxisX) > 0 && b.size(kAxisY) > 0 && b.size(kAxisZ) > 0;
}

// The points of `box` that read no late halo at step k of a pass: those more than k times the
// stencil's reach from each late end.
Block clear_of_late(const Block& box, const LateHalos& late, const Shape& s, const Scheme& scheme,
                    int64_t k) {
  const int64_t n[3] = {s.nx, s.ny, s.nz};
  const int64_t reach[3] = {scheme.radius_x(), scheme.radius_y(), scheme.radius_z()};
  Block inner = box;
  for (int a : {kAxisX, kAxisY, kAxisZ}) {
    const auto i = static_cast<size_t>(a);
    if (late.below[i] > 0) inner[a].lo = std::max(inner[a].lo, late.below[i] + k * reach[i]);
    if (late.above[i] > 0) inner[a].hi = std::min(inner[a].hi, n[i] - late.above[i] - k * reach[i]);
  }
  return inner;
}

// `box` less `inner` (within it) in boxes: its z ends, then the y ends of what is left, then
// its x ends; all of `box` when `inner` has no point.
std::vector<Block> around(const Block& box, const Block& inner) {
  if (!has_points(inner)) return {box};
  std::vector<Block> out;
  Block rest = box;
  for (int a : {kAxisZ, kAxisY, kAxisX}) {
    Block below = rest, above = rest;
    below[a] = {rest[a].lo, inner[a].lo};
    above[a] = {inner[a].hi, rest[a].hi};
    for (const Block& b : {below, above}) {
      if (has_points(b)) out.push_back(b);
    }
    rest[a] = inner[a];
  }
  return out;
}

// The defaults and constants of the wavefronts' cost model. On a GPU a point's copy one way
// costs about 15 updates (an H200: 54 GB/s from pinned memory against ~200 GLUP/s of 7pt f32);
// a launch 2^21 updates on its compute queue, beside which its copies run (the H200's OpenCL:
// ~11 us a launch, fitted to nine host-resident runs of 8-46 steps a pass, which took the
// longer of their copies one way and their kernels with their launches, within 15%); a copy
// command, not measured apart, as much as a launch. On a CPU device copies are memcpy on the
// kernels' cores, 0.1 updates a point (PoCL, 7pt f32: 8.7 GB/s against 200 MLUP/s; fitted,
// not measured per run: a memcpy's rate alone does not tell what it takes from the kernels),
// and a launch with its events costs 2^15 updates (~190 us at 200 MLUP/s). Three tiers: a
// sweep reads and writes each point once. On a GPU that runs beside the device, 20 times a
// point's copy by default (the H200's machine: its disk read at 2.9 GB/s against copies at
// 55); on a CPU device it costs 1 update a point besides (fitted: the host's I/O work,
// checksums, io_uring, a VM's disk emulation, takes the kernels' cores, and each sweep
// commits).
DeviceCosts device_costs(const device::DeviceInfo& info, const DeviceOptions& options) {
  DeviceCosts c;
  c.copies_apart = info.gpu;
  c.copy_point = !info.gpu ? 0.1 : options.copy_point_updates > 0 ? options.copy_point_updates : 15;
  c.launch = info.gpu ? 1 << 21 : 1 << 15;
  c.copy_command = info.gpu ? 1 << 21 : 0;
  c.disk_point = !info.gpu                        ? 1
                 : options.disk_point_updates > 0 ? options.disk_point_updates
                                                  : 20 * c.copy_point;
  return c;
}

// Wavefronts: the pass depth (up to `max_levels`) and chunk that fit `plan.budget` and cost
// least per step in plan.costs' model: with copies beside the kernels on a GPU, the longer of
// its transfer queues' work (the planes up, a pass's larger direction, and their commands) and
// its compute queue's (the steps and their launches); in turn, or on a CPU device, all of it.
// The host-resident placement copies a chunk at once each way, three tiers a plane at a time
// (from and to their I/O buffers). Three tiers add the disk's sweep: on a GPU the longer of it
// and the device's work counts, on a CPU device both. The cost per step, or infinity when not
// even one step fits.
struct WavefrontModel {
  Shape shape;
  const Scheme* scheme = nullptr;
  int64_t plane_bytes = 0, probe_points = 0;
  bool periodic = false;
  DType dtype = DType::kF32;
  bool from_disk = false;  // three tiers
};
double plan_wavefront(const WavefrontModel& m, int max_levels, bool overlap, DevicePlan* plan) {
  const Shape& shape = m.shape;
  const Scheme& scheme = *m.scheme;
  const int64_t plane_bytes = m.plane_bytes, probe_points = m.probe_points;
  const bool periodic = m.periodic;
  const DType dtype = m.dtype;
  const DeviceCosts& costs = plan->costs;
  const bool beside = overlap && costs.copies_apart;
  const int64_t rz = scheme.radius_z(), nz = shape.nz;
  const auto value = static_cast<int64_t>(dtype_size(dtype));
  const auto grid_points = static_cast<double>(shape.points());
  double best = std::numeric_limits<double>::infinity();
  for (int levels = 1; levels <= max_levels; ++levels) {
    const int64_t halo = levels * rz, planes = periodic ? nz + 2 * halo : nz;
    const int64_t copies = periodic ? planes / nz + 2 : 1;
    const int64_t probes = internal::probe_buffer_bytes(probe_points * copies, levels, value);
    const int64_t room = (plan->budget - probes) / plane_bytes - 2 * halo;
    const int64_t chunk = std::min(planes + halo, room / (levels + 1 + (overlap ? 2 : 0)));
    if (chunk < 1) break;
    const internal::DeviceWavefront w(0, nz, nz, periodic, levels, rz, chunk, overlap);
    const double redundancy = wavefront_redundancy(nz, levels, rz, periodic);
    const double up = costs.copy_point * static_cast<double>(planes) / static_cast<double>(nz);
    const double down = costs.copy_point;
    const double commands =
        static_cast<double>(m.from_disk ? planes : w.chunks()) * costs.copy_command / grid_points;
    const double compute =
        levels * redundancy + static_cast<double>(w.chunks() * levels) * costs.launch / grid_points;
    const double device =
        beside ? std::max(up + commands, compute) : up + down + 2 * commands + compute;
    const double disk = m.from_disk ? costs.disk_point : 0;  // (periodic ends kept in memory)
    const double cost = (costs.copies_apart ? std::max(device, disk) : device + disk) / levels;
    if (cost >= best) continue;
    best = cost;
    plan->pass_steps = levels;
    plan->chunk_planes = chunk;
    plan->chunks = w.chunks();
    plan->pass_planes = planes;
    plan->ring_planes = internal::DeviceWavefront::ring_planes(levels, rz, chunk, overlap);
    plan->overlap = overlap;
    plan->redundancy = redundancy;
    plan->device_bytes = plan->ring_planes * plane_bytes + probes;
  }
  return best;
}

// A wavefront with its copies beside its steps or in turn (`overlap`; none: the cheaper in
// plan_wavefront's model, in turn on a tie). False when neither fits.
bool plan_wavefront_overlap(const WavefrontModel& m, int max_levels, std::optional<bool> overlap,
                            DevicePlan* plan) {
  DevicePlan beside = *plan;
  const double in_turn_cost = overlap == true ? std::numeric_limits<double>::infinity()
                                              : plan_wavefront(m, max_levels, false, plan);
  const double beside_cost = overlap == false ? std::numeric_limits<double>::infinity()
                                              : plan_wavefront(m, max_levels, true, &beside);
  if (beside_cost < in_turn_cost) *plan = beside;
  return std::min(in_turn_cost, beside_cost) < std::numeric_limits<double>::infinity();
}

}  // namespace

std::string_view placement_name(DevicePlacement p) {
  switch (p) {
    case DevicePlacement::kHostResident:
      return "host-resident";
    case DevicePlacement::kThreeTiers:
      return "three-tier";
    default:
      return "device-resident";
  }
}

Result<DevicePlan> plan_device(const Shape& shape, const Scheme& scheme, DType dtype,
                               const Probes& probes, int64_t steps, const DeviceOptions& options) {
  if (scheme.kernel()) {
    return invalid_argument(
        "a user's kernel library runs on the CPU only, not on a device; run it with --method "
        "incore or stream (auto), or write its update as a scheme of terms (docs/schemes.md)");
  }
  DG_ASSIGN_OR_RETURN(const device::DeviceInfo info, device::choose_device(options.device));
  if (dtype == DType::kF64 && !info.fp64) {
    return invalid_argument("device " + info.describe() +
                            " has no double precision; use an f32 grid or another device");
  }
  if (dtype == DType::kF32 && !info.f32_subnormals) {
    return invalid_argument("device " + info.describe() +
                            " does not compute f32 subnormal numbers, so its results would "
                            "differ from every other method's; use an f64 grid or another device");
  }
  DevicePlan plan;
  plan.device = info;
  plan.costs = device_costs(info, options);
  plan.flush_subnormals = options.flush_subnormals;
  // Radius-1 updates run faster with 4 points along z per work item (on an H200, 7pt: f32
  // 1.32x, f64 1.12x), wider ones slower (wave8: 0.9x): docs/performance/devices.md.
  plan.z_points = scheme.radius() == 1 ? 4 : 1;
  plan.pass_steps = static_cast<int>(std::clamp<int64_t>(options.bt > 0 ? options.bt : kMaxAutoBt,
                                                         1, std::max<int64_t>(steps, 1)));
  const int64_t max_budget = device::default_device_budget(info);
  if (options.device_mem > info.memory_bytes) {
    return invalid_argument("--device-mem " +
                            format_size(static_cast<uint64_t>(options.device_mem)) +
                            " is more than device " + info.describe() + " has; use at most " +
                            format_size(static_cast<uint64_t>(max_budget)));
  }
  plan.budget = options.device_mem > 0 ? options.device_mem : max_budget;
  const auto value = static_cast<int64_t>(dtype_size(dtype));
  plan.grid_bytes = shape.points() * scheme.component_count() * value;
  const auto probe_points = static_cast<int64_t>(probes.sources.size() + probes.receivers.size());
  plan.device_bytes =
      2 * plan.grid_bytes + internal::probe_buffer_bytes(probe_points, plan.pass_steps, value);
  if (plan.device_bytes <= plan.budget) return plan;

  // Host-resident: the grid through the device as a wavefront.
  const int64_t plane_bytes = shape.nx * shape.ny * scheme.component_count() * value;
  const bool periodic = options.boundary == Boundary::Kind::kPeriodic;
  plan.placement = DevicePlacement::kHostResident;
  WavefrontModel model{shape, &scheme, plane_bytes, probe_points, periodic, dtype};
  const int max_levels = plan.pass_steps;
  if (!plan_wavefront_overlap(model, max_levels, options.overlap, &plan)) {
    const bool overlap = options.overlap == true;
    const int64_t planes = internal::DeviceWavefront::ring_planes(1, scheme.radius_z(), 1, overlap);
    const int64_t minimum = planes * plane_bytes + internal::probe_buffer_bytes(
                                                       probe_points * (periodic ? 3 : 1), 1, value);
    return invalid_argument(
        "the device budget is " + format_size(static_cast<uint64_t>(plan.budget)) +
        (options.device_mem > 0 ? " (--device-mem)" : " (the device's memory less 1/16)") +
        ", less than the " + std::to_string(planes) + " planes" +
        (overlap ? " (copies beside the steps)" : "") +
        " a wavefront of one step needs to stream the grid through it; raise --device-mem to "
        "at least " +
        format_size(static_cast<uint64_t>(minimum)) +
        " if the device has it, or run on the CPU (--method incore or stream)");
  }
  plan.host_copies = periodic ? 2 : 1;
  plan.host_bytes = plan.host_copies * plan.grid_bytes;
  if (options.host_mem == 0 || plan.host_bytes + options.host_transfer_bytes <= options.host_mem) {
    return plan;
  }
  // Three tiers: periodic, the planes the sweep reads again at its other end stay in host
  // memory; the depth cut to what --mem holds of them.
  plan.placement = DevicePlacement::kThreeTiers;
  auto kept_bytes = [&](int levels) {
    const int64_t halo = int64_t{levels} * scheme.radius_z();
    return (periodic ? std::min(shape.nz, 2 * halo) : 0) * plane_bytes;
  };
  const int64_t io = kMinThreeTierIoBuffers * options.io_plane_bytes;
  int levels = max_levels;
  while (levels > 0 && kept_bytes(levels) + io > options.host_mem) --levels;
  if (levels == 0) {
    return invalid_argument(
        "--mem " + format_size(static_cast<uint64_t>(options.host_mem)) +
        " holds neither the grid in host memory nor what streaming it from disk through the "
        "device needs, " +
        format_size(static_cast<uint64_t>(kept_bytes(1) + io)) + "; raise --mem to at least that");
  }
  model.from_disk = true;
  plan_wavefront(model, levels, plan.overlap, &plan);
  plan.host_bytes = kept_bytes(plan.pass_steps);
  return plan;
}

DeviceEngine::DeviceEngine(const Shape& shape, const Scheme& scheme, DType dtype, DevicePlan plan,
                           device::Device device)
    : shape_(shape),
      scheme_(scheme),
      dtype_(dtype),
      plan_(std::move(plan)),
      device_(std::move(device)),
      plane_bytes_(shape.nx * shape.ny * scheme.component_count() *
                   static_cast<int64_t>(dtype_size(dtype))) {}

Result<DeviceEngine> DeviceEngine::create(const Shape& shape, const Scheme& scheme, DType dtype,
                                          const DevicePlan& plan) {
  if (plan.placement == DevicePlacement::kThreeTiers) {
    return invalid_argument("a three-tier device run streams the grid from disk (advance_stream)");
  }
  DG_ASSIGN_OR_RETURN(device::Device d, device::Device::open(plan.device, plan.budget));
  DeviceEngine e(shape, scheme, dtype, plan, std::move(d));
  if (e.host_resident()) {
    for (int c = 0; c < plan.host_copies; ++c) {
      DG_ASSIGN_OR_RETURN(e.host_[c], e.device_.host_memory(plan.grid_bytes));
    }
    DG_ASSIGN_OR_RETURN(
        e.grids_, internal::wavefront_rings(e.device_, plan, scheme.radius_z(), e.plane_bytes_));
    return e;
  }
  e.grids_.resize(2);
  for (device::Buffer& g : e.grids_) {
    DG_ASSIGN_OR_RETURN(g, e.device_.allocate(plan.grid_bytes, "the grid's copy"));
  }
  return e;
}

// Device-resident, into the current copy; the next advance copies the grid to the other on
// the device (the coefficient fields must be equal in both), which is faster than a second
// copy from the host.
Status DeviceEngine::load_plane(int64_t z, const std::byte* packed) {
  if (host_resident()) {
    std::memcpy(host_[cur_].data() + z * plane_bytes_, packed, static_cast<size_t>(plane_bytes_));
    return Status::Ok();
  }
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(device_.write(grids_[cur_], z * plane_bytes_, packed, plane_bytes_));
  coefficients_equal_ = false;
  traffic_.bytes += plane_bytes_;
  traffic_.copy_seconds += seconds_since(t0);
  return Status::Ok();
}

Status DeviceEngine::store_plane(int64_t z, std::byte* packed) {
  if (host_resident()) {
    std::memcpy(packed, host_[cur_].data() + z * plane_bytes_, static_cast<size_t>(plane_bytes_));
    return Status::Ok();
  }
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(device_.read(grids_[cur_], z * plane_bytes_, packed, plane_bytes_));
  traffic_.bytes += plane_bytes_;
  traffic_.copy_seconds += seconds_since(t0);
  return Status::Ok();
}

Result<device::Event> DeviceEngine::start_box_copy(const Block& box, std::byte* packed,
                                                   internal::RectCopy direction) {
  const internal::PlaneFormat format =
      internal::plane_format(shape_, dtype_, scheme_.component_count());
  if (host_resident()) {
    const auto plane_at = [&](int64_t z) { return host_[cur_].data() + z * plane_bytes_; };
    internal::copy_box(plane_at, internal::packed_layout(format), format, box, packed, direction);
    return device::Event();
  }
  // A plane's components lie one after the other, each a slice of the same pitch: the box is
  // the rectangle's rows in (planes x components) slices from plane lo's first.
  const auto value = static_cast<int64_t>(format.value_bytes);
  device::BufferRows rows;
  rows.at = box[kAxisX].lo * value;
  rows.row = box[kAxisY].lo;
  rows.slice = box[kAxisZ].lo * format.components;
  rows.bytes = box.size(kAxisX) * value;
  rows.rows = box.size(kAxisY);
  rows.slices = box.size(kAxisZ) * format.components;
  rows.row_pitch = shape_.nx * value;
  rows.slice_pitch = shape_.nx * shape_.ny * value;
  traffic_.bytes += static_cast<int64_t>(format.rect_bytes(box)) * box.size(kAxisZ);
  const bool in = direction == internal::RectCopy::kFromPacked;
  device::Event copy;
  if (in && mirror_loads_) {  // (the pass waits for it, and times it, at its end)
    DG_ASSIGN_OR_RETURN(copy, device_.write_rows_async(grids_[cur_], rows, packed));
    DG_RETURN_IF_ERROR(device_.compute_after(copy));
    DG_RETURN_IF_ERROR(device_.copy_rows(grids_[cur_], grids_[1 - cur_], rows));
    return device::Event();
  }
  DG_ASSIGN_OR_RETURN(const device::Event launched, device_.compute_done());
  if (in) {
    DG_ASSIGN_OR_RETURN(copy, device_.write_rows_async(grids_[cur_], rows, packed, {launched}));
    DG_RETURN_IF_ERROR(device_.compute_after(copy));
    coefficients_equal_ = false;
  } else {
    DG_ASSIGN_OR_RETURN(copy, device_.read_rows_async(grids_[cur_], rows, packed, {launched}));
  }
  if (!copy.empty()) ++box_copies_;  // (timed on the transfer queues once none is left)
  return copy;
}

Status DeviceEngine::finish_box_copy(const device::Event& copy) {
  if (copy.empty()) return Status::Ok();
  DG_RETURN_IF_ERROR(device_.wait(copy));
  if (--box_copies_ > 0) return Status::Ok();
  DG_ASSIGN_OR_RETURN(const double copying, device_.take_transfer_seconds());
  traffic_.copy_seconds += copying;
  return Status::Ok();
}

Result<int64_t> DeviceEngine::advance(const Boundary& boundary, int64_t steps,
                                      const ProgressFn& progress, ProbeRun probes,
                                      const LateHalos& late) {
  const bool around = computes_around(late, probes, steps);
  if (late.arrive && !around) late.arrive();
  bool arrived = false;
  const LateHalos once{late.below, late.above, [&] {
                         arrived = true;
                         late.arrive();
                       }};
  int64_t done = 0;
  const Status st = host_resident() ? run_host_passes(boundary, steps, progress, probes, &done)
                                    : run_on_device(boundary, steps, progress, probes,
                                                    around ? &once : nullptr, &done);
  // An error before the halos came: they are taken all the same, so that the exchange ends on
  // every rank (the caller agrees on the error after it); and no copy still reads their
  // messages once this returns.
  if (around && !arrived) late.arrive();
  if (!st.ok()) (void)device_.finish();
  DG_RETURN_IF_ERROR(st);
  return done;
}

// Whether the first pass computes around late halos: a device-resident grid with late points,
// and no probe applied on this part in this run (a step's sources go in once the whole step
// is done).
bool DeviceEngine::computes_around(const LateHalos& late, const ProbeRun& probes,
                                   int64_t steps) const {
  if (!late.arrive || host_resident() || steps <= 0) return false;
  const ResolvedProbes* p = probes.probes;
  return p == nullptr || (p->sources.empty() && (p->traces == nullptr || p->receivers.empty()));
}

// The first pass of a device-resident run whose halos are late: the points of each step that
// read none of them (step k's: those more than k times the reach from a late end), then the
// halos put in (into both copies: see mirror_loads_), then the rest of each step. The wait for
// the halos overlaps the first launches. Step k's points near a halo read step k - 1's within
// the reach of them, which step k + 1's first launch, into the same copy, left alone: along
// each axis it computed only points more than k + 1 reaches from a late end.
Status DeviceEngine::compute_around_late_halos(internal::StepLauncher& step, int levels,
                                               int64_t steps_left, const GridPlacement& placement,
                                               const LateHalos& late) {
  std::vector<Block> boxes, inner;  // each step's points, and those that read no late halo
  for (int k = 1; k <= levels; ++k) {
    boxes.push_back(internal::computed_box(shape_, scheme_, placement, steps_left - k));
    inner.push_back(clear_of_late(boxes.back(), late, shape_, scheme_, k));
  }
  const internal::Ring whole[2] = {{&grids_[0], shape_.nz}, {&grids_[1], shape_.nz}};
  const int first = cur_;
  auto in = [&](size_t row) { return whole[(first + row) % 2]; };
  auto out = [&](size_t row) { return whole[(first + row + 1) % 2]; };
  for (size_t row = 0; row < boxes.size(); ++row) {
    if (!has_points(inner[row])) continue;
    DG_RETURN_IF_ERROR(launch_box(device_, step, in(row), out(row), inner[row]));
  }
  mirror_loads_ = true;
  late.arrive();  // (its errors are the caller's, as the exchange's)
  mirror_loads_ = false;
  for (size_t row = 0; row < boxes.size(); ++row) {
    for (const Block& b : around(boxes[row], inner[row])) {
      DG_RETURN_IF_ERROR(launch_box(device_, step, in(row), out(row), b));
    }
  }
  cur_ = (first + levels) % 2;
  return Status::Ok();
}

Status DeviceEngine::run_on_device(const Boundary& boundary, int64_t steps,
                                   const ProgressFn& progress, const ProbeRun& probes,
                                   const LateHalos* late, int64_t* done) {
  const bool copies = sources_on_coefficients(scheme_, probes.probes);
  if (!copies && !coefficients_equal_) {
    DG_RETURN_IF_ERROR(device_.copy(grids_[cur_], grids_[1 - cur_], plan_.grid_bytes));
    coefficients_equal_ = true;
  }
  DG_ASSIGN_OR_RETURN(StepLauncher step,
                      StepLauncher::create(device_, scheme_, dtype_, boundary, copies,
                                           plan_.flush_subnormals, plan_.z_points, shape_));
  if (copies) coefficients_equal_ = false;

  // The probes' entries: every probe after every step of a pass.
  const ResolvedProbes none;
  const ResolvedProbes& p = probes.probes != nullptr ? *probes.probes : none;
  const int n = scheme_.component_count();
  const auto value = static_cast<int64_t>(dtype_size(dtype_));
  const int pass = plan_.pass_steps;
  const std::vector<ProbePoint>* points[2] = {&p.sources, &p.receivers};
  auto entries = [&](size_t k, int levels) {
    ProbeList l;
    for (int row = 0; row < levels && (k == 0 || p.traces != nullptr); ++row) {
      for (size_t i = 0; i < points[k]->size(); ++i) {
        const ProbePoint& q = (*points[k])[i];
        l.add(internal::value_index(shape_, n, q.x, q.y, q.z, q.component), static_cast<int>(i),
              row);
      }
      l.end_launch();
    }
    return l;
  };
  ProbeBuffers b[2];
  const char* kernels[2] = {"dg_add_sources", "dg_record"};
  for (size_t k = 0; k < 2; ++k) {
    const bool used = k == 0 || p.traces != nullptr;  // (receivers: only with traces)
    const auto capacity = used ? static_cast<int64_t>(points[k]->size()) * pass : 0;
    DG_ASSIGN_OR_RETURN(
        b[k], internal::probe_buffers(device_, step.source(), kernels[k], capacity, value));
  }

  const internal::Ring whole[2] = {{&grids_[0], shape_.nz}, {&grids_[1], shape_.nz}};
  while (*done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(pass, steps - *done));
    const int64_t first = probes.step + *done + 1;  // the step the pass computes first
    for (size_t k = 0; k < 2; ++k) DG_RETURN_IF_ERROR(b[k].use(device_, entries(k, levels)));
    DG_RETURN_IF_ERROR(
        internal::upload_source_values(device_, b[0], p, first, dtype_, &traffic_.bytes));
    if (late != nullptr) {  // (no probes)
      DG_RETURN_IF_ERROR(
          compute_around_late_halos(step, levels, steps - *done, probes.placement, *late));
    } else {
      for (int row = 0; row < levels; ++row) {
        const Block box =
            internal::computed_box(shape_, scheme_, probes.placement, steps - (*done + row + 1));
        DG_RETURN_IF_ERROR(launch_box(device_, step, whole[cur_], whole[1 - cur_], box));
        cur_ = 1 - cur_;
        DG_RETURN_IF_ERROR(internal::apply_probes(device_, grids_[cur_], static_cast<size_t>(row),
                                                  {&b[0], &b[1]}));
      }
    }
    DG_RETURN_IF_ERROR(
        internal::collect_receivers(device_, b[1], p, first, dtype_, &traffic_.bytes));
    DG_RETURN_IF_ERROR(device_.finish());
    if (late != nullptr) {  // (the halos' copies up)
      DG_ASSIGN_OR_RETURN(const double copying, device_.take_transfer_seconds());
      traffic_.copy_seconds += copying;
      late = nullptr;
    }
    *done += levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
