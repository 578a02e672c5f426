#include "engines/device_engine.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/stopwatch.h"
#include "kernels/device_source.h"

namespace deepgrid {
namespace {

using internal::seconds_since;

// Components that a source changes and that the step would otherwise not write (coefficient
// fields): the step then copies them, as for any carried component.
bool sources_on_coefficients(const Scheme& scheme, const ResolvedProbes* probes) {
  if (probes == nullptr) return false;
  for (const ProbePoint& q : probes->sources) {
    if (scheme.is_coefficient(q.component)) return true;
  }
  return false;
}

// The values' offset of component c of point (x, y, z) in the packed layout.
int64_t value_index(const Shape& s, int components, const ProbePoint& q) {
  return ((q.z * components + q.component) * s.ny + q.y) * s.nx + q.x;
}

// The points step `remaining` steps before the run's end computes: those within `remaining`
// times the reach of the needed box (every point by default).
device::Range computed_range(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                             int64_t remaining) {
  const int64_t n[3] = {s.nx, s.ny, s.nz};
  const int64_t reach[3] = {scheme.radius_x(), scheme.radius_y(), scheme.radius_z()};
  device::Range r;
  for (size_t a = 0; a < 3; ++a) {
    const int64_t lo = std::max<int64_t>(0, at.needed_lo[a] - remaining * reach[a]);
    const int64_t hi = std::min<int64_t>(n[a], at.needed_hi[a] + remaining * reach[a]);
    r.offset[a] = lo;
    r.size[a] = std::max<int64_t>(0, hi - lo);
  }
  // Rows of 64 along x (coalesced on GPUs, vectorised on CPUs), 4 rows per group.
  r.group = {std::min<int64_t>(64, std::max<int64_t>(r.size[0], 1)), 4, 1};
  if (r.size[1] < 4) r.group[1] = 1;
  return r;
}

// An index argument of the kernels: `long` when the grid needs 64-bit indices, else `int`.
Status set_index(device::Kernel& k, int i, int64_t v, bool wide) {
  return wide ? k.set(i, v) : k.set(i, static_cast<int32_t>(v));
}

// dg_step with the arguments every launch shares: the grid's extents and dirichlet's value.
Result<device::Kernel> step_kernel(device::Device& d, const internal::DeviceSource& src,
                                   const Shape& s, DType dtype, const Boundary& boundary,
                                   bool wide) {
  DG_ASSIGN_OR_RETURN(device::Kernel step, d.kernel(src.text, src.options, "dg_step"));
  DG_RETURN_IF_ERROR(set_index(step, 2, s.nx, wide));
  DG_RETURN_IF_ERROR(set_index(step, 3, s.ny, wide));
  DG_RETURN_IF_ERROR(set_index(step, 4, s.nz, wide));
  DG_RETURN_IF_ERROR(dtype == DType::kF32 ? step.set(5, static_cast<float>(boundary.value))
                                          : step.set(5, boundary.value));
  return step;
}

// A probe kernel (dg_add_sources or dg_record) with its points' value indices and room for a
// pass's values on the device.
struct ProbeBuffers {
  device::Kernel kernel;
  device::Buffer at, values;
  int count = 0;
};

Result<ProbeBuffers> probe_buffers(device::Device& d, const internal::DeviceSource& src,
                                   const char* kernel, const std::vector<ProbePoint>& points,
                                   const Shape& shape, int components, int pass, int64_t value) {
  ProbeBuffers b;
  b.count = static_cast<int>(points.size());
  if (b.count == 0) return b;
  std::vector<int64_t> at;
  for (const ProbePoint& q : points) at.push_back(value_index(shape, components, q));
  DG_ASSIGN_OR_RETURN(b.at, d.allocate(8 * b.count, "the probes' indices"));
  DG_ASSIGN_OR_RETURN(b.values, d.allocate(pass * b.count * value, "the probes' values"));
  DG_RETURN_IF_ERROR(d.write(b.at, 0, at.data(), 8 * b.count));
  DG_ASSIGN_OR_RETURN(b.kernel, d.kernel(src.text, src.options, kernel));
  DG_RETURN_IF_ERROR(b.kernel.set(1, b.at));
  DG_RETURN_IF_ERROR(b.kernel.set(2, b.values));
  DG_RETURN_IF_ERROR(b.kernel.set(3, static_cast<int32_t>(b.count)));
  return b;
}

// A value of `dtype` from a double (rounded as static_cast does) and back.
void put_value(DType dtype, double v, std::byte* to) {
  if (dtype == DType::kF32) {
    const auto f = static_cast<float>(v);
    std::memcpy(to, &f, sizeof f);
  } else {
    std::memcpy(to, &v, sizeof v);
  }
}
double get_value(DType dtype, const std::byte* from) {
  if (dtype == DType::kF32) {
    float f = 0;
    std::memcpy(&f, from, sizeof f);
    return f;
  }
  double v = 0;
  std::memcpy(&v, from, sizeof v);
  return v;
}

}  // namespace

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
  const auto sources = static_cast<int64_t>(probes.sources.size());
  const auto receivers = static_cast<int64_t>(probes.receivers.size());
  const int64_t probe_bytes =
      (sources + receivers) * (8 + plan.pass_steps * value);  // indices, a pass's values
  plan.device_bytes = 2 * plan.grid_bytes + probe_bytes;
  if (plan.device_bytes > plan.budget) {
    return invalid_argument(
        "the device method keeps two copies of the grid on the device, " +
        format_size(static_cast<uint64_t>(plan.device_bytes)) + ", but the device budget is " +
        format_size(static_cast<uint64_t>(plan.budget)) +
        (options.device_mem > 0 ? " (--device-mem)" : " (the device's memory less 1/16)") +
        "; raise --device-mem to at least " +
        format_size(static_cast<uint64_t>(plan.device_bytes)) +
        " if the device has it, or run on the CPU (--method incore or stream): grids larger than "
        "the device are not streamed through it yet");
  }
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
  DG_ASSIGN_OR_RETURN(device::Device d, device::Device::open(plan.device, plan.budget));
  DeviceEngine e(shape, scheme, dtype, plan, std::move(d));
  for (device::Buffer& g : e.grids_) {
    DG_ASSIGN_OR_RETURN(g, e.device_.allocate(plan.grid_bytes, "the grid's copy"));
  }
  return e;
}

