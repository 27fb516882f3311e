#!/usr/bin/env bash
# setup.sh — install what kiln needs to build and test, on Debian 12 (bookworm): only the
# packages that are missing, so a second run does nothing.  Run as root (or with sudo
# available).  On a system without dpkg it only says which tools it expects.
set -euo pipefail

# cmake make gcc libc6-dev: the build; pkg-config check: the unit tests; llvm-19-dev: the
# JIT (shared libLLVM and its C API); python3-numpy: the tests' .npy oracle and, with
# python3-dev and python3-pytest, the Python extension (python/) and its tests;
# python3-setuptools, python3-pip and python3-venv: `pip install ./python`.  libc6-dev is
# only a Recommends of gcc, so --no-install-recommends needs it named.
packages=(cmake make gcc libc6-dev pkg-config llvm-19-dev check python3-numpy python3-dev
          python3-pytest python3-setuptools python3-pip python3-venv)

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "setup: no dpkg here; kiln needs: ${packages[*]} (or their equivalents)" >&2
    exit 0
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "setup: missing packages ${missing[*]}; run as root to install them" >&2
        exit 1
    fi
    sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
