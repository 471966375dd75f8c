# SPDX-License-Identifier: Apache-2.0
"""Measurements shared by the Python benchmarks (imported from the scripts
in this directory, which run each contender in its own process)."""

import importlib
import json
import os
import pathlib
import resource
import subprocess
import sys


def import_test_ext():
    """Returns _feedline_testing, the test-only extension of native test ops.

    It is not installed; ``make test-ext`` builds it into build/pytest
    (or set FEEDLINE_TEST_EXT_DIR to the directory that holds it).
    """
    default = pathlib.Path(__file__).resolve().parents[2] / "build" / "pytest" / "tests" / "python" / "native"
    sys.path.insert(0, os.environ.get("FEEDLINE_TEST_EXT_DIR", str(default)))
    return importlib.import_module("_feedline_testing")


def cpu_seconds():
    """user+sys of this process (all threads) and its waited-for children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def peak_rss_kib():
    """Peak RSS of this process plus its largest child, in KiB (Linux units
    of ru_maxrss; for RUSAGE_CHILDREN it is the largest child)."""
    return sum(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def run_json(cmd, timeout, label, require_success=True):
    """Runs a worker command; returns (its last JSON line as a dict, or None,
    and a note saying why not). With require_success=False a worker that
    exits non-zero but still reported counts (the caller judges it)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines or (require_success and proc.returncode != 0):
        sys.stdout.flush()  # keep the worker's traceback after what we printed
        sys.stderr.write(f"--- {label} stderr ---\n{proc.stderr[-4000:]}\n")
        return None, f"worker failed (exit {proc.returncode})"
    return json.loads(lines[-1]), ""


def dispatch(args, worker_main, parent_main, check_main=None):
    """The scripts' main(): a worker, the output check, or the parent run."""
    if args.worker:
        worker_main(args.worker, args)
        return 0
    if check_main is not None and getattr(args, "check", False):
        check_main(args)
        return 0
    return parent_main(args)


def photos(n, names=("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry", "hubble_deep_field")):
    """n RGB photographs from scikit-image's samples (up to 512x512), in turn."""
    import numpy as np
    from skimage import data

    found = []
    for name in names:
        img = getattr(data, name)()
        if img.ndim == 3 and img.shape[2] == 3:
            found.append(np.ascontiguousarray(img[:512, :512]))
    return [found[i % len(found)] for i in range(n)]
