"""cache_iterator / CacheDataLoader: replay the first batches to measure how
fast training would go if loading cost nothing (headspace analysis)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from ..source._checks import check_int

__all__ = ["CacheDataLoader", "cache_iterator"]

T = TypeVar("T")


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


def _cache(src: Iterable[T], num_caches: int, after: int, stop_after: int | None, delete_src: bool) -> Iterator[T]:
    cache: list[T] = []
    count = 0
    it: Iterator[T] | None = iter(src)
    if delete_src:
        del src
    for item in it or ():
        if len(cache) < num_caches:
            cache.append(item)
        yield item
        count += 1
        if count >= after or (stop_after is not None and count >= stop_after):
            break
    it = None  # reading src is over
    if not cache:
        return
    i = 0
    while stop_after is None or count < stop_after:
        yield cache[i % len(cache)]
        i += 1
        count += 1


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

    def __iter__(self) -> Iterator[T]:
        return cache_iterator(
            self._dl,
            self._num_caches,
            return_caches_after=self._return_caches_after,
            stop_after=self._stop_after,
            delete_src=self._delete_dl,
        )

    def __len__(self) -> int:
        return len(self._dl)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_dl"], name)
