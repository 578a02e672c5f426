#!/usr/bin/env bash
# Acoustic wave in a two-layer medium: a Ricker shot near the top, a line of receivers along x,
# 8th order in space, streamed out of core. Writes PNGs of the wavefield and of the traces, and
# snapshots of the wavefield every 30 steps that ParaView opens as one animation.
#   bash examples/wave/run.sh [OUT_DIR]     (needs the deepgrid command and numpy + matplotlib)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-scratch/wave-example}
deepgrid=${DEEPGRID:-deepgrid}
python=${PYTHON:-python3}
rm -rf "$out" && mkdir -p "$out"

# 160 x 96 x 120 points (x, y, z), h = 10 m, dt = 1 ms: (v dt / h)^2 per layer.
"$deepgrid" create "$out/g" --shape 160x96x120 --scheme wave8 --init zero
"$python" "$here/model.py" "$out/m.npy"
"$deepgrid" import "$out/m.npy" "$out/g" --field m
"$deepgrid" run "$out/g" --steps 420 --mem 12MiB --probes "$here/shot.json" \
    --traces "$out/traces.npy" --boundary dirichlet:0 \
    --snapshots "$out/snapshots" --every 30 --fields u --spacing 10
"$deepgrid" plot "$out/g" --field u --slice y=mid -o "$out/wavefield.png"
"$python" "$here/plot_traces.py" "$out/traces.npy" "$out/traces.png"
if "$python" -c "import vtk" 2>/dev/null; then  # (the vtk wheel renders without a display)
  "$python" "$here/render_snapshot.py" "$out/snapshots/series.vtkhdf" "$out/snapshot.png"
fi
echo "wrote $out/wavefield.png and $out/traces.png; open $out/snapshots/series.vtkhdf in ParaView"
