#!/usr/bin/env bash
# The in-core benchmarks whose results are recorded in docs/performance/incore.md, as run there.
set -euo pipefail
build/bench/incore_bench --benchmark_counters_tabular=true
build/deepgrid bench --shape 256x256x256 --stencil 7pt --dtype f32 --steps 24 --repeats 3
for st in 7pt 27pt; do
  for dt in f32 f64; do
    build/deepgrid bench --shape 256x256x256 --stencil $st --dtype $dt --steps 24 --repeats 3 --no-bandwidth
    build/deepgrid bench --shape 512x512x512 --stencil $st --dtype $dt --steps 12 --repeats 2 --no-bandwidth
  done
done
