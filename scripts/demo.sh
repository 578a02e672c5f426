#!/usr/bin/env bash
# The default demo: heat diffusion (7-point stencil) on a grid in a local scratch directory,
# the run report, and a PNG of the middle z-plane.
set -euo pipefail
bin=${DEEPGRID:-build/deepgrid}
scratch=${SCRATCH:-scratch}
shape=${DEMO_SHAPE:-256x256x256}
steps=${DEMO_STEPS:-200}

mkdir -p "$scratch"
rm -rf "$scratch/demo"
echo "== deepgrid create $scratch/demo --shape $shape --init gaussian"
"$bin" create "$scratch/demo" --shape "$shape" --init gaussian
echo "== deepgrid run $scratch/demo --stencil 7pt --steps $steps"
"$bin" run "$scratch/demo" --stencil 7pt --steps "$steps"
echo "== deepgrid checksum $scratch/demo"
"$bin" checksum "$scratch/demo"
echo "== deepgrid plot $scratch/demo --slice z=mid -o $scratch/demo.png"
"$bin" plot "$scratch/demo" --slice z=mid -o "$scratch/demo.png"
