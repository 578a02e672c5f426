#!/usr/bin/env bash
# The device method's placements on one grid, one run after another, each against the
# device-resident run of the same grid: host-resident at 4x and 16x the device budget (copies
# beside the kernels and in turn), three tiers at 16x the device budget and 4x the host's.
# One line per run: the placement and plan (bt, chunk planes, copies beside the kernels or in
# turn), the predicted kernel and copy seconds; the whole run's seconds (the disk's load and
# store, or three tiers' sweeps, in it), its compute seconds (report.cc: host <-> device copies
# in it, the host's waits for the disk not), the waits for the disk, the transfer queues' time
# and the bytes between host and device; the device-resident run's compute and whole seconds
# over this run's.
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
    open(ref, "w").write(f"{r['compute_seconds']} {r['seconds']}")
compute, whole = map(float, open(ref).read().split())
shape = "" if r["device_placement"] == "device-resident" else (
    f"bt {p['bt']}, chunks of {p['chunk_planes']}, " + ("beside" if p["overlap"] else "in turn"))
print(f"{label:34} {r['device_placement']:15} {shape:28}"
      f" predicted {p['predicted_compute_seconds'] + p['predicted_copy_seconds']:6.2f} s"
      f" | whole {r['seconds']:6.2f} s, compute {r['compute_seconds']:6.3f} s,"
      f" disk wait {r['io_wait_seconds']:5.2f} s, copies {r['device_copy_seconds']:5.2f} s,"
      f" {r['device_bytes_copied'] / 2**30:5.1f} GiB | of resident: compute"
      f" {compute / r['compute_seconds']:4.2f}, whole {whole / r['seconds']:4.2f}")
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
