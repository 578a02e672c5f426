#include "engines/device_launch.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace deepgrid::internal {
namespace {

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

// A pass's values of some probes on the host: `levels` rows of one value per probe.
struct PassValues {
  int64_t value, count;
  std::vector<std::byte> host;
  PassValues(const std::vector<int>& ids, int levels, DType dtype)
      : value(static_cast<int64_t>(dtype_size(dtype))),
        count(static_cast<int64_t>(ids.size())),
        host(static_cast<size_t>(levels * count * value)) {}
  int64_t bytes() const { return static_cast<int64_t>(host.size()); }
  std::byte* at(int row, size_t i) {
    return host.data() + (row * count + static_cast<int64_t>(i)) * value;
  }
};

}  // namespace

Status set_index(device::Kernel& k, int i, int64_t v, bool wide) {
  return wide ? k.set(i, v) : k.set(i, static_cast<int32_t>(v));
}

bool sources_on_coefficients(const Scheme& scheme, const ResolvedProbes* probes) {
  if (probes == nullptr) return false;
  for (const ProbePoint& q : probes->sources) {
    if (scheme.is_coefficient(q.component)) return true;
  }
  return false;
}

// In rows of 64 along x (coalesced on GPUs, vectorised on CPUs), 4 rows per group.
device::Range computed_xy(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                          int64_t remaining) {
  const int64_t n[2] = {s.nx, s.ny};
  const int64_t reach[2] = {scheme.radius_x(), scheme.radius_y()};
  device::Range r;
  for (size_t a = 0; a < 2; ++a) {
    const int64_t lo = std::max<int64_t>(0, at.needed_lo[a] - remaining * reach[a]);
    const int64_t hi = std::min<int64_t>(n[a], at.needed_hi[a] + remaining * reach[a]);
    r.offset[a] = lo;
    r.size[a] = std::max<int64_t>(0, hi - lo);
  }
  r.group = {std::min<int64_t>(64, std::max<int64_t>(r.size[0], 1)), 4, 1};
  if (r.size[1] < 4) r.group[1] = 1;
  return r;
}

Status ProbeBuffers::point_at(device::Device& d, const std::vector<int64_t>& indices) {
  count = static_cast<int>(indices.size());
  if (count == 0) return Status::Ok();
  DG_RETURN_IF_ERROR(d.write(at, 0, indices.data(), 8 * int64_t{count}));
  return kernel.set(3, static_cast<int32_t>(count));
}

Result<ProbeBuffers> probe_buffers(device::Device& d, const DeviceSource& src, const char* kernel,
                                   int capacity, int pass, int64_t value_bytes) {
  ProbeBuffers b;
  b.capacity = capacity;
  if (capacity == 0) return b;
  DG_ASSIGN_OR_RETURN(b.at, d.allocate(8 * int64_t{capacity}, "the probes' indices"));
  DG_ASSIGN_OR_RETURN(b.values, d.allocate(pass * capacity * value_bytes, "the probes' values"));
  DG_ASSIGN_OR_RETURN(b.kernel, d.kernel(src.text, src.options, kernel));
  DG_RETURN_IF_ERROR(b.kernel.set(1, b.at));
  DG_RETURN_IF_ERROR(b.kernel.set(2, b.values));
  return b;
}

Result<StepLauncher> StepLauncher::create(device::Device& d, const Scheme& scheme, DType dtype,
                                          const Boundary& boundary, bool copies_coefficients,
                                          bool flush_subnormals, int z_points, const Shape& s) {
  StepLauncher l;
  l.wide_ = s.points() * scheme.component_count() >= (int64_t{1} << 31);
  l.z_points_ = z_points;
  l.src_ = device_step_source(scheme, dtype, boundary.kind, copies_coefficients, flush_subnormals,
                              l.wide_, z_points);
  DG_ASSIGN_OR_RETURN(l.step_, d.kernel(l.src_.text, l.src_.options, "dg_step"));
  DG_RETURN_IF_ERROR(set_index(l.step_, 2, s.nx, l.wide_));
  DG_RETURN_IF_ERROR(set_index(l.step_, 3, s.ny, l.wide_));
  DG_RETURN_IF_ERROR(set_index(l.step_, 4, s.nz, l.wide_));
  DG_RETURN_IF_ERROR(dtype == DType::kF32 ? l.step_.set(5, static_cast<float>(boundary.value))
                                          : l.step_.set(5, boundary.value));
  return l;
}

Status StepLauncher::launch(device::Device& d, const device::Buffer& in, const device::Buffer& out,
                            const device::Range& xy,
                            const std::vector<std::pair<int64_t, int64_t>>& z) {
  DG_RETURN_IF_ERROR(step_.set(0, in));
  DG_RETURN_IF_ERROR(step_.set(1, out));
  for (auto [begin, end] : z) {
    if (end <= begin) continue;
    device::Range r = xy;
    DG_RETURN_IF_ERROR(set_index(step_, 6, r.offset[0] + r.size[0], wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 7, r.offset[1] + r.size[1], wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 8, end, wide_));
    // Along z, work item j computes z_points points from z_begin + j * z_points.
    DG_RETURN_IF_ERROR(set_index(step_, 9, begin, wide_));
    r.offset[2] = 0;
    r.size[2] = (end - begin + z_points_ - 1) / z_points_;
    r.group[2] = 1;
    DG_RETURN_IF_ERROR(d.launch(step_, r));
  }
  return Status::Ok();
}

Status upload_source_values(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p,
                            const std::vector<int>& ids, int64_t first, int levels, DType dtype,
                            int64_t* bytes) {
  if (ids.empty()) return Status::Ok();
  PassValues v(ids, levels, dtype);
  for (int row = 0; row < levels; ++row) {
    for (size_t i = 0; i < ids.size(); ++i) {
      put_value(dtype, p.source_specs[static_cast<size_t>(ids[i])]->value(first + row),
                v.at(row, i));
    }
  }
  *bytes += v.bytes();
  return d.write(b.values, 0, v.host.data(), v.bytes());
}

Status collect_receivers(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p,
                         const std::vector<int>& ids, int64_t first, int levels, DType dtype,
                         int64_t* bytes) {
  if (ids.empty()) return Status::Ok();
  PassValues v(ids, levels, dtype);
  DG_RETURN_IF_ERROR(d.read(b.values, 0, v.host.data(), v.bytes()));
  *bytes += v.bytes();
  for (int row = 0; row < levels; ++row) {
    if (!p.traces->holds(first + row)) continue;
    for (size_t r = 0; r < ids.size(); ++r) {
      *p.traces->at(first + row, ids[r]) = get_value(dtype, v.at(row, r));
    }
  }
  return Status::Ok();
}

Status apply_probes(device::Device& d, const device::Buffer& grid, int row,
                    std::initializer_list<ProbeBuffers*> probes) {
  for (ProbeBuffers* b : probes) {
    if (b->count == 0) continue;
    DG_RETURN_IF_ERROR(b->kernel.set(0, grid));
    DG_RETURN_IF_ERROR(b->kernel.set(4, static_cast<int32_t>(row)));
    DG_RETURN_IF_ERROR(d.launch(b->kernel, device::Range{}));
  }
  return Status::Ok();
}

}  // namespace deepgrid::internal
