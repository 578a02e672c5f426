#include "engines/device_launch.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

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

// A list's values on the host: one per entry.
struct EntryValues {
  int64_t value;
  std::vector<std::byte> host;
  EntryValues(const ProbeList& l, DType dtype)
      : value(static_cast<int64_t>(dtype_size(dtype))),
        host(l.at.size() * static_cast<size_t>(value)) {}
  int64_t bytes() const { return static_cast<int64_t>(host.size()); }
  std::byte* at(size_t i) { return host.data() + static_cast<int64_t>(i) * value; }
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

// In rows of 64 along x (coalesced on GPUs, vectorised on CPUs), 4 rows per group (1 for boxes
// of fewer rows), whatever the box's width: the kernel skips the items past the box's end. A CPU
// device such as PoCL's compiles a kernel once per work-group size, so groups as wide as narrow
// boxes compiled it again for every width of part, band or box (1.5-2 s each on a 2-core VM;
// the release test suite left 147 compiled variants of 40 programs in PoCL's cache).
device::Range xy_range(const Block& box) {
  device::Range r;
  for (int a : {kAxisX, kAxisY}) {
    r.offset[static_cast<size_t>(a)] = box[a].lo;
    r.size[static_cast<size_t>(a)] = std::max<int64_t>(0, box.size(a));
  }
  r.group = {64, 4, 1};
  if (r.size[1] < 4) r.group[1] = 1;
  return r;
}

Block computed_box(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                   int64_t remaining) {
  const int64_t n[3] = {s.nx, s.ny, s.nz};
  const int64_t reach[3] = {scheme.radius_x(), scheme.radius_y(), scheme.radius_z()};
  Block box;
  for (int a : {kAxisX, kAxisY, kAxisZ}) {
    const auto i = static_cast<size_t>(a);
    box[a] = {std::max<int64_t>(0, at.needed_lo[i] - remaining * reach[i]),
              std::min<int64_t>(n[i], at.needed_hi[i] + remaining * reach[i])};
  }
  return box;
}

device::Range computed_xy(const Shape& s, const Scheme& scheme, const GridPlacement& at,
                          int64_t remaining) {
  return xy_range(computed_box(s, scheme, at, remaining));
}

Status ProbeBuffers::use(device::Device& d, ProbeList l) {
  list = std::move(l);
  if (list.at.empty()) return Status::Ok();
  if (static_cast<int64_t>(list.at.size()) > capacity) {
    return Status(ErrorCode::kResource,
                  "a pass's probe entries (" + std::to_string(list.at.size()) +
                      ") exceed the room planned for them (" + std::to_string(capacity) + ")");
  }
  return d.write(at, 0, list.at.data(), 8 * static_cast<int64_t>(list.at.size()));
}

Result<ProbeBuffers> probe_buffers(device::Device& d, const DeviceSource& src, const char* kernel,
                                   int64_t capacity, int64_t value_bytes) {
  ProbeBuffers b;
  b.capacity = capacity;
  if (capacity == 0) return b;
  DG_ASSIGN_OR_RETURN(b.at, d.allocate(8 * capacity, "the probes' indices"));
  DG_ASSIGN_OR_RETURN(b.values, d.allocate(capacity * value_bytes, "the probes' values"));
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
  l.src_ = device_step_source(scheme, dtype, flush_subnormals, l.wide_, z_points);
  DG_ASSIGN_OR_RETURN(l.step_, d.kernel(l.src_.text, l.src_.options, "dg_step"));
  DG_RETURN_IF_ERROR(set_index(l.step_, 2, s.nx, l.wide_));
  DG_RETURN_IF_ERROR(set_index(l.step_, 3, s.ny, l.wide_));
  DG_RETURN_IF_ERROR(set_index(l.step_, 4, s.nz, l.wide_));
  DG_RETURN_IF_ERROR(dtype == DType::kF32 ? l.step_.set(5, static_cast<float>(boundary.value))
                                          : l.step_.set(5, boundary.value));
  DG_RETURN_IF_ERROR(l.step_.set(14, static_cast<int32_t>(device_boundary_code(boundary.kind))));
  DG_RETURN_IF_ERROR(l.step_.set(15, static_cast<int32_t>(copies_coefficients ? 1 : 0)));
  return l;
}

Status StepLauncher::launch(device::Device& d, const Ring& in, const Ring& out,
                            const device::Range& xy,
                            const std::vector<std::pair<int64_t, int64_t>>& z) {
  DG_RETURN_IF_ERROR(step_.set(0, *in.buffer));
  DG_RETURN_IF_ERROR(step_.set(1, *out.buffer));
  DG_RETURN_IF_ERROR(set_index(step_, 10, in.planes, wide_));
  DG_RETURN_IF_ERROR(set_index(step_, 11, out.planes, wide_));
  for (auto [begin, end] : z) {
    if (end <= begin) continue;
    device::Range r = xy;
    DG_RETURN_IF_ERROR(set_index(step_, 6, r.offset[0] + r.size[0], wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 7, r.offset[1] + r.size[1], wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 8, end, wide_));
    // Along z, work item j computes z_points points from z_begin + j * z_points.
    DG_RETURN_IF_ERROR(set_index(step_, 9, begin, wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 12, begin % in.planes, wide_));
    DG_RETURN_IF_ERROR(set_index(step_, 13, begin % out.planes, wide_));
    r.offset[2] = 0;
    r.size[2] = (end - begin + z_points_ - 1) / z_points_;
    r.group[2] = 1;
    DG_RETURN_IF_ERROR(d.launch(step_, r));
  }
  return Status::Ok();
}

Status upload_source_values(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p,
                            int64_t first, DType dtype, int64_t* bytes) {
  if (b.list.at.empty()) return Status::Ok();
  EntryValues v(b.list, dtype);
  for (size_t i = 0; i < b.list.at.size(); ++i) {
    const auto id = static_cast<size_t>(b.list.id[i]);
    put_value(dtype, p.source_specs[id]->value(first + b.list.row[i]), v.at(i));
  }
  *bytes += v.bytes();
  return d.write(b.values, 0, v.host.data(), v.bytes());
}

Status collect_receivers(device::Device& d, ProbeBuffers& b, const ResolvedProbes& p, int64_t first,
                         DType dtype, int64_t* bytes) {
  if (b.list.at.empty()) return Status::Ok();
  EntryValues v(b.list, dtype);
  DG_RETURN_IF_ERROR(d.read(b.values, 0, v.host.data(), v.bytes()));
  *bytes += v.bytes();
  for (size_t i = 0; i < b.list.at.size(); ++i) {
    const int64_t step = first + b.list.row[i];
    if (p.traces->holds(step)) *p.traces->at(step, b.list.id[i]) = get_value(dtype, v.at(i));
  }
  return Status::Ok();
}

Status apply_probes(device::Device& d, const device::Buffer& grid, size_t l,
                    std::initializer_list<ProbeBuffers*> probes) {
  for (ProbeBuffers* b : probes) {
    if (l + 1 >= b->list.begin.size() || b->list.begin[l] == b->list.begin[l + 1]) continue;
    DG_RETURN_IF_ERROR(b->kernel.set(0, grid));
    DG_RETURN_IF_ERROR(b->kernel.set(3, static_cast<int32_t>(b->list.begin[l])));
    DG_RETURN_IF_ERROR(b->kernel.set(4, static_cast<int32_t>(b->list.begin[l + 1])));
    DG_RETURN_IF_ERROR(d.launch(b->kernel, device::Range{}));
  }
  return Status::Ok();
}

}  // namespace deepgrid::internal
