#!/usr/bin/env bash
# Device checks on a GPU node that lacks this project's build dependencies. `pack` (here, after
# `make build`) puts the CLI, the test binaries that use a device, the users' test kernels, their
# shared libraries (less glibc and the compiler's runtime, which the node has newer) and Debian's
# OpenMPI into one tarball. `check` (there, as root, from the repository root) unpacks it and runs
# each step under its own time limit: the devices listed, device_test, the MPI device golden tests
# on two ranks sharing the device, the shared suite's device cases in shards, then the device
# benches (bench/device_parts.sh against OLD_DEEPGRID where packed, bench/device_tiers.sh).
# Results of such runs: docs/performance/devices.md.
#
#   bash bench/gpu_node.sh pack BUNDLE.tar.xz [OLD_DEEPGRID]
#   bash bench/gpu_node.sh check BUNDLE.tar.xz
#
# Settings (environment) for check: LOGS (its logs, default /tmp/gpu_node_logs), SHARDS (8),
# SUITE_SECONDS (the device cases' limit, 240), BENCH_SECONDS (each bench's, 240; 0 skips them).
set -euo pipefail
mode=$1
bundle=$(realpath -m "$2")

pack() {
  local stage
  stage=$(mktemp -d)
  mkdir -p "$stage"/{bin,lib,tests,root}
  cp build/deepgrid build/tests/{device_test,stream_test,mpi_test} "$stage/bin/"
  [ -z "${1:-}" ] || cp "$1" "$stage/bin/deepgrid-old"
  strip "$stage"/bin/*
  cp build/tests/libtest_kernel*.so "$stage/tests/"
  realpath build >"$stage/build_dir"  # (the tests run the CLI and kernels from there)
  local p
  for p in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi \
    /usr/share/pmix /etc/openmpi /usr/bin/orterun /usr/bin/mpirun /usr/bin/mpiexec; do
    [ -e "$p" ] || continue
    mkdir -p "$stage/root$(dirname "$p")"
    cp -a "$(readlink -f "$p")" "$stage/root$p"
  done
  {
    ldd "$stage"/bin/* /usr/bin/orterun
    find /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 -name '*.so*' \
      -exec ldd {} \;
  } 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|libresolv|libutil|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  tar -C "$stage" -cJf "$bundle" .
  rm -rf "$stage"
  ls -la "$bundle"
}

T0=$(date +%s)
step() { echo "[$(($(date +%s) - T0)) s] $*"; }

# The device's ICD alone: a node's loader may list only PoCL (an H200 node, session 83).
nvidia_only() {
  local lib
  lib=$(find /usr/local/nvidia /usr/lib /usr/lib64 -name 'libnvidia-opencl.so*' 2>/dev/null |
    head -1 || true)
  [ -n "$lib" ] || return 0
  mkdir -p /tmp/gpu_node_icd
  echo "$lib" >/tmp/gpu_node_icd/nvidia.icd
  export OCL_ICD_VENDORS=/tmp/gpu_node_icd/nvidia.icd
}

check() {
  local b=/tmp/gpu_node logs=${LOGS:-/tmp/gpu_node_logs}
  mkdir -p "$b" "$logs"
  tar -C "$b" -xJf "$bundle"
  cp -a "$b/root/." /
  local build_dir
  build_dir=$(cat "$b/build_dir")
  mkdir -p "$build_dir/tests"
  cp "$b/bin/deepgrid" "$build_dir/"
  cp "$b"/tests/* "$build_dir/tests/"
  export LD_LIBRARY_PATH=$b/lib PATH=/usr/bin:$b/bin:$PATH DEEPGRID_CACHE_DIR=/tmp/gpu_node_cache
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_mca_base_component_show_load_errors=0
  nvidia_only
  deepgrid devices
  # (device_parts.sh adds its own -n 2 --oversubscribe to the extra arguments)
  local extra=(--bind-to none --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=4
    -x LD_LIBRARY_PATH)
  [ -z "${OCL_ICD_VENDORS:-}" ] || extra+=(-x OCL_ICD_VENDORS)
  local mpirun=(mpirun -n 2 --oversubscribe "${extra[@]}")

  step device_test
  timeout 120 device_test >"$logs/device_test.log" 2>&1 && echo passed || echo "FAILED ($?)"
  grep -E '^\[  FAILED  \] [A-Z]' "$logs/device_test.log" | sort -u || true

  step "MPI device golden tests, two ranks sharing the device"
  timeout 120 "${mpirun[@]}" mpi_test --gtest_filter='Distributed.PartsOnDevices*' \
    >"$logs/mpi_test.log" 2>&1 && echo passed || echo "FAILED ($?)"

  step "the shared suite's device cases in ${SHARDS:-8} shards"
  local pids=() i
  for ((i = 0; i < ${SHARDS:-8}; i++)); do
    GTEST_TOTAL_SHARDS=${SHARDS:-8} GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=2 \
      timeout "${SUITE_SECONDS:-240}" stream_test --gtest_filter='*/device*' \
      >"$logs/suite_$i.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || true  # (never a bare wait: it waits for a caller's process substitutions)
  echo "passed $(cat "$logs"/suite_*.log | grep -c '^\[       OK') cases;" \
    "failed: $(cat "$logs"/suite_*.log | grep -E '^\[  FAILED  \] [A-Z]' | sort -u | wc -l)"
  cat "$logs"/suite_*.log | grep -E '^\[  FAILED  \] [A-Z]' | sort -u || true
  local cut
  cut=$(grep -L -E '^\[  (PASSED|FAILED)  \]' "$logs"/suite_*.log || true)
  [ -z "$cut" ] || echo "cut off by the limit: $cut"

  [ "${BENCH_SECONDS:-240}" -gt 0 ] || return 0
  step "distributed device parts"
  local dgs=$b/bin/deepgrid
  [ ! -x "$b/bin/deepgrid-old" ] || dgs="$b/bin/deepgrid-old $dgs"
  DGS=$dgs ROUNDS=2 MPIRUN_ARGS="${extra[*]}" timeout "${BENCH_SECONDS:-240}" \
    bash bench/device_parts.sh /tmp/gpu_node_parts || echo "FAILED or cut off ($?)"
  step "placements, 512x512x4096"
  DG=$b/bin/deepgrid timeout "${BENCH_SECONDS:-240}" \
    bash bench/device_tiers.sh /tmp/gpu_node_tiers 512x512x4096 128 gpu || echo "FAILED or cut off ($?)"
  step "done"
}

case $mode in
  pack) pack "${3:-}" ;;
  check) check ;;
  *) echo "usage: bash bench/gpu_node.sh pack|check BUNDLE.tar.xz [OLD_DEEPGRID]" >&2 && exit 2 ;;
esac
