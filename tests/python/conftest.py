"""Shared pytest configuration for the feedline Python tests.

The markers (``slow``, ``gpu``) and the default ``-m 'not slow'`` are declared
in pyproject.toml under [tool.pytest.ini_options].

The native test ops and error hooks come from ``_feedline_testing``, a
test-only extension that is never installed (source in tests/python/native/).
``make test-ext`` builds it into build/pytest; this file puts that directory
(or $FEEDLINE_TEST_EXT_DIR) on sys.path.
"""

import importlib.util
import os
import pathlib
import sys

_ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_EXT_DIR = pathlib.Path(
    os.environ.get("FEEDLINE_TEST_EXT_DIR", _ROOT / "build" / "pytest" / "tests" / "python" / "native")
)
sys.path.insert(0, str(TEST_EXT_DIR))


def pytest_report_header(config):
    spec = importlib.util.find_spec("_feedline_testing")
    if spec is None:
        return f"_feedline_testing: not built in {TEST_EXT_DIR} (run `make test-ext`)"
    return f"_feedline_testing: {spec.origin}"
