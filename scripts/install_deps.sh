#!/usr/bin/env bash
# Installs what feedline needs to build and test: Debian packages through apt
# and Python packages through pip. Only missing packages are installed, so a
# second run does nothing and finishes in a few seconds.
#
# pip installs only into a virtual (or conda) environment: the one that
# scripts/python_env.sh picks, which is $PYTHON when it runs in one, else the
# active virtual environment, else the project environment .venv that it
# makes from $PYTHON (default python3). A system interpreter (PEP 668's
# "externally managed" ones included) is never changed.
#
#   scripts/install_deps.sh           what building and testing need
#   scripts/install_deps.sh --bench   also the baselines the benchmarks run
set -euo pipefail

readonly MIN_CMAKE_VERSION="3.25"

readonly DEB_PACKAGES=(
  build-essential pkg-config ninja-build git
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy
  libavcodec-dev libavformat-dev libavutil-dev libswscale-dev
  libswresample-dev libavfilter-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev zlib1g-dev libdeflate-dev
  ffmpeg
  python3-venv
)

# PyPI requirement (name or name==version):module to import. The linters
# are pinned: a new ruff or mypy release may format or judge differently.
readonly PY_PACKAGES=(
  nanobind:nanobind
  scikit-build-core:scikit_build_core
  numpy:numpy
  pytest:pytest
  Pillow:PIL
  scikit-image:skimage
  matplotlib:matplotlib
  prometheus-client:prometheus_client
  ruff==0.17.6:ruff
  mypy==2.4.1:mypy
  build:build
)

# Baselines of the benchmarks in bench/python (only with --bench).
readonly BENCH_PY_PACKAGES=(
  spdl:spdl.pipeline
  torch==2.13.0:torch
  av:av
)
# torchcodec, a baseline of bench/python/video.py, is not installed: its PyPI
# wheels link a CUDA build of torch; the bench reports it unavailable unless
# a matching torch and torchcodec are installed by hand.

changed=0

py_packages=("${PY_PACKAGES[@]}")
for arg in "$@"; do
  case "${arg}" in
    --bench) py_packages+=("${BENCH_PY_PACKAGES[@]}") ;;
    *) echo "install_deps: unknown argument ${arg}" >&2; exit 2 ;;
  esac
done

# Succeeds when the cmake first on PATH is at least MIN_CMAKE_VERSION.
cmake_is_recent() {
  command -v cmake >/dev/null 2>&1 || return 1
  local have
  have="$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')"
  [[ -n "${have}" ]] || return 1
  # sort -V puts the smaller version first.
  [[ "$(printf '%s\n%s\n' "${MIN_CMAKE_VERSION}" "${have}" | sort -V | head -n1)" \
      == "${MIN_CMAKE_VERSION}" ]]
}

as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  else
    sudo "$@"
  fi
}

# --- Debian packages -------------------------------------------------------
missing_deb=()
for pkg in "${DEB_PACKAGES[@]}"; do
  dpkg -s "${pkg}" >/dev/null 2>&1 || missing_deb+=("${pkg}")
done
# Any cmake >= 3.25 on PATH will do (for example one installed from PyPI);
# the distribution's cmake is only a fallback.
if ! cmake_is_recent && ! dpkg -s cmake >/dev/null 2>&1; then
  missing_deb+=(cmake)
fi

if ((${#missing_deb[@]} > 0)); then
  echo "install_deps: apt-get install ${missing_deb[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing_deb[@]}"
  changed=1
fi

# --- Python packages -------------------------------------------------------
PYTHON="$("$(dirname "${BASH_SOURCE[0]}")/python_env.sh" --create)"
echo "install_deps: Python packages go to ${PYTHON}"
# A cmake that pip puts there is found first.
PATH="$(dirname "${PYTHON}"):${PATH}"

# One interpreter start for all checks; prints the distributions that are
# missing or cannot be imported.
check_py='
import importlib, importlib.metadata, sys
for spec in sys.argv[1:]:
    dist, module = spec.split(":")
    name, _, pinned = dist.partition("==")
    try:
        have = importlib.metadata.version(name)
        if pinned and have != pinned:
            raise LookupError(have)
        importlib.import_module(module)
    except Exception:
        print(dist)
'
missing_py_out="$("${PYTHON}" -c "${check_py}" "${py_packages[@]}")"
missing_py=()
if [[ -n "${missing_py_out}" ]]; then
  mapfile -t missing_py <<<"${missing_py_out}"
fi
# The distribution's cmake may be older than 3.25; then take it from PyPI.
if ! cmake_is_recent; then
  missing_py+=("cmake>=${MIN_CMAKE_VERSION}")
fi

if ((${#missing_py[@]} > 0)); then
  echo "install_deps: pip install ${missing_py[*]}"
  "${PYTHON}" -m pip install "${missing_py[@]}"
  changed=1
fi

if ! cmake_is_recent; then
  echo "install_deps: cmake >= ${MIN_CMAKE_VERSION} is still not first on PATH" >&2
  exit 1
fi

if ((changed == 0)); then
  echo "install_deps: all present"
fi
