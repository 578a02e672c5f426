#include "plan/incore_bench.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/threads.h"
#include "deepgrid/init.h"
#include "engines/incore_engine.h"
#include "kernels/scheme_kernel.h"

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

// Rows per plane of kernel_in_cache_mlups: the inputs and the output within about 256 KiB (an
// L2's share), 2 to 64 rows.
int64_t in_cache_rows(int64_t width, int planes, size_t value_bytes, int components) {
  const auto row = width * static_cast<int64_t>(value_bytes) * components * (planes + 1);
  return std::clamp<int64_t>((int64_t{256} << 10) / std::max<int64_t>(1, row), 2, 64);
}

template <typename T>
Result<double> kernel_in_cache_typed(const Scheme& scheme, int64_t width, int threads,
                                     int repeats) {
  const SchemeKernel<T> kernel(scheme);
  const int rx = kernel.rx(), ry = kernel.ry(), planes = 2 * kernel.rz() + 1;
  const int components = kernel.components();
  const int64_t rows = in_cache_rows(width, planes, sizeof(T), components);
  const ptrdiff_t stride = round_up(width + 2 * rx, 16);
  const ptrdiff_t field = stride * (rows + 2 * ry);
  const Rect rect{rx, rx + width, ry, ry + rows};
  const PlanePosition at{0, 0, 0, 1, Shape{width + 2 * rx, rows + 2 * ry, planes}};
  double best = 0;
  for (int rep = 0; rep < repeats; ++rep) {
    int64_t applied = 0;  // kernel applications, all threads
    double longest = 0;   // the slowest thread's seconds
    bool unallocated = false;
#pragma omp parallel num_threads(threads) reduction(+ : applied) reduction(max : longest) \
    reduction(|| : unallocated)
    {
      internal::AlignedBuffer in_buffer(static_cast<size_t>(field * components * planes) *
                                        sizeof(T));
      internal::AlignedBuffer out_buffer(static_cast<size_t>(field * components) * sizeof(T));
      unallocated = !in_buffer.ok() || !out_buffer.ok();
      T* first = in_buffer.data<T>();
      if (!unallocated) std::fill(first, first + field * components * planes, T{1} / 3);
      std::vector<const T*> in;
      for (int p = 0; p < planes; ++p) in.push_back(first + p * field * components);
#pragma omp barrier
      const auto t0 = std::chrono::steady_clock::now();
      double seconds = 0;
      while (!unallocated && seconds < 0.2) {
        kernel.apply(in.data(), stride, field, out_buffer.data<T>(), stride, field, rect, at);
        ++applied;
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      longest = seconds;
    }
    if (unallocated)
      return Status(ErrorCode::kResource, "no memory for the kernel's in-cache planes");
    best = std::max(
        best, static_cast<double>(applied) * static_cast<double>(rect.points()) / longest / 1e6);
  }
  return best;
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

Result<double> kernel_in_cache_mlups(const Scheme& scheme, DType dtype, int64_t width, int threads,
                                     int repeats) {
  if (width < 1) return invalid_argument("a plane must be at least 1 point wide");
  DG_RETURN_IF_ERROR(scheme.check_dtype(dtype));
  const int n = internal::resolved_threads(threads);
  return dispatch_dtype(dtype, [&](auto tag) -> Result<double> {
    return kernel_in_cache_typed<decltype(tag)>(scheme, width, n, std::max(1, repeats));
  });
}

}  // namespace deepgrid
