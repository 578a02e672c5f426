// In-core engine throughput: 7pt and 27pt, f32 and f64, 256^3 and 512^3, with the DRAM
// bandwidth bound of this machine beside each figure (counters MLUP/s, GFlop/s, bound_MLUP/s).
#include "plan/incore_bench.h"

#include <benchmark/benchmark.h>

namespace {

double machine_bandwidth_gbs() {
  static const double gbs = deepgrid::measure_bandwidth().copy_gbs;
  return gbs;
}

void BM_InCore(benchmark::State& state, const char* stencil, deepgrid::DType dtype) {
  const int64_t n = state.range(0);
  const int64_t steps = state.range(1);
  const auto st = deepgrid::Stencil::preset(stencil).value();
  deepgrid::InCoreBench r;
  for (auto _ : state) {
    auto res = deepgrid::bench_incore({n, n, n}, st, dtype, steps, {}, 1, machine_bandwidth_gbs());
    if (!res.ok()) {
      state.SkipWithError(res.status().message().c_str());
      return;
    }
    r = *res;
    state.SetIterationTime(r.seconds);
  }
  state.counters["MLUP/s"] = r.mlups;
  state.counters["GFlop/s"] = r.gflops;
  state.counters["bound_MLUP/s"] = r.bandwidth_bound_mlups;
  state.counters["DRAM_GB/s"] = machine_bandwidth_gbs();
}

#define DEEPGRID_INCORE_BENCH(name, stencil, dtype)  \
  BENCHMARK_CAPTURE(BM_InCore, name, stencil, dtype) \
      ->Args({256, 20})                              \
      ->Args({512, 5})                               \
      ->UseManualTime()                              \
      ->Iterations(3)                                \
      ->Unit(benchmark::kMillisecond)

DEEPGRID_INCORE_BENCH(7pt_f32, "7pt", deepgrid::DType::kF32);
DEEPGRID_INCORE_BENCH(7pt_f64, "7pt", deepgrid::DType::kF64);
DEEPGRID_INCORE_BENCH(27pt_f32, "27pt", deepgrid::DType::kF32);
DEEPGRID_INCORE_BENCH(27pt_f64, "27pt", deepgrid::DType::kF64);

}  // namespace

BENCHMARK_MAIN();
