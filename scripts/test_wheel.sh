#!/usr/bin/env bash
# The packaging test (`make test-wheel`): builds an sdist and, from that
# sdist, a wheel with `python -m build` (in an isolated build environment,
# as pip would), installs the wheel into a fresh virtual environment that
# holds nothing else but its dependencies, and runs tests/wheel/smoke.py
# there with `python -I` from a directory outside the repository, so that
# neither the source tree nor a build tree can be imported.
#
#   scripts/test_wheel.sh      PYTHON= the interpreter that runs `build`
#                              (default: scripts/python_env.sh's choice)
#
# The sdist and the wheel are left in build/dist/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${root}"

python="${PYTHON:-$(scripts/python_env.sh)}"
dist="build/dist"
venv="build/wheel-venv"

version="$("${python}" -c '
import re
text = open("CMakeLists.txt").read()
print(re.search(r"project\(feedline\s+VERSION\s+([0-9.]+)", text)[1])')"

rm -rf "${dist}"
echo "test_wheel: python -m build (sdist, then the wheel from it) -> ${dist}"
"${python}" -m build --outdir "${dist}" . >build/test_wheel_build.log 2>&1 || {
  tail -n 40 build/test_wheel_build.log
  echo "test_wheel: build failed (log: build/test_wheel_build.log)" >&2
  exit 1
}
sdist="${dist}/feedline-${version}.tar.gz"
wheels=("${dist}"/feedline-"${version}"-*.whl)
if [[ ! -f "${sdist}" || ! -f "${wheels[0]}" || ${#wheels[@]} -ne 1 ]]; then
  echo "test_wheel: expected ${sdist} and one wheel of ${version} in ${dist}:" >&2
  ls -l "${dist}" >&2
  exit 1
fi
echo "test_wheel: $(basename "${sdist}") $(du -k "${sdist}" | cut -f1) KiB," \
  "$(basename "${wheels[0]}") $(du -k "${wheels[0]}" | cut -f1) KiB"

rm -rf "${venv}"
"${python}" -m venv "${venv}"
"${venv}/bin/python" -m pip install -q "${wheels[0]}"

work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
cd "${work}"
"${root}/${venv}/bin/python" -I "${root}/tests/wheel/smoke.py" "${version}"
