#!/usr/bin/env bash
# Installs aim's build and test dependencies from Debian packages when any is missing.
# (The CUDA 13 toolkit with cuBLAS/cuDNN/NCCL is expected under /usr/local/cuda; without it the
# build is CPU-only.)
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache clang-format libopenblas-openmp-dev libboost-program-options-dev
      libboost-context-dev nlohmann-json3-dev libgtest-dev libjpeg62-turbo-dev libpng-dev
      python3-torch python3-torchvision python3-numpy
      libgoogle-perftools4  # tcmalloc: the tuned PyTorch peer of bench/peers (MACHINE.md lesson 4)
      librsvg2-bin  # rsvg-convert: the CLI test renders the roofline SVG
      libopenmpi-dev openmpi-bin  # the mpi data-parallel backend and its mpirun tests
      zstd binutils  # tools/ptxas-check.sh unpacks the sm_90 cubins of the build
      clang libclang-rt-14-dev)  # tools/fuzz.sh: libFuzzer with ASan/UBSan over the readers
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "[deps] installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
