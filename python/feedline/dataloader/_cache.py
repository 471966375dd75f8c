"""cache_iterator / CacheDataLoader: replay the first batches to measure how
fast training would go if loading cost nothing (headspace analysis).

Both time the consumer's steps (from one item handed out to the next
request) while the real source feeds it and while the cache does, and
report the ceiling from the steady state: the median step of each phase,
its first steps left out as warm-up. ``CacheDataLoader.headspace()`` returns
the latest :class:`Headspace`, and it is logged (``feedline.dataloader``,
INFO) when an iteration ends.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from ..source._checks import check_int

__all__ = ["CacheDataLoader", "Headspace", "cache_iterator"]

T = TypeVar("T")

_LG = logging.getLogger("feedline.dataloader")

# Steps of each phase left out of the steady state, as warm-up (at most a
# quarter of the phase).
WARMUP_STEPS = 5


@dataclasses.dataclass(frozen=True)
class Headspace:
    """What a faster loader could gain, from the steady state of both phases."""

    loaded_steps: int  # steps timed while the source fed the consumer
    cached_steps: int  # steps timed while the cache did
    loaded_step: float | None  # median seconds per step, or None (no steps)
    cached_step: float | None

    @property
    def gain(self) -> float | None:
        """Seconds per step that loading costs: the most a faster loader
        could save (never below 0)."""
        if self.loaded_step is None or self.cached_step is None:
            return None
        return max(self.loaded_step - self.cached_step, 0.0)

    def __str__(self) -> str:
        def rate(step):
            return f"{1 / step:.1f} steps/s ({step * 1e3:.2f} ms/step)" if step else "n/a"

        text = (
            f"headspace: {rate(self.loaded_step)} with loading over {self.loaded_steps} steps, "
            f"{rate(self.cached_step)} from the cache over {self.cached_steps} steps"
        )
        gain = self.gain
        if gain is not None and self.loaded_step:
            text += f"; loading costs {gain * 1e3:.2f} ms per step ({100 * gain / self.loaded_step:.0f}% of a step)"
        return text


def _steady(steps: list[float]) -> float | None:
    """The median step after the warm-up."""
    skip = min(WARMUP_STEPS, len(steps) // 4)
    kept = steps[skip:]
    return statistics.median(kept) if kept else None


def cache_iterator(
    src: Iterable[T],
    num_caches: int,
    *,
    return_caches_after: int | None = None,
    stop_after: int | None = None,
    delete_src: bool = True,
) -> Iterator[T]:
    """Yields ``src``'s items, keeping the first ``num_caches``; after
    ``return_caches_after`` items (default ``num_caches``) it stops reading
    ``src`` (and drops its reference when ``delete_src``) and yields the
    cached items in a loop, forever or until ``stop_after`` items in all.

    For headspace analysis only: the training loop then runs without any
    loading cost, which bounds what a faster loader could gain.

    Raises:
        ValueError: ``num_caches < 1``, ``return_caches_after < num_caches``,
            or ``stop_after`` below either.
    """
    num_caches = check_int("num_caches", num_caches, minimum=1)
    after = num_caches if return_caches_after is None else check_int("return_caches_after", return_caches_after)
    if after < num_caches:
        raise ValueError(f"return_caches_after must be >= num_caches ({num_caches}), got {after}")
    if stop_after is not None:
        stop_after = check_int("stop_after", stop_after)
        if stop_after < num_caches or stop_after < after:
            raise ValueError(
                f"stop_after must be >= num_caches ({num_caches}) and >= return_caches_after ({after}), "
                f"got {stop_after}"
            )
    return _cache(src, num_caches, after, stop_after, delete_src)


def _cache(
    src: Iterable[T],
    num_caches: int,
    after: int,
    stop_after: int | None,
    delete_src: bool,
    on_report: Callable[[Headspace], None] | None = None,
) -> Iterator[T]:
    cache: list[T] = []
    count = 0
    loaded: list[float] = []
    cached: list[float] = []
    it: Iterator[T] | None = iter(src)
    if delete_src:
        del src
    # A step: from handing out one item to handing out the next, i.e. the
    # consumer's work on it plus any wait for the next one.
    last = 0.0
    try:
        for item in it or ():
            if len(cache) < num_caches:
                cache.append(item)
            now = time.perf_counter()
            if count > 0:
                loaded.append(now - last)
            last = now
            yield item
            count += 1
            if count >= after or (stop_after is not None and count >= stop_after):
                break
        it = None  # reading src is over
        if not cache:
            return
        i = 0
        while stop_after is None or count < stop_after:
            now = time.perf_counter()
            if i > 0:  # the step into the first cached item straddles both
                cached.append(now - last)
            last = now
            yield cache[i % len(cache)]
            i += 1
            count += 1
    finally:
        report = Headspace(len(loaded), len(cached), _steady(loaded), _steady(cached))
        if on_report is not None:
            on_report(report)
        if loaded or cached:
            _LG.info("%s", report)


class CacheDataLoader(Generic[T]):
    """Wraps a data loader so each ``for`` runs :func:`cache_iterator` over
    it; ``len()`` and every other attribute are the wrapped loader's."""

    def __init__(
        self,
        dl: Iterable[T],
        num_caches: int,
        return_caches_after: int,
        stop_after: int | None = None,
        *,
        delete_dl: bool = True,
    ) -> None:
        # Checked now rather than at the first `for`.
        cache_iterator((), num_caches, return_caches_after=return_caches_after, stop_after=stop_after)
        self._dl = dl
        self._num_caches = num_caches
        self._return_caches_after = return_caches_after
        self._stop_after = stop_after
        self._delete_dl = delete_dl
        self._headspace: Headspace | None = None

    def __iter__(self) -> Iterator[T]:
        return _cache(
            self._dl,
            self._num_caches,
            self._return_caches_after,
            self._stop_after,
            self._delete_dl,
            on_report=self._keep,
        )

    def _keep(self, report: Headspace) -> None:
        self._headspace = report

    def headspace(self) -> Headspace | None:
        """The report of the latest iteration that ended (``break`` or the
        end), or None before one has."""
        return self._headspace

    def __len__(self) -> int:
        return len(self._dl)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_dl"], name)
