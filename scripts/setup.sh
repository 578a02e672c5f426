#!/usr/bin/env bash
# Installs every system package deepgrid needs to build, test and run. Idempotent: installs
# only what is missing, so both README commands can call it every time.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential   # g++ (C++20, OpenMP via libgomp)
  cmake ninja-build # build
  ccache            # make test: the Python package's build reuses the release build's objects
  pkg-config
  libgtest-dev libgmock-dev  # unit tests
  libbenchmark-dev           # benchmarks in bench/
  nlohmann-json3-dev         # manifests, stencil files, --json reports
  libcli11-dev               # command-line parsing
  libpng-dev                 # PNG slices and plots
  libfreetype-dev fonts-dejavu-core  # text in plot and bench --plot PNGs
  libssl-dev                 # SHA-256 (OpenSSL libcrypto) for checksums
  liburing-dev               # io_uring (out-of-core engine)
  libxxhash-dev              # XXH3 per-plane checksums (fsck, --verify)
  libhdf5-dev                # VTKHDF files for ParaView/VisIt (export, run --snapshots)
  hdf5-tools                 # h5diff: the MPI test compares distributed runs' snapshots
  libsegyio-dev              # SEG-Y receiver traces (run --traces OUT.sgy, deepgrid traces)
  libasan8 libubsan1          # g++'s ASan+UBSan runtimes, for sanitizer builds with g++ by hand
  clang-14 libomp-14-dev       # ASan+UBSan and TSan builds: clang, LLVM's OpenMP and Archer
  python3-venv python3-dev     # the Python package: a project venv, headers for the module
  libclang-rt-14-dev           # clang's sanitizer runtimes and libFuzzer (scripts/fuzz.sh)
  openmpi-bin libopenmpi-dev   # distributed grids: mpirun -n P deepgrid ... (MPI build)
  ocl-icd-opencl-dev opencl-headers opencl-clhpp-headers  # the device method: OpenCL's ICD loader
  pocl-opencl-icd clinfo      # PoCL: OpenCL on the CPU, the device the tests run on; clinfo lists devices
  slurm-wlm munge             # tests/slurm_test.sh: a one-node Slurm (srun --mpi=pmix, sbatch)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The Python package's environment: a project venv (.venv, not the system's Python) holding
# the build tools and the test and interop dependencies listed in pyproject.toml.
venv=${DEEPGRID_VENV:-.venv}
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
"$venv/bin/python" - <<'PY' >"$venv/requirements.txt"
import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))
extras = p["project"]["optional-dependencies"]
print("\n".join(p["build-system"]["requires"] + p["project"]["dependencies"] + extras["test"] + extras["interop"]))
PY
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$venv/requirements.txt"
