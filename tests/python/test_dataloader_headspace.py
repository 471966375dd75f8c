# SPDX-License-Identifier: Apache-2.0
"""Headspace analysis: CacheDataLoader times the consumer's steps while the
loader feeds it and while the cache does, and reports the ceiling."""

from __future__ import annotations

import logging
import time

from feedline.dataloader import CacheDataLoader, Headspace
from feedline.dataloader import _cache as cache_module


class SlowLoader:
    """Each batch takes 20 ms to load."""

    def __iter__(self):
        for i in range(1000):
            time.sleep(0.02)
            yield i

    def __len__(self):
        return 1000


def test_the_report_compares_the_steady_steps_of_both_phases(caplog):
    dl = CacheDataLoader(SlowLoader(), num_caches=4, return_caches_after=12, stop_after=40)
    assert dl.headspace() is None
    items = []
    with caplog.at_level(logging.INFO, logger="feedline.dataloader"):
        for item in dl:
            items.append(item)
            time.sleep(0.005)  # the training step
    assert items[:12] == list(range(12)) and items[12:16] == [0, 1, 2, 3] and len(items) == 40
    report = dl.headspace()
    assert isinstance(report, Headspace)
    # 11 steps between the 12 loaded items, 28 between the 28 cached ones
    # (the step into the first cached item belongs to neither).
    assert (report.loaded_steps, report.cached_steps) == (11, 27)
    # A step is the 5 ms of training, plus the 20 ms of loading unless
    # the cache feeds it.
    assert report.loaded_step >= 0.025
    assert 0.005 <= report.cached_step < report.loaded_step
    assert report.gain == report.loaded_step - report.cached_step
    assert any(r.getMessage().startswith("headspace: ") and "loading costs" in r.getMessage() for r in caplog.records)


def test_a_break_still_reports_and_warm_up_is_left_out(monkeypatch):
    monkeypatch.setattr(cache_module, "WARMUP_STEPS", 2)
    steps = []
    dl = CacheDataLoader(SlowLoader(), num_caches=2, return_caches_after=3)
    for i, _ in enumerate(dl):
        steps.append(i)
        if i == 30:
            break
    report = dl.headspace()
    assert report.loaded_steps == 2 and report.cached_steps == 27
    assert cache_module._steady([9.0, 9.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == 4.5
    assert (
        str(Headspace(0, 0, None, None)) == "headspace: n/a with loading over 0 steps, n/a from the cache over 0 steps"
    )
