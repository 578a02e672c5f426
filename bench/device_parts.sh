#!/usr/bin/env bash
# Distributed device parts: `mpirun -n 2` runs of one grid split in z (1x1x2) and in x (2x1x1),
# device-resident parts exchanging halos every BT steps, with one or several builds taking
# turns round after round (side by side, as docs/performance.md asks). One line per run: the
# build, the split, the whole run's seconds, compute, and per rank the exchange's time outside
# the steps it overlaps, the wait for the other rank and the copies between host and device.
# docs/performance/devices.md ("Session 61 on an NVIDIA H200") has the figures.
#
#   bash bench/device_parts.sh DIR [SHAPE] [STEPS] [BT] [DEVICE]
#     (defaults: 512x512x512, 256 steps, bt 4, --device 0; the f32 grids made in DIR once)
#
# Settings (environment): DGS (the deepgrid commands to compare, space-separated; default
# build/deepgrid), ROUNDS (3), MPIRUN_ARGS (extra mpirun arguments, e.g. --mca btl self,tcp).
set -euo pipefail
dir=$1
shape=${2:-512x512x512}
steps=${3:-256}
bt=${4:-4}
device=${5:-0}
read -r -a dgs <<<"${DGS:-build/deepgrid}"
rounds=${ROUNDS:-3}
read -r -a extra <<<"${MPIRUN_ARGS:-}"
mpirun_args=(-n 2 --oversubscribe "${extra[@]}")
[ "$(id -u)" -ne 0 ] || mpirun_args+=(--allow-run-as-root)
mkdir -p "$dir"
for procs in 1x1x2 2x1x1; do
  grid="$dir/g-$shape-$procs"
  [ -d "$grid" ] || mpirun "${mpirun_args[@]}" "${dgs[0]}" create "$grid" --shape "$shape" \
    --init random:3 --procs "$procs" >/dev/null
done
echo "$shape 7pt f32, $steps steps, exchanges every $bt, device $device, 2 ranks"
for round in $(seq "$rounds"); do
  for procs in 1x1x2 2x1x1; do
    for dg in "${dgs[@]}"; do
      mpirun "${mpirun_args[@]}" "$dg" run "$dir/g-$shape-$procs" --stencil 7pt --steps "$steps" \
        --device "$device" --bt "$bt" --json >"$dir/run.json"
      python3 - "$round" "$procs" "$dg" "$dir/run.json" <<'PY'
import json, sys
rnd, procs, dg, path = sys.argv[1:]
r = json.load(open(path))
ranks = r["per_rank"]
def each(key):
    return " ".join(f"{p.get(key, 0):.3f}" for p in ranks)
print(f"round {rnd} {procs} {dg}: whole {r['seconds']:.3f} s, compute {r['compute_seconds']:.3f} s;"
      f" per rank exchange {each('exchange_seconds')}, wait {each('wait_seconds')},"
      f" copies {each('device_copy_seconds')}")
PY
    done
  done
done
