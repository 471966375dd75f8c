"""``ImageNet``: ``(path, class index)`` pairs from an ImageNet-layout folder.

The layout is ``root/train/<wnid>/*.JPEG`` and ``root/val/<wnid>/*.JPEG``
(validation images sorted into class folders), where ``<wnid>`` is a WordNet
id such as ``n01440764``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ._resumable import SeededList

__all__ = ["ImageNet", "get_mappings", "parse_wnid"]

_WNID = re.compile(r"n\d{8}")
_SPLITS = ("train", "val")


def parse_wnid(path: str | os.PathLike[str]) -> str:
    """The first WordNet id (``n`` and 8 digits) in ``path``.

    Raises:
        ValueError: ``path`` holds none.
    """
    match = _WNID.search(str(path))
    if match is None:
        raise ValueError(f"path holds no WordNet id (n + 8 digits): {str(path)!r}")
    return match.group(0)


def get_mappings(root: str | os.PathLike[str]) -> dict[str, int]:
    """WordNet id to class index: the sorted class folders found under
    ``root/train`` and ``root/val``, numbered from 0.

    For the full ILSVRC2012 layout that is the usual 1000-class numbering
    (``n01440764`` is 0, ``n03709823`` is 636); for a subset, the classes
    present. (SPDL ships the fixed 1000-class table instead.)

    Raises:
        ValueError: no class folder under either split.
    """
    base = Path(root)
    wnids: set[str] = set()
    for split in _SPLITS:
        folder = base / split
        if folder.is_dir():
            wnids.update(p.name for p in folder.iterdir() if p.is_dir() and _WNID.fullmatch(p.name))
    if not wnids:
        raise ValueError(f"no class folders (n + 8 digits) under {str(base / 'train')!r} or {str(base / 'val')!r}")
    return {wnid: i for i, wnid in enumerate(sorted(wnids))}


class ImageNet(SeededList[tuple[Path, int]]):
    """The ``(path, class_index)`` pairs of one split, sorted by path.

    Args:
        root: the folder holding ``train/`` and ``val/``.
        split: ``"train"`` or ``"val"``.
        mappings: WordNet id to class index; default :func:`get_mappings`.
        pattern: the file pattern inside a class folder (``"*.JPEG"``).

    Has ``len()``, ``shuffle(seed)`` (a permutation drawn from ``seed``
    alone) and ``state_dict()``/``load_state_dict()`` (seed and position).

    Raises:
        ValueError: a bad ``split``, or no image in the split.
    """

    _NAME = "ImageNet"
    _NOUN = "images"

    def __init__(
        self,
        root: str | os.PathLike[str],
        split: str = "val",
        *,
        mappings: Mapping[str, int] | None = None,
        pattern: str = "*.JPEG",
    ) -> None:
        if split not in _SPLITS:
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        self._root = Path(root)
        self._split = split
        self._mappings = dict(get_mappings(root) if mappings is None else mappings)
        paths = sorted((self._root / split).glob(f"*/{pattern}"))
        items: list[tuple[Path, int]] = []
        for p in paths:
            if not _WNID.fullmatch(p.parent.name):
                continue  # not a class folder (as get_mappings() skips it)
            wnid = p.parent.name
            if wnid not in self._mappings:
                raise ValueError(f"class {wnid!r} of {str(p)!r} is not in mappings")
            items.append((p, self._mappings[wnid]))
        if not items:
            raise ValueError(f"no image matches {str(self._root / split / '*' / pattern)!r}")
        self._set_items(items)

    @property
    def classes(self) -> dict[str, int]:
        """WordNet id to class index."""
        return dict(self._mappings)

    def __repr__(self) -> str:
        return f"ImageNet({str(self._root)!r}, split={self._split!r}) ({len(self)} images)"
