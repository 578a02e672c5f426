#!/usr/bin/env bash
# Every test: a check that formatting is clean, the release build (warnings as errors) with
# the full suite, a downstream find_package(deepgrid) project and a user's kernel library built
# against the installed deepgrid, the Python package (built by pip into .venv, made by
# scripts/setup.sh) with its pytest suite, then the C++ suite under
# ASan+UBSan and under TSan, and the parsers' fuzzers for 20 s each. The Python package and
# the sanitizer trees compile in the background while the stages before them run.
#
# Each stage's heading gives the minutes since the start: CI should take under 20 minutes on a
# 2-core machine (docs/testing.md says where the time goes).
set -euo pipefail
jobs=${JOBS:-$(nproc)}
stage() { printf '== [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

configure() {  # build dir, extra cmake args...
  local dir=$1
  shift
  cmake -S . -B "$dir" -G Ninja -DDEEPGRID_WERROR=ON "$@" >/dev/null
}
# The sanitizer builds: optimised (-O1, as the sanitizers advise) with line tables (-g1),
# which is all their stack traces need; it compiles in half the time of -O2 -g.
# They reuse the kernels PoCL compiled for the release build's device tests.
sanitizer_flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  -DDEEPGRID_BUILD_BENCH=OFF -DDEEPGRID_MPI=OFF "-DDEEPGRID_POCL_CACHE_DIR=$PWD/build/tests/pocl-cache")

stage "clang-format"
files=$(git ls-files '*.cc' '*.h')
if ! clang-format --dry-run --Werror $files; then
  echo "formatting differs: run 'make format'"
  exit 1
fi

# The release build and the Python package's compile the library with the same compiler and
# flags: through ccache (its cache in build/ccache, paths taken relative to the tree, the
# package built in build-python, as deep as build), the package's build finds every object of
# the release build's library and compiles only its module, nanobind's library and the part of
# its command that differs without MPI (27 s where it took 107, on a 2-core VM, alone).
export CCACHE_DIR=$PWD/build/ccache CCACHE_BASEDIR=$PWD
# The later stages' builds (the Python package, then the sanitizer builds) compile in the
# background at the lowest priority (nice 19) from the end of the release build: while the
# stages' tests wait for mpirun, subprocesses and disks they take the cores those leave idle.
# Each stage waits for its build and shows its log if it failed. Logs in build/background/;
# the builds are stopped with the script.
logs=build/background
mkdir -p "$logs"
rm -f "$logs"/*.done
background_builds() {
  renice -n 19 -p "$BASHPID" >/dev/null
  CXX=c++ CMAKE_BUILD_PARALLEL_LEVEL=$jobs .venv/bin/python -m pip install -q --no-build-isolation \
    --disable-pip-version-check --config-settings=build-dir=build-python \
    --config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    --config-settings=cmake.define.DEEPGRID_WERROR=ON . >"$logs/python.log" 2>&1 &&
    touch "$logs/python.done" &&
    { CXX=clang++-14 configure build-asan "${sanitizer_flags[@]}" -DDEEPGRID_SANITIZE=address &&
      cmake --build build-asan -j "$jobs"; } >"$logs/asan.log" 2>&1 && touch "$logs/asan.done" &&
    { CXX=clang++-14 configure build-tsan "${sanitizer_flags[@]}" -DDEEPGRID_SANITIZE=thread &&
      cmake --build build-tsan -j "$jobs"; } >"$logs/tsan.log" 2>&1 && touch "$logs/tsan.done"
}
await_build() {  # python, asan or tsan: until it is done; its log if it failed
  while [ ! -e "$logs/$1.done" ]; do
    # (done looked for again: the builds may have ended since the loop's test)
    if ! kill -0 "$background" 2>/dev/null && [ ! -e "$logs/$1.done" ]; then
      tail -60 "$logs/$1.log"
      echo "the $1 build failed (its log: $logs/$1.log)"
      exit 1
    fi
    sleep 2
  done
}
# CTest starts the tests that took longest first, by the times a tree's last run recorded; a
# fresh sanitizer tree has none, so it takes those of the tree before it (the same tests).
reuse_test_times() {  # from tree, to tree
  mkdir -p "$2/Testing/Temporary"
  cp "$1/Testing/Temporary/CTestCostData.txt" "$2/Testing/Temporary/" 2>/dev/null || true
}

stage "release build and tests"
configure build -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
cmake --build build -j "$jobs"
set -m  # (the builds in a process group of their own, which the trap stops whole)
background_builds &
background=$!
set +m
trap 'kill -- -$background 2>/dev/null || true' EXIT
# Twice as many tests as cores: the MPI tests mostly wait for mpirun's processes to start.
ctest --test-dir build --output-on-failure -j $((2 * jobs))
stage "installed library: a downstream project with find_package(deepgrid)"
rm -rf build/install build/downstream build/downstream-grid
cmake --install build --prefix build/install >/dev/null
cmake -S tests/downstream -B build/downstream -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/downstream >/dev/null
build/downstream/downstream build/downstream-grid
# Every installed header compiles on its own: the API includes nothing that is not installed.
for h in build/install/include/deepgrid/*.h; do
  echo "#include <deepgrid/${h##*/}>" | c++ -std=c++20 -fsyntax-only -x c++ -Ibuild/install/include - ||
    { echo "installed header ${h##*/} does not compile on its own"; exit 1; }
