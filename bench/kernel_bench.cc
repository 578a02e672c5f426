// The stencil kernel alone, one thread, on rows of a given width whose planes stay in cache:
// what a row costs per point, tails included (counter Gpoints/s). Widths that are not a
// multiple of 64 end in a tail (stencil_kernel.cc); the wavefront's levels shrink by 2 r per
// level, so most of their rows have one.
#include <benchmark/benchmark.h>

#include <vector>

#include "deepgrid/stencil.h"
#include "kernels/stencil_kernel.h"

namespace {

template <typename T>
void kernel_rows(benchmark::State& state, const char* stencil) {
  const int64_t width = state.range(0), rows = 64;
  const deepgrid::Stencil st = deepgrid::Stencil::preset(stencil).value();
  const deepgrid::StencilKernel<T> kernel(st);
  const int r = st.radius();
  const int64_t stride = (width + 2 * r + 15) / 16 * 16;
  const auto plane = static_cast<size_t>(stride * (rows + 2 * r));
  std::vector<std::vector<T>> planes(static_cast<size_t>(2 * st.radius_z() + 1),
                                     std::vector<T>(plane, T{1}));
  std::vector<const T*> in;
  for (const auto& p : planes) in.push_back(p.data());
  std::vector<T> out(plane);
  const deepgrid::Rect rect{r, r + width, r, r + rows};
  for (auto _ : state) {
    kernel.apply(in.data(), stride, out.data(), stride, rect);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["Gpoints/s"] = benchmark::Counter(
      static_cast<double>(rect.points()) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

void BM_KernelRows_f32(benchmark::State& state, const char* stencil) {
  kernel_rows<float>(state, stencil);
}
void BM_KernelRows_f64(benchmark::State& state, const char* stencil) {
  kernel_rows<double>(state, stencil);
}

BENCHMARK_CAPTURE(BM_KernelRows_f32, 7pt, "7pt")
    ->DenseRange(94, 98, 2)
    ->Args({110})
    ->Args({128})
    ->Args({158})
    ->Args({174})
    ->Args({254})
    ->Args({270})
    ->Args({510})
    ->Args({512});
BENCHMARK_CAPTURE(BM_KernelRows_f64, 7pt, "7pt")->Args({94})->Args({128})->Args({174});

}  // namespace

BENCHMARK_MAIN();
