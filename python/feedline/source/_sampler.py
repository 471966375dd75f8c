"""Samplers that shard a dataset of ``n`` indices across ranks."""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ._checks import check_int, check_matches, check_rank, check_state
from ._resumable import Passes

__all__ = ["DistributedDeterministicSampler", "DistributedRandomSampler"]


class DistributedDeterministicSampler:
    """The indices ``rank, rank + world_size, rank + 2 * world_size, ...`` of
    ``range(n)``: the same sequence on every pass.

    Args:
        n: the dataset size (> 0).
        rank, world_size: this rank, ``0 <= rank < world_size``.
        ddp_drop_last_distributed_round: True (default): every rank gets
            ``n // world_size`` indices and the last ``n % world_size`` are
            left out, so ranks step in lockstep (a warning says when that
            drops indices); False: all ``n`` indices are covered, the first
            ``n % world_size`` ranks getting one more.

    Resumable: ``state_dict()`` holds the position in the current pass and
    ``load_state_dict()`` makes the next pass start there.
    """

    def __init__(
        self,
        n: int,
        /,
        *,
        rank: int,
        world_size: int,
        ddp_drop_last_distributed_round: bool = True,
    ) -> None:
        self._n = check_int("n", n, minimum=1)
        self._rank, self._world_size = check_rank(rank, world_size)
        self._drop_last = bool(ddp_drop_last_distributed_round)
        if self._drop_last:
            if self._n < self._world_size:
                raise ValueError(
                    f"n ({self._n}) must be >= world_size ({self._world_size}) "
                    "with ddp_drop_last_distributed_round=True"
                )
            if self._n % self._world_size:
                warnings.warn(
                    f"n ({self._n}) is not a multiple of world_size ({self._world_size}); "
                    f"the last {self._n % self._world_size} indices are not used",
                    stacklevel=2,
                )
            self._total = self._n // self._world_size * self._world_size
        else:
            self._total = self._n
        self._order = range(self._rank, self._total, self._world_size)
        self._passes: Passes[int] = Passes()
        self.epoch = 0

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[int]:
        return self._passes.run(self._order)

    def set_epoch(self, epoch: int) -> None:
        """Records the epoch (the order does not depend on it); for code
        written for ``torch.utils.data.DistributedSampler``."""
        self.epoch = check_int("epoch", epoch, minimum=0)

    def state_dict(self) -> dict[str, Any]:
        return {"n": self._n, "rank": self._rank, "world_size": self._world_size, "position": self._passes.position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, type(self).__name__, ("position",))
        check_matches(type(self).__name__, state, n=self._n, rank=self._rank, world_size=self._world_size)
        position = check_int("position", state["position"], minimum=0)
        if position > len(self):
            raise ValueError(f"position must be <= {len(self)} (the pass length), got {position}")
        self._passes.restore(position, len(self))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._n}, rank={self._rank}, world_size={self._world_size}, "
            f"ddp_drop_last_distributed_round={self._drop_last})"
        )


