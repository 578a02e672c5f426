// The golden model: a plain scalar step of a scheme (or stencil) on packed (z, component, y, x)
// values, written straight from the definitions in scheme.h, stencil.h and boundary.h. Every
// engine must match it bitwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "deepgrid/boundary.h"
#include "deepgrid/geometry.h"
#include "deepgrid/init.h"
#include "deepgrid/probes.h"
#include "deepgrid/scheme.h"

namespace deepgrid::testing {

// A stencil's sum at one point, as stencil.h defines it: c_0 u_0, then fma term by term in
// canonical order; read(dx, dy, dz) gives the value at that offset.
template <typename T, typename Read>
T reference_stencil_sum(const Stencil& st, Read&& read) {
  const auto& pts = st.points();
  T sum = static_cast<T>(pts[0].c) * read(pts[0].dx, pts[0].dy, pts[0].dz);
  for (size_t i = 1; i < pts.size(); ++i) {
    sum = std::fma(static_cast<T>(pts[i].c), read(pts[i].dx, pts[i].dy, pts[i].dz), sum);
  }
  return sum;
}

// An update's value at one point, as scheme.h defines it: per term, the stencil's sum, the
// constant times each factor, then the first term's product and fma for the others;
// read(component, dx, dy, dz) gives the value at that offset.
template <typename T, typename Read>
T reference_update(const SchemeUpdate& up, Read&& read) {
  T acc = 0;
  for (size_t k = 0; k < up.terms.size(); ++k) {
    const SchemeTerm& t = up.terms[k];
    const T sum = reference_stencil_sum<T>(
        t.stencil, [&](int dx, int dy, int dz) { return read(t.component, dx, dy, dz); });
    T q = static_cast<T>(t.c);
    for (int f : t.factors) q = q * read(f, 0, 0, 0);
    acc = k == 0 ? q * sum : std::fma(q, sum, acc);
  }
  return acc;
}

// One step of a scheme (a plain stencil converts to one), straight from scheme.h and stencil.h:
// per term, the stencil's sum (c_0 u_0, then fma), the constant times each factor, then the
// first term's product and fma for the others; older levels shift, coefficients stay.
// `step`: the step computed (read by users' kernels only). For float and double, in
// reference.cc (compiled without the sanitizers' checks: test_reference in CMakeLists.txt).
template <typename T>
std::vector<T> reference_step(const std::vector<T>& u, const Shape& s, const Scheme& sc,
                              const Boundary& b, int64_t step = 1);

// `steps` steps from absolute step `step0`.
template <typename T>
std::vector<T> reference_run(std::vector<T> u, const Shape& s, const Scheme& sc, const Boundary& b,
                             int64_t steps, int64_t step0 = 0) {
  for (int64_t i = 0; i < steps; ++i) u = reference_step(u, s, sc, b, step0 + i + 1);
  return u;
}

// The same with probes (probes.h), from absolute step `step0`: after the step computing step t,
// each source's a(t) is added at its point, then the receivers read theirs into
// traces[(t - step0 - 1) * receivers + r].
template <typename T>
std::vector<T> reference_run(std::vector<T> u, const Shape& s, const Scheme& sc, const Boundary& b,
                             int64_t steps, const Probes& probes, int64_t step0,
                             std::vector<double>* traces) {
  const int n = sc.component_count();
  auto at = [&](const std::string& field, int64_t x, int64_t y, int64_t z) -> T& {
    const int64_t c = sc.component_index(field);
    return u[static_cast<size_t>(((z * n + c) * s.ny + y) * s.nx + x)];
  };
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t t = step0 + i + 1;
    u = reference_step(u, s, sc, b, t);
    for (const SourceSpec& src : probes.sources) {
      T& v = at(src.field, src.x, src.y, src.z);
      v = v + static_cast<T>(src.value(t));
    }
    for (const ReceiverSpec& r : probes.receivers) {
      traces->push_back(static_cast<double>(at(r.field, r.x, r.y, r.z)));
    }
  }
  return u;
}

// The values `compute()` returns, computed once per process for `key`, which must name every
// input they follow from: suites that run one case through several engines, placements or
// plans recompute no reference run (which took most of their time under the sanitizers).
template <typename T, typename Compute>
const std::vector<T>& remembered(const std::string& key, Compute&& compute) {
  static std::map<std::string, std::vector<T>> values;
  auto it = values.find(key);
  if (it == values.end()) it = values.emplace(key, compute()).first;
  return it->second;
}

template <typename T>
std::vector<T> random_values(const Shape& s, uint64_t seed) {
  std::vector<T> u(static_cast<size_t>(s.points()));
  const InitSpec init{InitSpec::Kind::kRandom, 0, seed};
  for (int64_t z = 0; z < s.nz; ++z) init_plane(init, s, z, u.data() + z * s.plane_points());
  return u;
}

// Index of the first element whose bits differ, or -1.
template <typename T>
int64_t first_bitwise_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace deepgrid::testing
