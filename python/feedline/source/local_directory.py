"""``LocalDirectory``: the files of a directory that match a glob pattern."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ._checks import check_int, check_matches, check_state
from ._resumable import Passes

__all__ = ["LocalDirectory"]


class LocalDirectory:
    """The paths under ``root`` matching ``pattern`` (``Path.glob`` syntax,
    e.g. ``"*.jpg"`` or ``"**/*.JPEG"``), in sorted order.

    ``shuffle(seed)`` sets the order to a permutation of the sorted list that
    depends on ``seed`` alone (SPDL shuffles the current order, so its order
    depends on every earlier shuffle; here a resume needs only the seed).

    Raises:
        ValueError: ``root`` is not a directory, or nothing matches.
    """

    def __init__(self, root: str | os.PathLike[str], pattern: str) -> None:
        self._root = Path(root)
        if not self._root.is_dir():
            raise ValueError(f"root must be a directory, got {str(root)!r}")
        self._pattern = pattern
        self._sorted = sorted(self._root.glob(pattern))
        if not self._sorted:
            raise ValueError(f"no path under root {str(root)!r} matches pattern {pattern!r}")
        self._order = self._sorted
        self._seed: int | None = None
        self._passes: Passes[Path] = Passes()

    def __len__(self) -> int:
        return len(self._sorted)

    def __iter__(self) -> Iterator[Path]:
        return self._passes.run(self._order)

    def shuffle(self, seed: int) -> None:
        """Orders the paths by a permutation of the sorted list drawn from ``seed``."""
        seed = check_int("seed", seed, minimum=0)
        if seed != self._seed:
            self._passes.resume_at(0)
        self._apply(seed)

    def _apply(self, seed: int | None) -> None:
        self._seed = seed
        if seed is None:
            self._order = self._sorted
        else:
            order = list(self._sorted)
            random.Random(seed).shuffle(order)
            self._order = order

    def state_dict(self) -> dict[str, Any]:
        return {"n": len(self._sorted), "seed": self._seed, "position": self._passes.position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        state = check_state(state, "LocalDirectory", ("seed", "position"))
        check_matches("LocalDirectory", state, n=len(self._sorted))
        seed = state["seed"]
        self._apply(None if seed is None else check_int("seed", seed, minimum=0))
        position = check_int("position", state["position"], minimum=0)
        if position > len(self):
            raise ValueError(f"position must be <= {len(self)} (the number of paths), got {position}")
        self._passes.resume_at(position)

    def __repr__(self) -> str:
        return f"LocalDirectory({str(self._root)!r}, {self._pattern!r}) ({len(self)} paths)"
