#!/usr/bin/env bash
# Weak and strong scaling of distributed runs (mpirun -n P deepgrid run) for P = 1..PMAX on
# this machine, one CSV row per run. See docs/mpi.md for what the figures can and cannot show
# on a machine with few cores.
#
#   bash bench/mpi_scaling.sh [OUT.csv]
#
# Settings (environment): DIR scratch directory (default scratch/mpi-bench, emptied), PMAX (4),
# NX and NY (256), NZ_PER_RANK (weak scaling: planes per rank, 128), NZ (strong scaling: the
# whole grid, 512), STEPS (24), STENCIL (7pt), MEM (each rank's --mem; empty: in-core parts),
# BT (steps between halo exchanges; empty: automatic), THREADS (per rank, 1), PROCS (a process
# grid PXxPYxPZ for the runs with its product of ranks, e.g. 2x2x1; other runs and empty: the
# one chosen), DG (the deepgrid command, build/deepgrid).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || exec >"$1"
dir=${DIR:-scratch/mpi-bench}
pmax=${PMAX:-4} nx=${NX:-256} ny=${NY:-256} per_rank=${NZ_PER_RANK:-128} nz_strong=${NZ:-512}
steps=${STEPS:-24} stencil=${STENCIL:-7pt} threads=${THREADS:-1} dg=${DG:-build/deepgrid}
mpirun_args=(--oversubscribe)
[ "$(id -u)" -ne 0 ] || mpirun_args+=(--allow-run-as-root)
run_args=(--stencil "$stencil" --steps "$steps" --threads "$threads" --json)
[ -z "${MEM:-}" ] || run_args+=(--mem "$MEM")
[ -z "${BT:-}" ] || run_args+=(--bt "$BT")

# One distributed run: create a fresh grid over P ranks, run it, print the CSV row.
measure() {  # kind, ranks, nz
  local kind=$1 ranks=$2 nz=$3 procs=()
  [ -z "${PROCS:-}" ] || [ $((${PROCS//x/*})) -ne "$ranks" ] || procs=(--procs "$PROCS")
  rm -rf "$dir/g"
  mpirun "${mpirun_args[@]}" -n "$ranks" "$dg" create "$dir/g" --shape "${nx}x${ny}x${nz}" \
    --init random:1 "${procs[@]}" >/dev/null
  mpirun "${mpirun_args[@]}" -n "$ranks" "$dg" run "$dir/g" "${run_args[@]}" |
    python3 -c '
import json, sys
r = json.load(sys.stdin)
per = r["per_rank"]
n = len(per)
mx = lambda key: max(p[key] for p in per)
print(",".join(str(v) for v in [sys.argv[1], n, r["shape"], r["steps"], r["exchange_bt"],
      r["halo_planes"], per[0]["method"], round(r["seconds"], 4), round(r["mlups"], 2),
      round(mx("compute_seconds"), 4), round(mx("io_wait_seconds"), 4),
      round(mx("exchange_seconds"), 4), round(mx("wait_seconds"), 4), r["bytes_read"],
      r["bytes_written"], r["bytes_sent"], r["process_grid"]]))' "$kind"
}

mkdir -p "$dir"
{
  echo "scaling,ranks,shape,steps,exchange_bt,halo_planes,method,seconds,mlups,max_compute_s,max_disk_wait_s,max_exchange_s,max_wait_s,bytes_read,bytes_written,bytes_sent,process_grid"
  for p in $(seq 1 "$pmax"); do measure weak "$p" $((per_rank * p)); done
  for p in $(seq 1 "$pmax"); do measure strong "$p" "$nz_strong"; done
}
rm -rf "$dir/g"
