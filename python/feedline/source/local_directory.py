"""``LocalDirectory``: the files of a directory that match a glob pattern."""

from __future__ import annotations

import os
from pathlib import Path

from ._resumable import SeededList

__all__ = ["LocalDirectory"]


class LocalDirectory(SeededList[Path]):
    """The paths under ``root`` matching ``pattern`` (``Path.glob`` syntax,
    e.g. ``"*.jpg"`` or ``"**/*.JPEG"``), in sorted order.

    ``shuffle(seed)`` sets the order to a permutation of the sorted list that
    depends on ``seed`` alone (SPDL shuffles the current order, so its order
    depends on every earlier shuffle; here a resume needs only the seed).

    Raises:
        ValueError: ``root`` is not a directory, or nothing matches.
    """

    _NAME = "LocalDirectory"
    _NOUN = "paths"

    def __init__(self, root: str | os.PathLike[str], pattern: str) -> None:
        self._root = Path(root)
        if not self._root.is_dir():
            raise ValueError(f"root must be a directory, got {str(root)!r}")
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"pattern must be a non-empty str, got {pattern!r}")
        if Path(pattern).is_absolute():
            raise ValueError(f"pattern must be relative to root, got {pattern!r}")
        self._pattern = pattern
        paths = sorted(self._root.glob(pattern))
        if not paths:
            raise ValueError(f"no path under root {str(root)!r} matches pattern {pattern!r}")
        self._set_items(paths)

    def __repr__(self) -> str:
        return f"LocalDirectory({str(self._root)!r}, {self._pattern!r}) ({len(self)} paths)"