class DistributedRandomSampler:
    """Random indices out of ``range(n)``, sharded across ranks.

    Each pass draws ``num_draws`` indices with
    ``numpy.random.default_rng(seed).choice(n, num_draws, replace=weights is
    not None, p=weights / sum(weights))`` and this rank yields every
    ``world_size``-th of them, starting at ``rank``. Without weights the draw
    is a permutation, so the ranks' shards are disjoint; with
    ``ddp_drop_last_distributed_round=False`` and ``num_draws`` left at ``n``
    they also cover every index: each sample is seen exactly once per epoch
    across all ranks (full coverage). With weights, indices are drawn with
    replacement in proportion to their weight.

    The sequence depends on the seed alone (never on global random state,
    threads or pickling), so every rank computes the same draw. It changes
    with ``shuffle(seed)`` (SPDL's protocol, used by
    :func:`feedline.source.utils.embed_shuffle`) or ``set_epoch(epoch)``
    (``torch.utils.data.DistributedSampler``'s; the seed becomes
    ``seed + epoch``). :class:`feedline.dataloader.DataLoader` calls
    ``set_epoch`` before every epoch.

    Args:
        n: the dataset size (> 0).
        rank, world_size: this rank, ``0 <= rank < world_size``.
        num_draws: indices drawn per pass (> 0; default ``n``). With
            ``ddp_drop_last_distributed_round=True`` it is rounded down to a
            multiple of ``world_size`` (and must be >= world_size) so every
            rank gets the same number; without weights, at most ``n``.
        weights: ``n`` finite, non-negative sampling weights, not all zero.
        seed: the seed of the first pass.

    Resumable: ``state_dict()`` is the seed, epoch and position (a few
    integers whatever ``n``); after ``load_state_dict()`` the next pass
    continues from that position in the same draw.
    """

    def __init__(
        self,
        n: int,
        /,
        *,
        rank: int,
        world_size: int,
        num_draws: int | None = None,
        weights: Sequence[float] | None = None,
        seed: int = 0,
        ddp_drop_last_distributed_round: bool = True,
    ) -> None:
        self._n = check_int("n", n, minimum=1)
        self._rank, self._world_size = check_rank(rank, world_size)
        self._drop_last = bool(ddp_drop_last_distributed_round)
        draws = self._n if num_draws is None else check_int("num_draws", num_draws, minimum=1)
        self._p = None if weights is None else _probabilities(weights, self._n)
        if self._p is None and draws > self._n:
            raise ValueError(f"num_draws must be <= n ({self._n}) without weights (no replacement), got {draws}")
        if self._drop_last:
            if draws < self._world_size and num_draws is None:
                raise ValueError(
                    f"n ({self._n}) must be >= world_size ({self._world_size}) "
                    "with ddp_drop_last_distributed_round=True"
                )
            if draws < self._world_size:
                raise ValueError(
                    f"num_draws must be >= world_size ({self._world_size}) "
                    f"with ddp_drop_last_distributed_round=True, got {draws}"
                )
            draws = draws // self._world_size * self._world_size
        self._num_draws = draws
        self._base_seed = check_int("seed", seed, minimum=0)
        self._seed = self._base_seed
        self.epoch = 0
        self._order: np.ndarray | None = None  # this rank's share of the current draw
        self._order_seed = -1
        self._passes: Passes[Any] = Passes()  # over an ndarray of indices

    def __len__(self) -> int:
        return len(range(self._rank, self._num_draws, self._world_size))

    @property
    def seed(self) -> int:
        """The seed of the current draw."""
        return self._seed

    def shuffle(self, seed: int) -> None:
        """Makes later passes use the draw of ``seed``."""
        self._reseed(check_int("seed", seed, minimum=0))

    def set_epoch(self, epoch: int) -> None:
        """Makes later passes use the draw of ``seed + epoch``."""
        self.epoch = check_int("epoch", epoch, minimum=0)
        self._reseed(self._base_seed + self.epoch)

    def _reseed(self, seed: int) -> None:
        if seed != self._seed:
            self._seed = seed
            self._passes.resume_at(0)  # a saved position belongs to another draw

    def _current_order(self) -> Any:
        if self._order is None or self._order_seed != self._seed:
            rng = np.random.default_rng(self._seed)
            drawn = rng.choice(self._n, size=self._num_draws, replace=self._p is not None, p=self._p)
            self._order = drawn[self._rank :: self._world_size]
            self._order_seed = self._seed
        return self._order

    def __iter__(self) -> Iterator[int]:
        order = self._current_order()
        return (int(i) for i in self._passes.run(order))

    def state_dict(self) -> dict[str, Any]:
        return {
            "n": self._n,
            "rank": self._rank,
            "world_size": self._world_size,
            "seed": self._seed,
            "epoch": self.epoch,
            "position": self._passes.position,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, type(self).__name__, ("seed", "position"))
        check_matches(type(self).__name__, state, n=self._n, rank=self._rank, world_size=self._world_size)
        seed = check_int("seed", state["seed"], minimum=0)
        position = check_int("position", state["position"], minimum=0)
        if position > len(self):
            raise ValueError(f"position must be <= {len(self)} (the pass length), got {position}")
        self.epoch = check_int("epoch", state.get("epoch", 0), minimum=0)
        self._seed = seed
        self._passes.restore(position, len(self))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._n}, rank={self._rank}, world_size={self._world_size}, "
            f"num_draws={self._num_draws}, weighted={self._p is not None}, seed={self._seed})"
        )


def _probabilities(weights: Sequence[float], n: int) -> np.ndarray:
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"weights must be a sequence of numbers: {e}") from None
    if w.ndim != 1 or len(w) != n:
        raise ValueError(f"weights must have n ({n}) entries, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(
            f"weights must be finite, got {w[~np.isfinite(w)][0]} at index {int(np.argmin(np.isfinite(w)))}"
        )
    if np.any(w < 0):
        i = int(np.argmax(w < 0))
        raise ValueError(f"weights must be >= 0, got {w[i]} at index {i}")
    if len(w) and w.max() > sys.float_info.max / len(w):  # the sum could overflow: scale down first
        w = w / w.max()
    total = math.fsum(w.tolist())
    if total <= 0:
        raise ValueError("weights must not all be zero")
    return w / total
