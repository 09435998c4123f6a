#!/usr/bin/env bash
# Installs the Debian packages placer's build needs. Idempotent: packages already
# present are skipped, and apt is not touched at all when nothing is missing.
set -euo pipefail

# What the build links against or runs. Keep this list exact: each later backend
# adds its packages here when it lands.
packages=(
  gcc             # the linker driver rustc uses
  libc6-dev       # C runtime objects for linking
  pkg-config      # hwlocality-sys finds libhwloc through it
  libhwloc-dev    # topology discovery and NUMA binding (hwloc 2.9)
  libudev-dev     # libhwloc links -ludev
  libmemkind-dev  # the memkind backend (placer's default 'memkind' feature)
  hwloc-nox       # lstopo/hwloc-annotate for scripts/make-topologies.sh (not the 'hwloc' package: it conflicts)
  cmake           # highs-sys builds the vendored HiGHS solver with cmake
  g++             # ... which is C++
  libclang-dev    # ... and bindgen needs libclang for its bindings
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} system packages present"
else
  echo "install-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The ONNX import tests generate their files with Python packages from PyPI
# (scripts/onnx/testdata.sh): they need python3 with venv and pip.
if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install-deps: installing python3-venv (for scripts/onnx/testdata.sh)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends python3 python3-venv
fi

# placer_torch's op hook is a C++ torch extension, compiled against python3's headers.
if ! python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  echo "install-deps: installing python3-dev (placer_torch's op hook includes Python.h)"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends python3-dev
fi

if ! command -v cargo >/dev/null; then
  echo "install-deps: cargo not found; install the Rust toolchain (rustup) first" >&2
  exit 1
fi
