# SPDX-License-Identifier: Apache-2.0
"""Measurements shared by the Python benchmarks (imported from the scripts
in this directory, which run each contender in its own process)."""

import resource


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
