#!/usr/bin/env bash
# Builds the package and runs the Python tests on every supported CPython
# found on this machine (`make test-pythons`): for each version, a virtual
# environment in build/pythons/<version>/venv gets the test dependencies
# (scripts/install_deps.sh), the package (`make python`) and the test-only
# extension (`make test-ext`, in build/pythons/<version>/pytest), then runs
# pytest on tests/python. Ends with one line per version and a summary line;
# fails if any version fails. A version that is not installed is reported
# as missing and fails the run too.
#
#   scripts/test_pythons.sh            PYTHONS="3.10 3.11 3.12 3.13" by default
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

versions="${PYTHONS:-3.10 3.11 3.12 3.13}"
declare -A result
failed=0

# The interpreter of version $1 that runs: pythonX.Y on PATH (a pyenv shim
# may be there and refuse), else pyenv's newest X.Y.
find_python() {
  local root="${PYENV_ROOT:-${HOME}/.pyenv}" candidate
  for candidate in "$(command -v "python$1")" \
    $(ls -d "${root}"/versions/"$1".*/bin/"python$1" 2>/dev/null | sort -V -r); do
    if [[ -n "${candidate}" ]] &&
      "${candidate}" -c "import sys; assert sys.version.startswith('$1.')" >/dev/null 2>&1; then
      echo "${candidate}"
      return
    fi
  done
}

for v in ${versions}; do
  py="$(find_python "${v}")"
  if [[ -z "${py}" ]]; then
    result[${v}]="missing"
    failed=1
    continue
  fi
  dir="build/pythons/${v}"
  log="${dir}/test.log"
  mkdir -p "${dir}"
  echo "test_pythons: ${v} (${py}), log in ${log}"
  venv_py="${dir}/venv/bin/python"
  if ! {
    { [[ -x "${venv_py}" ]] || "${py}" -m venv "${dir}/venv"; } &&
      PYTHON="${venv_py}" scripts/install_deps.sh &&
      make --no-print-directory python PYTHON="${venv_py}" &&
      make --no-print-directory test-ext PYTHON="${venv_py}" PYTEST_DIR="${dir}/pytest" &&
      FEEDLINE_TEST_EXT_DIR="${PWD}/${dir}/pytest/tests/python/native" \
        "${venv_py}" -m pytest -q -p no:cacheprovider tests/python
  } >"${log}" 2>&1; then
    result[${v}]="FAILED ($(tail -n 1 "${log}"))"
    # The names and the first lines of each failure, so that a CI log that
    # keeps only this script's output still says what failed.
    grep -E '^(FAILED|ERROR) ' "${log}" | head -n 20 | sed "s/^/  ${v}: /"
    grep -nE '^_{5,} .* _{5,}$' "${log}" | head -n 5 | while IFS=: read -r line _; do
      sed -n "${line},$((line + 40))p" "${log}" | sed "s/^/  ${v}| /"
    done
    failed=1
  else
    result[${v}]="ok ($(tail -n 1 "${log}" | sed 's/=//g; s/^ *//; s/ *$//'))"
  fi
done

for v in ${versions}; do
  echo "  ${v}: ${result[${v}]}"
done
if ((failed)); then
  echo "test_pythons: FAILED on some of: ${versions}"
  exit 1
fi
echo "test_pythons: all passed on ${versions}"
