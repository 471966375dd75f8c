#!/usr/bin/env bash
# Prints the Python interpreter that feedline's builds and tests use, so that
# pip never installs into an interpreter the operating system manages
# (PEP 668). In order:
#
#   1. $PYTHON itself, when it runs inside a virtual environment or a conda
#      environment (its sys.prefix differs from sys.base_prefix, or it has
#      conda-meta/);
#   2. the active virtual environment's interpreter ($VIRTUAL_ENV/bin/python);
#   3. otherwise the project environment $FEEDLINE_VENV (default .venv in the
#      repository), made from $PYTHON. It is made again when it was made
#      from another interpreter or no longer runs.
#
#   scripts/python_env.sh            prints the interpreter's path
#   scripts/python_env.sh --create   also makes the project environment when
#                                    case 3 applies and it is missing or stale
#
# PYTHON defaults to python3.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-python3}"
venv="${FEEDLINE_VENV:-${root}/.venv}"
create=0
case "${1:-}" in
  --create) create=1 ;;
  "") ;;
  *) echo "python_env: unknown argument $1" >&2; exit 2 ;;
esac

# What identifies an interpreter: its executable and full version.
identity='import sys; print(sys.executable, sys.version.split()[0])'

# Case 1: $PYTHON is already inside an environment of its own.
in_env='
import os, sys
in_venv = sys.prefix != sys.base_prefix
in_conda = os.path.isdir(os.path.join(sys.prefix, "conda-meta"))
print(sys.executable if in_venv or in_conda else "")
'
if ! own="$("${python}" -c "${in_env}" 2>/dev/null)"; then
  echo "python_env: cannot run ${python} (set PYTHON= to a Python 3.10+)" >&2
  exit 1
fi
if [[ -n "${own}" ]]; then
  echo "${own}"
  exit 0
fi

# Case 2: an active virtual environment.
if [[ -n "${VIRTUAL_ENV:-}" && -x "${VIRTUAL_ENV}/bin/python" ]]; then
  echo "${VIRTUAL_ENV}/bin/python"
  exit 0
fi

# Case 3: the project environment, made from $PYTHON.
venv_python="${venv}/bin/python"
if ((create)); then
  base="$("${python}" -c "${identity}")"
  stamp="${venv}/.feedline-base"
  if [[ ! -x "${venv_python}" ]] || ! "${venv_python}" -c '' 2>/dev/null ||
    [[ "$(cat "${stamp}" 2>/dev/null)" != "${base}" ]]; then
    if [[ -e "${venv}" && ! -f "${venv}/pyvenv.cfg" ]]; then
      echo "python_env: ${venv} exists and is not a virtual environment;" \
        "set FEEDLINE_VENV= to another directory" >&2
      exit 1
    fi
    echo "python_env: making ${venv} from ${python} (${base})" >&2
    rm -rf "${venv}"
    if ! "${python}" -m venv "${venv}" >&2; then
      echo "python_env: ${python} -m venv failed; on Debian or Ubuntu" \
        "install python3-venv (scripts/install_deps.sh does)" >&2
      exit 1
    fi
    echo "${base}" >"${stamp}"
  fi
fi
echo "${venv_python}"
