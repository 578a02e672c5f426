#!/usr/bin/env bash
# The benchmarks whose results are recorded in docs/performance.md, exactly as run there.
set -euo pipefail
build/bench/incore_bench --benchmark_counters_tabular=true
for st in 7pt 27pt; do
  for dt in f32 f64; do
    build/deepgrid bench --shape 256x256x256 --stencil $st --dtype $dt --steps 20
    build/deepgrid bench --shape 512x512x512 --stencil $st --dtype $dt --steps 5
  done
done
