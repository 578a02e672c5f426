#!/usr/bin/env bash
# The stream engine against letting the OS page a memory-mapped grid, under one memory cap:
# the same problem with --method stream and --method mmap, each inside a cgroup v1 memory
# limit of budget + 64 MiB (page cache counts against it), on a grid 16x the budget.
# Prints both times and their ratio. Needs root and a writable /sys/fs/cgroup/memory.
#
#   bash bench/mmap_vs_stream.sh [BUDGET_MIB] [STEPS] [DIR]   (default 64 MiB, 8 steps, /tmp)
# e.g. a quick check: bash bench/mmap_vs_stream.sh 16 2
set -euo pipefail

budget_mib=${1:-64}
steps=${2:-8}
root=${3:-/tmp}
deepgrid=${DEEPGRID:-$(dirname "$0")/../build/deepgrid}
cgroup_root=/sys/fs/cgroup/memory
cgroup=$cgroup_root/deepgrid-mmap-vs-stream-$$
work=$(mktemp -d "$root/deepgrid-mmap-vs-stream-XXXXXX")

if [ ! -w "$cgroup_root" ]; then
  echo "mmap_vs_stream: no writable cgroup v1 memory controller at $cgroup_root (run as root)" >&2
  exit 2
fi
cleanup() {
  rm -rf "$work"
  rmdir "$cgroup" 2>/dev/null || true
}
trap cleanup EXIT

# f32 grid of 16x the budget: 512 x 512 planes of 1 MiB, or smaller planes for small budgets.
grid_bytes=$((budget_mib * 16 * 1024 * 1024))
nx=512
[ "$budget_mib" -lt 64 ] && nx=256
nz=$((grid_bytes / (nx * nx * 4)))
shape=${nx}x${nx}x${nz}
limit=$(((budget_mib + 64) * 1024 * 1024))
mkdir "$cgroup"
echo "$limit" > "$cgroup/memory.limit_in_bytes"
echo "grid $shape f32 ($((grid_bytes >> 20)) MiB), --mem ${budget_mib}MiB, cgroup limit" \
  "$((limit >> 20)) MiB, 7pt, $steps steps"

# Runs one method inside the cgroup on a fresh copy of the problem; prints its seconds.
run_method() {
  local method=$1 dir=$work/$1
  "$deepgrid" create "$dir" --shape "$shape" --init random:1 > /dev/null
  sync
  echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  local t0 t1
  t0=$(date +%s.%N)
  sh -c "echo \$\$ > $cgroup/cgroup.procs && exec $deepgrid run $dir --stencil 7pt \
    --steps $steps --method $method --mem ${budget_mib}MiB" > "$work/$method.txt"
  t1=$(date +%s.%N)
  "$deepgrid" checksum "$dir" --json | sed -e 's/.*"sha256":"\([0-9a-f]*\)".*/\1/' > "$work/$method.sha"
  rm -rf "$dir"
  echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}

stream_s=$(run_method stream)
echo "stream  ${stream_s} s"
mmap_s=$(run_method mmap)
echo "mmap    ${mmap_s} s"
if ! cmp -s "$work/stream.sha" "$work/mmap.sha"; then
  echo "mmap_vs_stream: the two methods' results differ" >&2
  exit 1
fi
echo "results identical; cgroup peak $(($(cat "$cgroup/memory.max_usage_in_bytes") >> 20)) MiB"
echo "$stream_s $mmap_s" | awk '{printf "mmap / stream = %.2fx\n", $2 / $1}'
