#!/usr/bin/env python3
"""Runs clang-tidy on the project's translation units, a few at a time.

    run_clang_tidy.py -p BUILD_DIR [-j N] [--clang-tidy BIN] DIR...

Checks every file of BUILD_DIR/compile_commands.json that lies under one of
the DIRs (relative to the repository), with the repository's .clang-tidy
and every warning an error. Prints the findings of each file once it is
done, and exits with 1 if any file has a finding.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def find_clang_tidy(name: str | None) -> str:
    for candidate in [name] if name else ["clang-tidy", "clang-tidy-14", "clang-tidy-15", "clang-tidy-16"]:
        path = shutil.which(candidate)
        if path:
            return path
    raise SystemExit("run_clang_tidy: no clang-tidy on PATH (make deps installs it)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-p", dest="build_dir", required=True, help="directory of compile_commands.json")
    parser.add_argument("-j", dest="jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--clang-tidy", dest="clang_tidy")
    parser.add_argument("dirs", nargs="+", help="directories whose sources are checked")
    args = parser.parse_args()

    database = pathlib.Path(args.build_dir) / "compile_commands.json"
    entries = json.loads(database.read_text())
    roots = [(ROOT / d).resolve() for d in args.dirs]
    files = sorted(
        {
            str(path)
            for path in (pathlib.Path(e["directory"], e["file"]).resolve() for e in entries)
            if any(root in path.parents for root in roots) and path.exists()  # a stale database may list removed files
        }
    )
    if not files:
        raise SystemExit(f"run_clang_tidy: no sources under {args.dirs} in {database}")

    tidy = find_clang_tidy(args.clang_tidy)
    command = [
        tidy,
        f"-p={args.build_dir}",
        "--quiet",
        "--warnings-as-errors=*",
        # The database comes from a GCC build; clang ignores GCC-only flags.
        "--extra-arg=-Wno-unknown-warning-option",
    ]

    def check(path: str) -> tuple[str, int, str]:
        result = subprocess.run([*command, path], capture_output=True, text=True, cwd=ROOT)
        return path, result.returncode, result.stdout + result.stderr

    start = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for path, code, output in pool.map(check, files):
            rel = os.path.relpath(path, ROOT)
            if code != 0:
                failed.append(rel)
                print(f"--- {rel}\n{output.strip()}", flush=True)
    elapsed = time.monotonic() - start
    print(f"run_clang_tidy: {len(files)} files in {elapsed:.0f} s, {len(failed)} with findings", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