// Into the current copy; the next advance copies the grid to the other on the device (the
// coefficient fields must be equal in both), which is faster than a second copy from the host.
Status DeviceEngine::load_plane(int64_t z, const std::byte* packed) {
  const auto t0 = std::chrono::steady_clock::now();
  DG_RETURN_IF_ERROR(device_.write(grids_[cur_], z * plane_bytes_, packed, plane_bytes_));
  coefficients_equal_ = false;
  traffic_.bytes += plane_bytes_;
  traffic_.copy_seconds += seconds_since(t0);
  return Status::Ok();
}

Status DeviceEngine::store_plane(int64_t z, std::byte* packed) {
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
  DG_RETURN_IF_ERROR(run_steps(boundary, steps, progress, probes, &done));
  return done;
}

Status DeviceEngine::run_steps(const Boundary& boundary, int64_t steps, const ProgressFn& progress,
                               const ProbeRun& probes, int64_t* done) {
  const bool copies = sources_on_coefficients(scheme_, probes.probes);
  if (!copies && !coefficients_equal_) {
    DG_RETURN_IF_ERROR(device_.copy(grids_[cur_], grids_[1 - cur_], plan_.grid_bytes));
    coefficients_equal_ = true;
  }
  const int n = scheme_.component_count();
  const bool wide = shape_.points() * n >= (int64_t{1} << 31);
  const internal::DeviceSource src = internal::device_step_source(
      scheme_, dtype_, boundary.kind, copies, plan_.flush_subnormals, wide, plan_.z_points);
  DG_ASSIGN_OR_RETURN(device::Kernel step,
                      step_kernel(device_, src, shape_, dtype_, boundary, wide));
  if (copies) coefficients_equal_ = false;

  // The probes' indices, and a pass's source values and receivers' values.
  const ResolvedProbes none;
  const ResolvedProbes& p = probes.probes != nullptr ? *probes.probes : none;
  const auto value = static_cast<int64_t>(dtype_size(dtype_));
  const int pass = plan_.pass_steps;
  DG_ASSIGN_OR_RETURN(ProbeBuffers sources, probe_buffers(device_, src, "dg_add_sources", p.sources,
                                                          shape_, n, pass, value));
  DG_ASSIGN_OR_RETURN(ProbeBuffers receivers,
                      probe_buffers(device_, src, "dg_record",
                                    p.traces != nullptr ? p.receivers : std::vector<ProbePoint>{},
                                    shape_, n, pass, value));
  std::vector<std::byte> host(
      static_cast<size_t>(pass * std::max(sources.count, receivers.count) * value));

  while (*done < steps) {
    const int levels = static_cast<int>(std::min<int64_t>(pass, steps - *done));
    const int64_t first = probes.step + *done + 1;  // the step the pass computes first
    if (sources.count > 0) {
      for (int row = 0; row < levels; ++row) {
        for (int i = 0; i < sources.count; ++i) {
          put_value(dtype_, p.source_specs[static_cast<size_t>(i)]->value(first + row),
                    host.data() + (row * sources.count + i) * value);
        }
      }
      DG_RETURN_IF_ERROR(
          device_.write(sources.values, 0, host.data(), levels * sources.count * value));
      traffic_.bytes += levels * sources.count * value;
    }
    for (int row = 0; row < levels; ++row) {
      DG_RETURN_IF_ERROR(step.set(0, grids_[cur_]));
      DG_RETURN_IF_ERROR(step.set(1, grids_[1 - cur_]));
      const int64_t remaining = steps - (*done + row + 1);
      device::Range range = computed_range(shape_, scheme_, probes.placement, remaining);
      for (size_t a = 0; a < 3; ++a) {
        DG_RETURN_IF_ERROR(
            set_index(step, 6 + static_cast<int>(a), range.offset[a] + range.size[a], wide));
      }
      // Along z, work item j computes z_points points from z_begin + j * z_points.
      DG_RETURN_IF_ERROR(set_index(step, 9, range.offset[2], wide));
      range.offset[2] = 0;
      range.size[2] = (range.size[2] + plan_.z_points - 1) / plan_.z_points;
      DG_RETURN_IF_ERROR(device_.launch(step, range));
      cur_ = 1 - cur_;
      for (ProbeBuffers* b : {&sources, &receivers}) {
        if (b->count == 0) continue;
        DG_RETURN_IF_ERROR(b->kernel.set(0, grids_[cur_]));
        DG_RETURN_IF_ERROR(b->kernel.set(4, static_cast<int32_t>(row)));
        DG_RETURN_IF_ERROR(device_.launch(b->kernel, device::Range{}));
      }
    }
    if (receivers.count > 0) {
      DG_RETURN_IF_ERROR(
          device_.read(receivers.values, 0, host.data(), levels * receivers.count * value));
      traffic_.bytes += levels * receivers.count * value;
      for (int row = 0; row < levels; ++row) {
        if (!p.traces->holds(first + row)) continue;
        for (int r = 0; r < receivers.count; ++r) {
          *p.traces->at(first + row, r) =
              get_value(dtype_, host.data() + (row * receivers.count + r) * value);
        }
      }
    }
    DG_RETURN_IF_ERROR(device_.finish());
    *done += levels;
    if (progress && !progress(*done, steps)) break;
  }
  return Status::Ok();
}

}  // namespace deepgrid
