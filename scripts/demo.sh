#!/usr/bin/env bash
# The default demo: heat diffusion (7-point stencil) on a 256 MiB grid in a local scratch
# directory, advanced out-of-core with a 16 MiB memory budget (16x smaller than the grid):
# the plan, the run report, the checksum, and a PNG of the middle z-plane.
set -euo pipefail
bin=${DEEPGRID:-build/deepgrid}
scratch=${SCRATCH:-scratch}
shape=${DEMO_SHAPE:-512x512x256}
steps=${DEMO_STEPS:-100}
mem=${DEMO_MEM:-16MiB}

mkdir -p "$scratch"
rm -rf "$scratch/demo"
echo "== deepgrid create $scratch/demo --shape $shape --init gaussian"
"$bin" create "$scratch/demo" --shape "$shape" --init gaussian
echo "== deepgrid plan $scratch/demo --stencil 7pt --steps $steps --mem $mem"
"$bin" plan "$scratch/demo" --stencil 7pt --steps "$steps" --mem "$mem"
echo "== deepgrid run $scratch/demo --stencil 7pt --steps $steps --mem $mem"
"$bin" run "$scratch/demo" --stencil 7pt --steps "$steps" --mem "$mem"
echo "== deepgrid checksum $scratch/demo"
"$bin" checksum "$scratch/demo"
echo "== deepgrid plot $scratch/demo --slice z=mid -o $scratch/demo.png"
"$bin" plot "$scratch/demo" --slice z=mid -o "$scratch/demo.png"
