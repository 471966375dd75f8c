"""The migration adapter: a map-style ``torch.utils.data.Dataset`` loaded on
threads through feedline, with ``torch.utils.data.DataLoader``'s arguments.

torch is optional: it is imported only when a collate or pin step needs it.
"""

from __future__ import annotations

import collections.abc
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..source._checks import check_int
from ..source._sampler import DistributedRandomSampler
from ._dataloader import DataLoader

__all__ = ["PyTorchDataLoader", "default_collate", "get_pytorch_dataloader"]


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def default_collate(batch: Sequence[Any]) -> Any:
    """Stacks a list of samples into a batch, as
    ``torch.utils.data.default_collate`` does.

    With torch installed it *is* torch's (tensors, NumPy arrays and numbers
    become tensors; dicts, tuples, lists and namedtuples are collated field
    by field; strings stay lists). Without torch, the same structure with
    NumPy arrays in place of tensors.
    """
    torch = _torch()
    if torch is not None:
        return torch.utils.data.default_collate(batch)
    return _numpy_collate(batch)


def _numpy_collate(batch: Sequence[Any]) -> Any:
    first = batch[0]
    if isinstance(first, np.ndarray):
        return np.stack(batch)
    if isinstance(first, (bool, int, float, np.number)):
        return np.asarray(batch)
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {key: _numpy_collate([sample[key] for sample in batch]) for key in first}
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # namedtuple
        return type(first)(*(_numpy_collate(list(field)) for field in zip(*batch)))
    if isinstance(first, collections.abc.Sequence):
        size = len(first)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [_numpy_collate(list(field)) for field in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain arrays, numbers, dicts or lists; found {type(first)}")


def _default_convert(sample: Any) -> Any:
    torch = _torch()
    if torch is not None:
        return torch.utils.data.default_convert(sample)
    return sample


class _Fetch:
    """dataset[index] (or one batch of indices, through ``__getitems__`` when
    the dataset has it), then collate."""

    def __init__(self, dataset: Any, collate: Callable[[Any], Any] | None, batched: bool) -> None:
        self._dataset = dataset
        self._collate = collate
        self._batched = batched

    def __call__(self, index: Any) -> Any:
        ds = self._dataset
        if self._batched:
            getitems = getattr(ds, "__getitems__", None)
            samples = getitems(list(index)) if callable(getitems) else [ds[i] for i in index]
            return self._collate(samples) if self._collate is not None else samples
        sample = ds[index]
        return self._collate(sample) if self._collate is not None else sample


class PyTorchDataLoader(DataLoader[Any, Any]):
    """``torch.utils.data.DataLoader`` for a map-style dataset, on threads.

    Change one line of a PyTorch script::

        # from torch.utils.data import DataLoader
        from feedline.dataloader import PyTorchDataLoader as DataLoader

    The arguments are the DataLoader's. ``dataset[i]`` runs on
    ``num_threads`` threads of one feedline pipeline that stays warm across
    epochs (no worker processes: nothing is pickled or copied, the first
    batch comes at once); samples are batched and collated with
    ``collate_fn`` (default :func:`default_collate`). What differs:

    - ``num_workers`` is the number of threads (at least 1); set
      ``num_threads`` to choose it independently. Threads help as far as
      ``__getitem__`` releases the GIL (decoders, NumPy, I/O and torch ops
      do; pure-Python code does not).
    - ``shuffle=True`` draws each epoch's permutation from ``(seed, epoch)``
      with NumPy (``seed``: given, or ``generator.initial_seed()``, or
      ``torch.initial_seed()``): the same items per epoch as torch, in
      another order. The epoch advances at each full pass; ``set_epoch``
      sets it.
    - ``in_order=True`` (default) delivers batches in sampler order;
      ``False`` as they complete.
    - A ``dataset[i]`` (or ``collate_fn``) that raises ends the epoch with
      :class:`feedline.PipelineFailure` holding the exception, as torch
      raises it; ``max_failures=N`` (feedline's addition; -1: any number)
      tolerates N failed calls instead, each left out of its batch and
      logged.
    - ``worker_init_fn`` and ``IterableDataset`` are refused (ValueError);
      use :func:`feedline.dataloader.item_rng` for per-item randomness.
      ``multiprocessing_context`` and ``persistent_workers`` are ignored.
    - ``state_dict()``/``load_state_dict()`` resume mid-epoch (see
      :class:`DataLoader`), exactly when the sampler's order is a function
      of the epoch (the default samplers, ``shuffle=True`` here, or any
      sampler with ``set_epoch``).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[Sequence[Any]] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        num_threads: int | None = None,
        seed: int | None = None,
        max_failures: int = 0,
    ) -> None:
        del multiprocessing_context, persistent_workers  # threads: nothing to spawn or keep
        torch = _torch()
        if torch is not None and isinstance(dataset, torch.utils.data.IterableDataset):
            raise ValueError("dataset must be map-style (__getitem__ and __len__); an IterableDataset is not supported")
        if not hasattr(dataset, "__getitem__"):
            raise ValueError(f"dataset must be map-style (have __getitem__), got {type(dataset).__name__}")
        if worker_init_fn is not None:
            raise ValueError("worker_init_fn is not supported (no worker processes); use feedline.dataloader.item_rng")
        if pin_memory_device:
            raise ValueError(f"pin_memory_device is not supported, got {pin_memory_device!r}")
        num_workers = check_int("num_workers", num_workers, minimum=0)
        if timeout < 0:
            raise ValueError(f"timeout must be >= 0, got {timeout!r}")
        if prefetch_factor is not None:
            prefetch_factor = check_int("prefetch_factor", prefetch_factor, minimum=1)
        threads = max(1, num_workers) if num_threads is None else check_int("num_threads", num_threads, minimum=1)
        if batch_size is not None:
            batch_size = check_int("batch_size", batch_size, minimum=1)

        # torch's mutual-exclusion rules.
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last"
                )
            batch_size = None
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")

        self.seed = _pick_seed(seed, generator, torch)
        if batch_sampler is not None:
            src: Iterable[Any] = batch_sampler
        elif sampler is not None:
            src = sampler
        elif shuffle:
            if len(dataset) == 0:
                raise ValueError("dataset is empty")
            src = DistributedRandomSampler(
                len(dataset), rank=0, world_size=1, seed=self.seed, ddp_drop_last_distributed_round=False
            )
        else:
            src = range(len(dataset))

        batched_fetch = batch_sampler is not None
        if batch_sampler is not None:
            fetch_collate = collate_fn if collate_fn is not None else default_collate
        elif batch_size is None:
            fetch_collate = collate_fn if collate_fn is not None else _default_convert
        else:
            fetch_collate = None
        aggregator = None
        if batch_size is not None:
            aggregator = collate_fn if collate_fn is not None else default_collate
        transfer = _pin if pin_memory and torch is not None and torch.cuda.is_available() else None
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler if sampler is not None else src
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        super().__init__(
            src,
            preprocessor=_Fetch(dataset, fetch_collate, batched_fetch),
            batch_size=batch_size,
            drop_last=drop_last,
            aggregator=aggregator,
            transfer_fn=transfer,
            buffer_size=prefetch_factor * max(1, num_workers) if prefetch_factor is not None else max(2, 2 * threads),
            num_threads=threads,
            timeout=timeout if timeout > 0 else None,
            output_order="input" if in_order else "completion",
            seed=self.seed,
            max_failures=max_failures,
        )


def _pick_seed(seed: int | None, generator: Any, torch: Any) -> int:
    if seed is not None:
        return check_int("seed", seed, minimum=0)
    if generator is not None:
        return int(generator.initial_seed()) % 2**63
    if torch is not None:
        return int(torch.initial_seed()) % 2**63
    return 0


def _pin(batch: Any) -> Any:
    torch = _torch()

    def pin(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return x.pin_memory()
        if isinstance(x, Mapping):
            return {k: pin(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(pin(v) for v in x)
        return x

    return pin(batch)


def get_pytorch_dataloader(
    dataset: Any,
    batch_size: int | None = 1,
    shuffle: bool | None = False,
    sampler: Iterable[Any] | None = None,
    batch_sampler: Iterable[Sequence[Any]] | None = None,
    num_workers: int = 1,
    collate_fn: Callable[[Any], Any] | None = None,
    pin_memory: bool = False,
    drop_last: bool = False,
    timeout: float | None = None,
    worker_init_fn: Callable[[int], None] | None = None,
    multiprocessing_context: Any = None,
    generator: Any = None,
    *,
    prefetch_factor: int = 2,
    persistent_workers: bool = False,
    pin_memory_device: str | None = None,
    in_order: bool = False,
) -> PyTorchDataLoader:
    """SPDL's function for the adapter, with SPDL's defaults
    (``num_workers=1``, ``in_order=False``): a :class:`PyTorchDataLoader`.

    SPDL runs ``dataset[i]`` in worker processes; feedline runs it on
    ``num_workers`` threads. As in SPDL, ``num_workers=0`` warns and uses 1,
    and ``persistent_workers=True`` is refused (ValueError).
    """
    if persistent_workers:
        raise ValueError("persistent_workers is not supported (the loader is always warm)")
    num_workers = check_int("num_workers", num_workers, minimum=0)
    if num_workers == 0:
        warnings.warn("num_workers=0: loading on 1 thread", stacklevel=2)
        num_workers = 1
    if timeout is not None and timeout < 0:
        raise ValueError(f"timeout must be >= 0, got {timeout!r}")
    return PyTorchDataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        sampler=sampler,
        batch_sampler=batch_sampler,
        num_workers=num_workers,
        collate_fn=collate_fn,
        pin_memory=pin_memory,
        drop_last=drop_last,
        timeout=timeout or 0,
        worker_init_fn=worker_init_fn,
        multiprocessing_context=multiprocessing_context,
        generator=generator,
        prefetch_factor=prefetch_factor,
        pin_memory_device=pin_memory_device or "",
        in_order=in_order,
    )
