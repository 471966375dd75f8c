#!/usr/bin/env python3
"""Writes the type stubs of feedline._feedline_ext and all its submodules.

    gen_stubs.py OUT_DIR    e.g. python/feedline (what `make stubs` runs)

Imports the installed extension (build it with `make python` first) and runs
nanobind's stubgen on it recursively, with the package as the import root, so
that OUT_DIR/_feedline_ext/__init__.pyi, io.pyi, ... name types as
``feedline._feedline_ext.X``. Stubs of submodules that no longer exist are
removed. tests/python/test_stubs.py runs this into a temporary directory and
fails when the result differs from the checked-in stubs.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

MODULE = "feedline._feedline_ext"
HERE = pathlib.Path(__file__).resolve().parent
PATTERNS = HERE / "stub_patterns.txt"


def generate(out_dir: pathlib.Path) -> pathlib.Path:
    """Writes the stubs under out_dir/_feedline_ext/; returns that directory."""
    target = out_dir / "_feedline_ext"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "nanobind.stubgen",
                "--module",
                MODULE,
                "--recursive",
                "--include-private",
                "--pattern-file",
                str(PATTERNS),
                "--output-dir",
                tmp,
                "--quiet",
            ],
            check=True,
            # Not the source tree: the installed package is the one to read.
            cwd=tmp,
        )
        generated = pathlib.Path(tmp) / "_feedline_ext"
        if not (generated / "__init__.pyi").is_file():
            raise SystemExit(f"gen_stubs: stubgen wrote no {generated}/__init__.pyi")
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(generated, target)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = generate(pathlib.Path(argv[1]))
    for path in sorted(target.rglob("*.pyi")):
        print(f"gen_stubs: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
