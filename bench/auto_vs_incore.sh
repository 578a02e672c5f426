#!/usr/bin/env bash
# The default method (--method auto, no --mem) against --method incore on grids that fit in
# memory: whole runs taking turns, ROUNDS rounds, one line per run (method, whole and compute
# seconds, peak RSS). docs/performance/auto-method.md has the figures.
#
#   bash bench/auto_vs_incore.sh [DIR]   (default scratch/auto-bench; grids made there once)
#
# Settings (environment): ROUNDS (2), THREADS (2), DG (the deepgrid command, build/deepgrid).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-scratch/auto-bench}
rounds=${ROUNDS:-2}
threads=${THREADS:-2}
dg=${DG:-build/deepgrid}
mkdir -p "$dir"
[ -d "$dir/g7" ] || "$dg" create "$dir/g7" --shape 2048x2048x256 --init gaussian >/dev/null
[ -d "$dir/w8" ] || "$dg" create "$dir/w8" --shape 1024x1024x256 --scheme wave8 --init gaussian >/dev/null

# run GRID STEPS LABEL [deepgrid run options...]
run() {
  local grid=$1 steps=$2 label=$3
  shift 3
  /usr/bin/time -f "%M" -o "$dir/rss" "$dg" run "$dir/$grid" --steps "$steps" --threads "$threads" \
    "$@" --json >"$dir/report.json"
  python3 - "$grid" "$steps" "$label" "$dir" <<'PY'
import json, sys
grid, steps, label, d = sys.argv[1:]
r = json.load(open(f"{d}/report.json"))
rss = int(open(f"{d}/rss").read().split()[-1]) / 2**20
print(f"{grid} {steps:>3} steps  {label:6}  method {r['method']:7} whole {r['seconds']:6.2f} s"
      f"  compute {r['compute_seconds']:6.2f} s  peak RSS {rss:5.2f} GiB")
PY
}

for _ in $(seq "$rounds"); do
  for steps in 16 48; do
    run g7 "$steps" auto --stencil 7pt
    run g7 "$steps" incore --stencil 7pt --method incore
  done
  run w8 16 auto
  run w8 16 incore --method incore
done
