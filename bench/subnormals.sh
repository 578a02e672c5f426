#!/bin/bash
# What subnormal numbers cost, and what --flush-subnormals gives back: a Gaussian bump (f32,
# whose tail lies in the subnormal range) advanced STEPS steps of 7pt heat diffusion, in core
# and streamed at 16x its budget, each from a fresh copy of the same grid, with IEEE
# arithmetic and with subnormals flushed. Prints one line per run.
#
#   bash bench/subnormals.sh [DIR]       (default DIR: scratch/subnormals; needs 2 x 2 GiB)
#
# Settings: DG (the deepgrid binary, default build/deepgrid), SHAPE (512x512x2048: its corners
# lie beyond the Gaussian's subnormal shell, which a 512x512x1024 grid does not reach), STEPS
# (48), MEM (the stream's budget, 128MiB: 16x).
set -euo pipefail
dir=${1:-scratch/subnormals}
dg=${DG:-build/deepgrid}
shape=${SHAPE:-512x512x2048}
steps=${STEPS:-48}
mem=${MEM:-128MiB}
mkdir -p "$dir"
rm -rf "$dir/base" "$dir/run"
"$dg" create "$dir/base" --shape "$shape" --init gaussian >/dev/null
for method in incore stream; do
  for mode in ieee flushed; do
    rm -rf "$dir/run" && cp -r "$dir/base" "$dir/run"
    args=(--stencil 7pt --steps "$steps" --method "$method" --json)
    if [ "$method" = stream ]; then args+=(--mem "$mem"); fi
    if [ "$mode" = flushed ]; then args+=(--flush-subnormals); fi
    "$dg" run "$dir/run" "${args[@]}" | python3 -c "
import json, sys
j = json.load(sys.stdin)
print(f\"$method $mode: {j['seconds']:.2f} s, {j['mlups']:.0f} MLUP/s whole run, \"
      f\"compute {j['compute_seconds']:.2f} s ({j['compute_mlups']:.0f} MLUP/s), bt {j['bt']}\")"
  done
done
rm -rf "$dir/base" "$dir/run"
