"""Data loaders for training loops, on feedline's pipeline engine.

The names of ``spdl.dataloader``: :class:`DataLoader` (a source, a
preprocessor on threads, batching and a hand-off, on one pipeline that stays
warm across epochs), :class:`CacheDataLoader` and :func:`cache_iterator`
(headspace analysis), and the migration adapter for PyTorch,
:class:`PyTorchDataLoader` / :func:`get_pytorch_dataloader`, which takes a
map-style ``torch.utils.data.Dataset`` with the arguments of
``torch.utils.data.DataLoader`` and loads it on threads.

Beyond SPDL, every loader is resumable: ``state_dict()`` is a few integers
and seeds and ``load_state_dict()`` continues an epoch exactly where the
consumer stopped; :func:`item_rng` gives per-item randomness that does not
depend on threads. torch is optional (imported only by the adapter's collate
and pin steps). See docs/dataloader.md.
"""

from ._cache import CacheDataLoader, Headspace, cache_iterator
from ._dataloader import DataLoader, item_rng
from ._torch import PyTorchDataLoader, default_collate, get_pytorch_dataloader

__all__ = [
    "CacheDataLoader",
    "Headspace",
    "DataLoader",
    "PyTorchDataLoader",
    "cache_iterator",
    "default_collate",
    "get_pytorch_dataloader",
    "item_rng",
]
