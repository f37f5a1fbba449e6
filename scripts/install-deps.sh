#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs lupine's build and test dependencies from Debian's packages.
# The CUDA toolkit headers (cuda.h, cudaTypedefs.h) are the one thing Debian
# does not ship in the version lupine targets (13.0); they are looked for at
# /usr/local/cuda/include (see README.md).
set -eu
PKGS="build-essential clang-format meson ninja-build pkg-config python3 liburing-dev libjson-c-dev libsystemd-dev libssl-dev openssl ca-certificates libcmocka-dev systemd systemd-container"
missing=""
for p in $PKGS; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO=sudo
        echo "installing:$missing"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
# pynvml, for the NVML test (tests/e2e/test_nvml.py): Debian's python3-pynvml
# where the release has it, else NVIDIA's nvidia-ml-py from PyPI.
if ! python3 -c 'import pynvml' 2>/dev/null; then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO=sudo
        if apt-cache show python3-pynvml >/dev/null 2>&1; then
                DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-pynvml
        else
                python3 -m pip install -q nvidia-ml-py 2>/dev/null ||
                        python3 -m pip install -q --break-system-packages nvidia-ml-py ||
                        echo "warning: pynvml not installed: the NVML test skips its pynvml part" >&2
        fi
fi
if [ ! -f "${CUDA_INCLUDE:-/usr/local/cuda/include}/cuda.h" ]; then
        echo "error: CUDA 13 toolkit headers not found at ${CUDA_INCLUDE:-/usr/local/cuda/include}." >&2
        echo "       Install the CUDA toolkit (NVIDIA's apt repository: cuda-driver-dev-13-0 and cuda-cudart-dev-13-0)," >&2
        echo "       or set CUDA_INCLUDE to a directory holding cuda.h and cudaTypedefs.h." >&2
        exit 1
fi
