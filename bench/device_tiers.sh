#!/usr/bin/env bash
# The device method's placements on one grid, one run after another, each against the
# device-resident run of the same grid: host-resident at 4x and 16x the device budget (copies
# beside the kernels and in turn), three tiers at 16x the device budget and 4x the host's.
# One line per run: the placement and plan (bt, chunk planes), compute seconds (host <-> device
# copies included, the disk's load and store not), the transfer queues' time, the bytes between
# host and device, and the ratio of the device-resident run's compute seconds to this one's.
# docs/performance/devices.md has the figures.
#
#   bash bench/device_tiers.sh DIR [SHAPE] [STEPS] [DEVICE]
#     (defaults: 512x512x4096, 128 steps, --device gpu; the 7pt f32 grid made in DIR once)
#
# Settings (environment): DG (the deepgrid command, build/deepgrid).
set -euo pipefail
dir=$1
shape=${2:-512x512x4096}
steps=${3:-128}
device=${4:-gpu}
dg=${DG:-build/deepgrid}
mkdir -p "$dir"
grid="$dir/g-$shape"
[ -d "$grid" ] || "$dg" create "$grid" --shape "$shape" --dtype f32 --init random:1 >/dev/null
IFS=x read -r nx ny nz <<<"$shape"
mib=$((nx * ny * nz * 4 / 1048576))

# run LABEL [deepgrid run options...]: the plan's line and the run's, the ratio to the first.
run() {
  local label=$1
  shift
  "$dg" plan "$grid" --stencil 7pt --steps "$steps" --device "$device" "$@" --json >"$dir/plan.json"
  "$dg" run "$grid" --stencil 7pt --steps "$steps" --device "$device" "$@" --json >"$dir/run.json"
  python3 - "$label" "$dir" <<'PY'
import json, os, sys
label, d = sys.argv[1:]
p, r = json.load(open(f"{d}/plan.json")), json.load(open(f"{d}/run.json"))
ref = f"{d}/resident_seconds"
if not os.path.exists(ref):
    open(ref, "w").write(str(r["compute_seconds"]))
resident = float(open(ref).read())
shape = "" if r["device_placement"] == "device-resident" else (
    f"bt {p['bt']}, chunks of {p['chunk_planes']}, " + ("beside" if p["overlap"] else "in turn"))
print(f"{label:34} {r['device_placement']:15} {shape:32} predicted {p['predicted_compute_seconds'] + p['predicted_copy_seconds']:7.3f} s"
      f"  compute {r['compute_seconds']:7.3f} s  copies {r['device_copy_seconds']:6.3f} s"
      f"  {r['device_bytes_copied'] / 2**30:6.1f} GiB  {resident / r['compute_seconds']:5.2f}"
      f" of resident")
PY
}

rm -f "$dir/resident_seconds"
echo "$shape 7pt f32, $steps steps, grid $mib MiB, device $device"
run "device-resident"
run "device-resident again"
run "host-resident 4x" --device-mem $((mib / 4))MiB --mem 64GiB
run "host-resident 16x" --device-mem $((mib / 16))MiB --mem 64GiB
run "host-resident 16x, copies in turn" --device-mem $((mib / 16))MiB --mem 64GiB \
  --device-overlap off
run "three-tier 16x, host 4x" --device-mem $((mib / 16))MiB --mem $((mib / 4))MiB
run "three-tier 16x, host 4x, in turn" --device-mem $((mib / 16))MiB --mem $((mib / 4))MiB \
  --device-overlap off