done
stage "a user's kernel built against the installed deepgrid (examples/grayscott), run by it"
rm -rf build/grayscott build/grayscott-grid
cmake -S examples/grayscott -B build/grayscott -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/grayscott >/dev/null
cc -shared -fPIC -O2 -ffp-contract=off -Ibuild/install/include examples/grayscott/grayscott.c \
  -o build/grayscott/libgrayscott_cc.so  # the README's one-line build
for lib in build/grayscott/libgrayscott.so build/grayscott/libgrayscott_cc.so; do
  rm -rf build/grayscott-grid
  build/install/bin/deepgrid create build/grayscott-grid --scheme "$lib" --shape 16x16x8 >/dev/null
  build/install/bin/deepgrid run build/grayscott-grid --steps 3 --boundary periodic >/dev/null
done
stage "Python package: pip install . into the project venv (in the background), pytest"
await_build python
.venv/bin/python -m pytest -q tests/python
# The sanitizer builds leave MPI out (-DDEEPGRID_MPI=OFF): OpenMPI's own allocations and
# threads are reported by the sanitizers. They are also the check that a build without MPI
# still compiles and passes.
stage "ASan+UBSan tests (built in the background; without MPI)"
# intercept_tls_get_addr=0: LeakSanitizer's record of dynamic TLS goes wrong once PoCL has
# loaded kernels ("DTLS 11 at 0x000000000e02-0x000800001f04", then its tracer crashes at the
# leak check: "Tracer caught signal 11"), which failed CI twice on 2026-11-27.
# clang's build: it compiles in four fifths of g++'s time (docs/testing.md); the release stage
# is g++'s.
await_build asan
reuse_test_times build build-asan
ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
  ctest --test-dir build-asan --output-on-failure -j "$jobs"
stage "TSan tests (built in the background; without MPI)"
# GCC's libgomp hides its barriers from TSan; LLVM's OpenMP runtime with the Archer tool
# reports them, so this build uses clang and libomp.
await_build tsan
reuse_test_times build-asan build-tsan
OMP_TOOL_LIBRARIES=/usr/lib/llvm-14/lib/libarcher.so TSAN_OPTIONS="halt_on_error=1 ignore_noninstrumented_modules=1" \
  ctest --test-dir build-tsan --output-on-failure -j "$jobs"
stage "fuzzing the parsers (libFuzzer, ${FUZZ_SECONDS:-20} s each)"
JOBS=$jobs bash scripts/fuzz.sh
stage "done"
