#!/usr/bin/env bash
# Heat diffusion with a spatially varying conductivity: a hot blob next to an insulating slab
# (kappa 100x smaller), streamed out of core. Writes a PNG of the temperature.
#   bash examples/heat/run.sh [OUT_DIR]     (needs the deepgrid command and numpy)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-scratch/heat-example}
deepgrid=${DEEPGRID:-deepgrid}
python=${PYTHON:-python3}
rm -rf "$out" && mkdir -p "$out"

"$deepgrid" create "$out/g" --shape 128x128x64 --scheme heat-var --init gaussian
"$python" - "$out/kappa.npy" <<'PY'
import sys
import numpy as np
kappa = np.full((64, 128, 128), 0.16, np.float32)  # stable for kappa <= 1/6
kappa[:, :, 80:88] = 0.0016                         # an insulating slab at x = 80..87
np.save(sys.argv[1], kappa)
PY
"$deepgrid" import "$out/kappa.npy" "$out/g" --field kappa
"$deepgrid" run "$out/g" --steps 400 --mem 4MiB --boundary neumann
"$deepgrid" plot "$out/g" --field u --slice z=mid -o "$out/temperature.png"
echo "wrote $out/temperature.png"
