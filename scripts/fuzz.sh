#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a bounded time, starting
# from the seeds in tests/fuzz/corpus/<name>/. New inputs go to a scratch corpus, not the
# repository; a crash stops the script and leaves its input in build-fuzz/artifacts/ (add it
# to the seed corpus once fixed). FUZZ_SECONDS (default 20) is the time per target; JOBS
# (default: the cores) targets run at once.
set -euo pipefail
seconds=${FUZZ_SECONDS:-20}
jobs=${JOBS:-$(nproc)}
build=build-fuzz
targets=(manifest geometry stencil checksums)

CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DDEEPGRID_FUZZ=ON \
  -DDEEPGRID_WERROR=ON -DDEEPGRID_BUILD_TESTS=OFF -DDEEPGRID_BUILD_BENCH=OFF \
  -DDEEPGRID_UNITY_BUILD=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/%/_fuzz}"
mkdir -p "$build/artifacts"
# One target per core at a time: each fuzzer is one process, and gets its seconds of a core.
fuzz() {  # target; its log in $build/fuzz-TARGET.log, its exit code
  local t=$1
  mkdir -p "$build/corpus/$t"
  "$build/tests/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="$build/artifacts/${t}-" \
    "$build/corpus/$t" "tests/fuzz/corpus/$t" >"$build/fuzz-$t.log" 2>&1
}
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  batch=("${targets[@]:first:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    echo "== fuzz $t for ${seconds}s"
    fuzz "$t" &
    pids+=($!)
  done
  for i in "${!batch[@]}"; do
    t=${batch[$i]} log="$build/fuzz-$t.log"
    if ! wait "${pids[$i]}"; then
      grep -E -A12 "ERROR|runtime error" "$log" | head -40 || true
      echo "fuzz $t: crash; the input is in $build/artifacts/ (full log: $log)"
      kill "${pids[@]}" 2>/dev/null || true
      exit 1
    fi
    echo "fuzz $t: $(grep -E "^stat::(number_of_executed_units|new_units_added)" "$log" | tr -s ' \n' ' ' || true)"
  done
done
