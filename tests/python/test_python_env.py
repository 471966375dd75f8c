"""scripts/python_env.sh: which interpreter the Makefile and
scripts/install_deps.sh use, so that pip never installs into a system
interpreter (PEP 668)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "python_env.sh"
# The interpreter this venv (or this interpreter) was made from.
BASE = getattr(sys, "_base_executable", sys.executable)


def run(python: str, *args: str, venv: Path, active: Path | None = None, check: bool = True):
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env.update(PYTHON=python, FEEDLINE_VENV=str(venv))
    if active is not None:
        env["VIRTUAL_ENV"] = str(active)
    done = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def base_is_plain() -> bool:
    out = subprocess.run(
        [BASE, "-c", "import sys; print(sys.prefix == sys.base_prefix)"], capture_output=True, text=True
    )
    return out.stdout.strip() == "True"


pytestmark = pytest.mark.skipif(not base_is_plain(), reason="needs a base interpreter outside any environment")


def test_an_interpreter_inside_a_venv_is_used_as_it_is(tmp_path):
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(tmp_path / "user")], check=True)
    python = str(tmp_path / "user" / "bin" / "python")
    out = run(python, venv=tmp_path / "project").stdout.strip()
    assert Path(out).parent == tmp_path / "user" / "bin"
    assert not (tmp_path / "project").exists()


def test_the_active_venv_is_used(tmp_path):
    subprocess.run([BASE, "-m", "venv", "--without-pip", str(tmp_path / "active")], check=True)
    out = run(BASE, "--create", venv=tmp_path / "project", active=tmp_path / "active").stdout.strip()
    assert out == str(tmp_path / "active" / "bin" / "python")
    assert not (tmp_path / "project").exists()


def test_a_plain_interpreter_gets_the_project_venv_made_once(tmp_path):
    venv = tmp_path / "project"
    assert run(BASE, venv=venv).stdout.strip() == str(venv / "bin" / "python")
    assert not venv.exists(), "made without --create"
    out = run(BASE, "--create", venv=venv).stdout.strip()
    assert out == str(venv / "bin" / "python")
    check = "import sys; print(sys.prefix != sys.base_prefix)"
    assert subprocess.run([out, "-c", check], capture_output=True, text=True).stdout.strip() == "True"
    # The venv has pip, and pip installs there, not into BASE.
    assert subprocess.run([out, "-m", "pip", "--version"], capture_output=True, text=True).stdout.startswith("pip ")
    marker = venv / "marker"
    marker.write_text("kept")
    run(BASE, "--create", venv=venv)
    assert marker.exists(), "remade although made from the same interpreter"


def test_the_project_venv_is_made_again_for_another_interpreter(tmp_path):
    venv = tmp_path / "project"
    run(BASE, "--create", venv=venv)
    (venv / ".feedline-base").write_text("/some/other/python 3.9.0\n")
    marker = venv / "marker"
    marker.write_text("stale")
    run(BASE, "--create", venv=venv)
    assert not marker.exists()
    assert (venv / ".feedline-base").read_text().split()[1] == "{}.{}.{}".format(*sys.version_info[:3])


def test_a_directory_that_is_no_venv_is_never_removed(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data").write_text("keep")
    done = run(BASE, "--create", venv=precious, check=False)
    assert done.returncode == 1
    assert "not a virtual environment" in done.stderr
    assert (precious / "data").read_text() == "keep"


def test_an_interpreter_that_does_not_run_is_named(tmp_path):
    done = run(str(tmp_path / "no-python"), venv=tmp_path / "v", check=False)
    assert done.returncode == 1
    assert "no-python" in done.stderr


@pytest.mark.skipif(
    not Path("/usr/bin/python3").exists() or not list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED")),
    reason="no externally managed system interpreter here",
)
def test_an_externally_managed_system_python_gets_a_venv(tmp_path):
    venv = tmp_path / "project"
    out = run("/usr/bin/python3", "--create", venv=venv).stdout.strip()
    assert out == str(venv / "bin" / "python")
    # pip works in it although the system interpreter refuses installs.
    done = subprocess.run(
        [out, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", "pip"], capture_output=True, text=True
    )
    assert "externally-managed-environment" not in done.stderr
