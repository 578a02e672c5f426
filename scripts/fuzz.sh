#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) and runs each for a bounded time, starting
# from the seeds in tests/fuzz/corpus/<name>/. New inputs go to a scratch corpus, not the
# repository; a crash stops the script and leaves its input in build-fuzz/artifacts/ (add it
# to the seed corpus once fixed). FUZZ_SECONDS (default 20) is the time per target.
set -euo pipefail
seconds=${FUZZ_SECONDS:-20}
jobs=${JOBS:-$(nproc)}
build=build-fuzz
targets=(manifest geometry stencil checksums)

CXX=clang++-14 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DDEEPGRID_FUZZ=ON \
  -DDEEPGRID_WERROR=ON -DDEEPGRID_BUILD_TESTS=OFF -DDEEPGRID_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target "${targets[@]/%/_fuzz}"
mkdir -p "$build/artifacts"
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work"
  echo "== fuzz $t for ${seconds}s"
  log="$build/fuzz-$t.log"
  if ! "$build/tests/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=8192 -print_final_stats=1 -artifact_prefix="$build/artifacts/${t}-" \
    "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    grep -E -A12 "ERROR|runtime error" "$log" | head -40 || true
    echo "fuzz $t: crash; the input is in $build/artifacts/ (full log: $log)"
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)" "$log" || true
done
