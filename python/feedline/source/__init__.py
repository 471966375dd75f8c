"""Sources for training loops: samplers that shard a dataset across ranks,
directory and ImageNet-layout sources, and iterator utilities.

The names and semantics of ``spdl.source``: :class:`DistributedRandomSampler`,
:class:`DistributedDeterministicSampler`, the protocols
:class:`IterableWithShuffle`, :class:`SizedIterable` and
:class:`SizedIterableWithShuffle`, and the submodules :mod:`.utils`
(``MergeIterator``, ``repeat_source``, ``embed_shuffle``),
:mod:`.local_directory` (``LocalDirectory``) and :mod:`.imagenet`
(``ImageNet``, ``get_mappings``, ``parse_wnid``).

Beyond SPDL, every source here is resumable: ``state_dict()`` returns a few
integers and seeds (never the data, whatever the dataset size) and
``load_state_dict()`` makes the next pass continue where the saved one
stopped. Bad arguments raise ValueError naming the argument and its value.
See docs/dataloader.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, TypeVar, runtime_checkable

from . import imagenet, local_directory, utils
from ._sampler import DistributedDeterministicSampler, DistributedRandomSampler
from .imagenet import ImageNet
from .local_directory import LocalDirectory
from .utils import MergeIterator, embed_shuffle, item_rng, repeat_source

__all__ = [
    "DistributedDeterministicSampler",
    "DistributedRandomSampler",
    "ImageNet",
    "IterableWithShuffle",
    "LocalDirectory",
    "MergeIterator",
    "SizedIterable",
    "SizedIterableWithShuffle",
    "embed_shuffle",
    "imagenet",
    "item_rng",
    "local_directory",
    "repeat_source",
    "utils",
]

T_co = TypeVar("T_co", covariant=True)


@runtime_checkable
class IterableWithShuffle(Protocol[T_co]):
    """An iterable whose order ``shuffle(seed)`` changes."""

    def __iter__(self) -> Iterator[T_co]: ...

    def shuffle(self, seed: int) -> None: ...


@runtime_checkable
class SizedIterable(Protocol[T_co]):
    """An iterable with ``len()``."""

    def __iter__(self) -> Iterator[T_co]: ...

    def __len__(self) -> int: ...


@runtime_checkable
class SizedIterableWithShuffle(Protocol[T_co]):
    """An iterable with ``len()`` and ``shuffle(seed)``."""

    def __iter__(self) -> Iterator[T_co]: ...

    def __len__(self) -> int: ...

    def shuffle(self, seed: int) -> None: ...
