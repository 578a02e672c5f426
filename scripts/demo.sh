#!/usr/bin/env bash
# The default demo: heat diffusion (7-point stencil) on a 512 MiB grid in a local scratch
# directory, advanced out-of-core with a 32 MiB memory budget (16x smaller than the grid):
# the plan, the run report, the checksum, and a PNG of the middle z-plane.
set -euo pipefail
bin=${DEEPGRID:-build/deepgrid}
scratch=${SCRATCH:-scratch}
shape=${DEMO_SHAPE:-256x256x2048}
steps=${DEMO_STEPS:-100}
mem=${DEMO_MEM:-32MiB}

mkdir -p "$scratch"
rm -rf "$scratch/demo"
echo "== deepgrid create $scratch/demo --shape $shape --init sine"
"$bin" create "$scratch/demo" --shape "$shape" --init sine
echo "== deepgrid plan $scratch/demo --stencil 7pt --steps $steps --mem $mem"
"$bin" plan "$scratch/demo" --stencil 7pt --steps "$steps" --mem "$mem"
echo "== deepgrid run $scratch/demo --stencil 7pt --steps $steps --mem $mem"
"$bin" run "$scratch/demo" --stencil 7pt --steps "$steps" --mem "$mem"
echo "== deepgrid checksum $scratch/demo"
"$bin" checksum "$scratch/demo"
echo "== deepgrid plot $scratch/demo --slice z=mid -o $scratch/demo.png"
"$bin" plot "$scratch/demo" --slice z=mid -o "$scratch/demo.png"
