"""Shared pytest configuration for the feedline Python tests.

The markers (``slow``, ``gpu``) and the default ``-m 'not slow'`` are declared
in pyproject.toml under [tool.pytest.ini_options].
"""
