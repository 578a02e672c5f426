#!/usr/bin/env bash
# Gray-Scott through a user kernel: builds libgrayscott.so, makes a 128x128x32 grid of the
# kernel's fields (u = 1, v = 0 but for a seeded square), runs STEPS steps (periodic) and draws
# the middle plane of v as a PNG.
#   examples/grayscott/run.sh [WORKDIR]        (default: examples/grayscott/work)
# DEEPGRID: the deepgrid command (default: deepgrid on PATH); DEEPGRID_INCLUDE: the directory
# holding deepgrid/kernel.h (default: this checkout's include/); PYTHON: a Python with numpy
# (default: the project venv); STEPS (default 4000).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$here/work}
deepgrid=${DEEPGRID:-deepgrid}
include=${DEEPGRID_INCLUDE:-$here/../../include}
python=${PYTHON:-$here/../../.venv/bin/python}
steps=${STEPS:-4000}
shape=(128 128 32)

mkdir -p "$work"
cc -shared -fPIC -O2 -ffp-contract=off -I"$include" "$here/grayscott.c" -o "$work/libgrayscott.so"
cp "$here/scheme.json" "$work/scheme.json"
rm -rf "$work/g"
"$deepgrid" create "$work/g" --scheme "$work/scheme.json" \
  --shape "${shape[0]}x${shape[1]}x${shape[2]}"
"$python" "$here/seed.py" "${shape[@]}" "$work"
"$deepgrid" import "$work/u.npy" "$work/g" --field u
"$deepgrid" import "$work/v.npy" "$work/g" --field v
"$deepgrid" run "$work/g" --steps "$steps" --boundary periodic
"$deepgrid" plot "$work/g" --field v -o "$work/grayscott_v.png"
echo "wrote $work/grayscott_v.png"
