#!/usr/bin/env bash
# Installs every system package deepgrid needs to build, test and run. Idempotent: installs
# only what is missing, so both README commands can call it every time.
set -euo pipefail

packages=(
  build-essential   # g++ (C++20, OpenMP via libgomp)
  cmake ninja-build # build
  pkg-config
  libgtest-dev libgmock-dev  # unit tests
  libbenchmark-dev           # benchmarks in bench/
  nlohmann-json3-dev         # manifests, stencil files, --json reports
  libcli11-dev               # command-line parsing
  libpng-dev                 # PNG slices and plots
  libfreetype-dev fonts-dejavu-core  # text in bench --plot PNGs
  libssl-dev                 # SHA-256 (OpenSSL libcrypto) for checksums
  liburing-dev               # io_uring (out-of-core engine)
  libasan8 libubsan1          # ASan+UBSan build
  clang-14 libomp-14-dev       # TSan build: clang with LLVM's OpenMP and its Archer tool
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
