#!/usr/bin/env bash
# Installs what building and testing megatron-mlir needs on Debian 12:
# LLVM/MLIR 22, the C++ toolchain, oneDNN and OpenBLAS, OpenMPI, GoogleTest,
# and the Python packages of the reference model used by the tests
# (xz-utils: the GPU benchmark's bundle, which a lit test builds;
# ocl-icd-opencl-dev: libdnnl's CMake package looks for OpenCL, which
# libdnnl-dev only recommends).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  cmake ninja-build ccache gcc g++ binutils clang-22 libclang-rt-22-dev libomp-22-dev libgtest-dev
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev libopenblas-openmp-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev graphviz
  libicu-dev xz-utils
  python3 python3-pip
)

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Debian 12 marks its system Python as externally managed (PEP 668); the
# reference's packages go into it all the same, as the tests need them there.
PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q \
  -r utils/gpt2_reference/requirements.txt
# The CUDA toolkit comes with the machine image (it is not a Debian package
# of the version the CUDA target needs); say so when it is absent.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "note: no CUDA toolkit (nvcc): the CUDA target and its tests are skipped"
fi
