#include "engines/device_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/stopwatch.h"
#include "engines/device_launch.h"

namespace deepgrid {
namespace {

using internal::computed_xy;
using internal::ProbeBuffers;
using internal::seconds_since;
using internal::sources_on_coefficients;
using internal::StepLauncher;

// Host-resident slabs of `slab` planes with `levels` steps per pass: the points a pass
// computes per point it advances (a slab's step computes rz planes fewer at each cut face
// than the step before, down to the slab's own planes).
double slab_redundancy(int64_t nz, int64_t slab, int levels, int64_t rz, bool periodic) {
  double computed = 0;
  for (int64_t z0 = 0; z0 < nz; z0 += slab) {
    const int64_t z1 = std::min(nz, z0 + slab);
    for (int row = 0; row < levels; ++row) {
      const int64_t extra = int64_t{levels - 1 - row} * rz;
      const int64_t lo = periodic ? z0 - extra : std::max<int64_t>(0, z0 - extra);
      const int64_t hi = periodic ? z1 + extra : std::min(nz, z1 + extra);
      computed += static_cast<double>(hi - lo);
    }
  }
  return computed / (static_cast<double>(nz) * levels);
}

// Slabs: the slabs and pass depth (up to `max_levels`) that fit `plan.budget` in `buffers`
// slab buffers and cost least per step in a model of copies and kernels: a point's copy one
// way costs 24 steps of its update on GPUs (PCIe's ~50 GB/s against HBM's ~3 TB/s) and 1 on
// CPU devices, where both are memory copies; with three buffers a GPU's copies run beside its
// kernels (the longer of the two counts), a CPU device's take the same cores (both count).
// The cost per step, or infinity when not even one step fits.
double plan_slabs(const Shape& shape, const Scheme& scheme, int64_t plane_bytes,
                  int64_t probe_points, int max_levels, bool periodic, DType dtype, int buffers,
                  DevicePlan* plan) {
  const double copy_cost = plan->device.gpu ? 24 : 1;
  const bool overlapped = buffers >= 3 && plan->device.gpu;
  const int64_t rz = scheme.radius_z();
  const auto value = static_cast<int64_t>(dtype_size(dtype));
  // Periodic slabs may hold a source's plane more than once.
  const int64_t copies = periodic ? plan->budget / (buffers * plane_bytes) / shape.nz + 2 : 1;
  double best = std::numeric_limits<double>::infinity();
  plan->slab_planes = 0;
  for (int levels = 1; levels <= max_levels; ++levels) {
    const int64_t halo = levels * rz;
    const int64_t probes = internal::probe_buffer_bytes(probe_points * copies, levels, value);
    const int64_t fit = (plan->budget - probes) / (buffers * plane_bytes) - 2 * halo;
    if (fit < 1) break;
    const int64_t slabs = (shape.nz + std::min(fit, shape.nz) - 1) / std::min(fit, shape.nz);
    const int64_t slab = (shape.nz + slabs - 1) / slabs;
    const double redundancy = slab_redundancy(shape.nz, slab, levels, rz, periodic);
    const double up = static_cast<double>(slabs * (slab + 2 * halo)) / shape.nz;
    const double copy = copy_cost * (up + 1), steps = levels * redundancy;
    const double cost = (overlapped ? std::max(copy, steps) : copy + steps) / levels;
    if (cost >= best) continue;
    best = cost;
    plan->pass_steps = levels;
    plan->slab_planes = slab;
    plan->slabs = slabs;
    plan->redundancy = redundancy;
    plan->buffer_planes = periodic ? slab + 2 * halo : std::min(shape.nz, slab + 2 * halo);
    plan->slab_buffers = buffers;
    plan->device_bytes = buffers * plan->buffer_planes * plane_bytes + probes;
  }
  return best;
}

// Slabs in two buffers or three (`overlap`; none: the cheaper in plan_slabs' model, two on a
// tie). False when neither fits.
bool plan_slab_buffers(const Shape& shape, const Scheme& scheme, int64_t plane_bytes,
                       int64_t probe_points, int max_levels, bool periodic, DType dtype,
                       std::optional<bool> overlap, DevicePlan* plan) {
  DevicePlan three = *plan;
  const double two_cost = overlap == true ? std::numeric_limits<double>::infinity()
                                          : plan_slabs(shape, scheme, plane_bytes, probe_points,
                                                       max_levels, periodic, dtype, 2, plan);
  const double three_cost = overlap == false ? std::numeric_limits<double>::infinity()
                                             : plan_slabs(shape, scheme, plane_bytes, probe_points,
                                                          max_levels, periodic, dtype, 3, &three);
  if (three_cost < two_cost) *plan = three;
  return std::min(two_cost, three_cost) < std::numeric_limits<double>::infinity();
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
  plan.flush_subnormals = options.flush_subnormals;
  // Radius-1 updates run faster with 4 points along z per work item (on an H200, 7pt: f32
  // 1.32x, f64 1.12x), wider ones slower (wave8: 0.9x): docs/performance.md.
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

  // Host-resident: the grid through the device in slabs.
  const int64_t plane_bytes = shape.nx * shape.ny * scheme.component_count() * value;
  const bool periodic = options.boundary == Boundary::Kind::kPeriodic;
  plan.placement = DevicePlacement::kHostResident;
  if (!plan_slab_buffers(shape, scheme, plane_bytes, probe_points, plan.pass_steps, periodic, dtype,
                         options.overlap, &plan)) {
    const int buffers = options.overlap == true ? 3 : 2;
    const int64_t minimum =
        buffers * (1 + 2 * scheme.radius_z()) * plane_bytes +
        internal::probe_buffer_bytes(probe_points * (periodic ? 3 : 1), 1, value);
    return invalid_argument(
        "the device budget is " + format_size(static_cast<uint64_t>(plan.budget)) +
        (options.device_mem > 0 ? " (--device-mem)" : " (the device's memory less 1/16)") +
        ", less than " + (buffers == 3 ? "three" : "two") + " slabs of " +
        std::to_string(1 + 2 * scheme.radius_z()) +
        " planes each need to stream the grid through it; raise --device-mem to at least " +
        format_size(static_cast<uint64_t>(minimum)) +
        " if the device has it, or run on the CPU (--method incore or stream)");
  }
  plan.host_bytes = 2 * plan.grid_bytes;
  if (options.host_mem == 0 || plan.host_bytes + options.host_transfer_bytes <= options.host_mem) {
    return plan;
  }
  // Three tiers: kept between slabs, the next slab's halo below it and, periodic, the planes
  // the sweep reads again at its other end; the depth cut to what --mem holds of them.
  plan.placement = DevicePlacement::kThreeTiers;
  auto kept_bytes = [&](int levels) {
    const int64_t halo = int64_t{levels} * scheme.radius_z();
    return (2 * halo + (periodic ? std::min(shape.nz, 2 * halo) : 0)) * plane_bytes;
  };
  const int64_t io = kMinThreeTierIoBuffers * options.io_plane_bytes;
  int levels = plan.pass_steps;
  while (levels > 0 && kept_bytes(levels) + io > options.host_mem) --levels;
  if (levels == 0) {
    return invalid_argument(
        "--mem " + format_size(static_cast<uint64_t>(options.host_mem)) +
        " holds neither the grid's two copies nor what streaming it from disk through the "
        "device needs, " +
        format_size(static_cast<uint64_t>(kept_bytes(1) + io)) + "; raise --mem to at least that");
  }
  if (levels < plan.pass_steps) {
    plan_slabs(shape, scheme, plane_bytes, probe_points, levels, periodic, dtype, plan.slab_buffers,
               &plan);
  }
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
    for (std::vector<std::byte>& g : e.host_) g.resize(static_cast<size_t>(plan.grid_bytes));
  }
  const int64_t held = e.host_resident() ? plan.buffer_planes * e.plane_bytes_ : plan.grid_bytes;
  e.grids_.resize(e.host_resident() ? static_cast<size_t>(plan.slab_buffers) : 2);
  for (device::Buffer& g : e.grids_) {
    DG_ASSIGN_OR_RETURN(
        g, e.device_.allocate(held, e.host_resident() ? "a slab's buffer" : "the grid's copy"));
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

Result<int64_t> DeviceEngine::advance(const Boundary& boundary, int64_t steps,
                                      const ProgressFn& progress, ProbeRun probes,
                                      const LateHalos& late) {
  if (late.arrive) late.arrive();
  int64_t done = 0;
  DG_RETURN_IF_ERROR(host_resident() ? run_in_slabs(boundary, steps, progress, probes, &done)
                                     : run_on_device(boundary, steps, progress, probes, &done));
  return done;
}

Status DeviceEngine::run_on_device(const Boundary& boundary, int64_t steps,
                                   const ProgressFn& progress, const ProbeRun& probes,
                                   int64_t* done) {
  const bool copies = sources_on_coefficients(scheme_, probes.probes);
  if (!copies && !coefficients_equal_) {
    DG_RETURN_IF_ERROR(device_.copy(grids_[cur_], grids_[1 - cur_], plan_.grid_bytes));
    coefficients_equal_ = true;
  }
  DG_ASSIGN_OR_RETURN(StepLauncher step,
                      StepLauncher::create(device_, scheme_, dtype_, boundary, copies,
                                           plan_.flush_subnormals, plan_.z_points, shape_));
  if (copies) coefficients_equal_ = false;

  // The probes' indices, and a pass's source values and receivers' values.
  const ResolvedProbes none;
  const ResolvedProbes& p = probes.probes != nullptr ? *probes.probes : none;
  const int n = scheme_.component_count();
  const auto value = static_cast<int64_t>(dtype_size(dtype_));
  const int pass = plan_.pass_steps;
  std::vector<int64_t> at[2];
  std::vector<int> ids[2];
  const std::vector<ProbePoint>* points[2] = {&p.sources, &p.receivers};
  for (size_t k = 0; k < 2; ++k) {
    if (k == 1 && p.traces == nullptr) break;
    for (const ProbePoint& q : *points[k]) {
      ids[k].push_back(static_cast<int>(at[k].size()));
      at[k].push_back(internal::value_index(shape_, n, q.x, q.y, q.z, q.component));
    }
  }
  DG_ASSIGN_OR_RETURN(ProbeBuffers sources,
                      internal::probe_buffers(device_, step.source(), "dg_add_sources",
                                              static_cast<int>(at[0].size()), pass, value));
  DG_ASSIGN_OR_RETURN(ProbeBuffers receivers,
                      internal::probe_buffers(device_, step.source(), "dg_record",
                                              static_cast<int>(at[1].size()), pass, value));
  DG_RETURN_IF_ERROR(sources.point_at(device_, at[0]));
  DG_RETURN_IF_ERROR(receivers.point_at(device_, at[1]));

  while (*done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(pass, steps - *done));
    const int64_t first = probes.step + *done + 1;  // the step the pass computes first
    DG_RETURN_IF_ERROR(internal::upload_source_values(device_, sources, p, ids[0], first, levels,
                                                      dtype_, &traffic_.bytes));
    for (int row = 0; row < levels; ++row) {
      const int64_t remaining = steps - (*done + row + 1);
      const device::Range xy = computed_xy(shape_, scheme_, probes.placement, remaining);
      const int64_t rz = scheme_.radius_z();
      const int64_t z0 = std::max<int64_t>(0, probes.placement.needed_lo[2] - remaining * rz);
      const int64_t z1 = std::min(shape_.nz, probes.placement.needed_hi[2] + remaining * rz);
      DG_RETURN_IF_ERROR(step.launch(device_, grids_[cur_], grids_[1 - cur_], xy, {{z0, z1}}));
      cur_ = 1 - cur_;
      DG_RETURN_IF_ERROR(
          internal::apply_probes(device_, grids_[cur_], row, {&sources, &receivers}));
    }
    DG_RETURN_IF_ERROR(internal::collect_receivers(device_, receivers, p, ids[1], first, levels,
                                                   dtype_, &traffic_.bytes));
    DG_RETURN_IF_ERROR(device_.finish());
    *done += levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
