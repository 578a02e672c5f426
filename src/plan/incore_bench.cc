#include "plan/incore_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/aligned_buffer.h"
#include "deepgrid/init.h"
#include "engines/incore_engine.h"

namespace deepgrid {
namespace {

template <typename F>
double best_seconds(int repeats, F&& f) {
  double best = 1e300;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

template <typename T>
Result<InCoreBench> bench_typed(const Shape& shape, const Scheme& stencil, int64_t steps,
                                const InCoreOptions& opt, int repeats, double bandwidth_gbs,
                                const Boundary& boundary) {
  DG_ASSIGN_OR_RETURN(InCoreEngine<T> engine, InCoreEngine<T>::create(shape, stencil, steps, opt));
  const int64_t points = shape.plane_points();
  const int n = stencil.component_count();
  std::vector<T> plane(static_cast<size_t>(points * n));
  const InitSpec init{InitSpec::Kind::kRandom, 0, 1};
  for (int64_t z = 0; z < shape.nz; ++z) {
    for (int c = 0; c < n; ++c) init_plane(init, shape, z, plane.data() + c * points);
    engine.load_plane(z, plane.data());
  }
  engine.advance(boundary, 1);  // warm-up: page in both grids
  InCoreBench r;
  r.seconds = best_seconds(repeats, [&] { engine.advance(boundary, steps); });
  r.stencil = stencil.name();
  r.shape = shape.to_string();
  r.dtype = std::string(dtype_name(dtype_of<T>()));
  r.boundary = boundary.to_string();
  r.plan = engine.plan();
  r.threads = r.plan.threads;
  r.steps = steps;
  const double updates = static_cast<double>(shape.points()) * static_cast<double>(steps);
  r.mlups = updates / r.seconds / 1e6;
  r.gflops = updates * stencil.flops_per_update() / r.seconds / 1e9;
  r.bandwidth_bound_mlups = bandwidth_gbs * 1e9 / (2.0 * sizeof(T) * n) / 1e6;
  return r;
}

}  // namespace

Bandwidth measure_bandwidth(int64_t bytes, int repeats) {
  const int64_t n = bytes / static_cast<int64_t>(sizeof(double));
  internal::AlignedBuffer ba(static_cast<size_t>(bytes)), bb(static_cast<size_t>(bytes)),
      bc(static_cast<size_t>(bytes));
  double* a = ba.data<double>();
  double* b = bb.data<double>();
  double* c = bc.data<double>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  Bandwidth bw;
  const double copy = best_seconds(repeats, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i];
  });
  const double triad = best_seconds(repeats, [&] {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0 * c[i];
  });
  bw.copy_gbs = 2.0 * static_cast<double>(bytes) / copy / 1e9;
  bw.triad_gbs = 3.0 * static_cast<double>(bytes) / triad / 1e9;
  return bw;
}

Result<InCoreBench> bench_incore(const Shape& shape, const Scheme& stencil, DType dtype,
                                 int64_t steps, const InCoreOptions& options, int repeats,
                                 double bandwidth_gbs, const Boundary& boundary) {
  return dispatch_dtype(dtype, [&](auto tag) {
    return bench_typed<decltype(tag)>(shape, stencil, steps, options, repeats, bandwidth_gbs,
                                      boundary);
  });
}

}  // namespace deepgrid
