"""feedline.dataloader.DataLoader: SPDL's arguments, one warm pipeline across
epochs, len(), cache_iterator/CacheDataLoader, and bad arguments."""

import itertools
import subprocess
import sys
import threading

import numpy as np
import pytest

from feedline.dataloader import CacheDataLoader, DataLoader, cache_iterator, item_rng
from feedline.io import ops
from feedline.pipeline import Pipeline
from feedline.source import DistributedRandomSampler


def _ints(batch):
    """A batch of ints, or of the Buffers read_file() gives for them."""
    return sorted(int(bytes(np.asarray(x))) if not isinstance(x, int) else x for x in batch)


def test_plain_iterable_is_one_epoch_per_for():
    dl = DataLoader(range(10), num_threads=2)
    assert sorted(dl) == list(range(10))
    assert sorted(dl) == list(range(10))
    assert dl.epoch == 2


def test_preprocessor_in_input_and_completion_order():
    dl = DataLoader(range(100), preprocessor=lambda x: x * 2, num_threads=4, output_order="input")
    assert list(dl) == [2 * x for x in range(100)]
    dl = DataLoader(range(100), preprocessor=lambda x: x * 2, num_threads=4)
    assert sorted(dl) == [2 * x for x in range(100)]


async def _async_double(x):
    return 2 * x


def test_async_preprocessor():
    dl = DataLoader(range(20), preprocessor=_async_double, num_threads=2, output_order="input")
    assert list(dl) == [2 * x for x in range(20)]


@pytest.mark.parametrize("drop_last", [False, True])
def test_batching_and_len(drop_last):
    dl = DataLoader(range(10), batch_size=3, drop_last=drop_last, num_threads=2, output_order="input")
    expected = [[0, 1, 2], [3, 4, 5], [6, 7, 8]] + ([] if drop_last else [[9]])
    assert list(dl) == expected
    assert len(dl) == len(expected)
    assert list(dl) == expected  # every epoch, on the same pipeline


def test_aggregator_and_transfer_fn_apply_to_batches():
    seen = []
    dl = DataLoader(
        range(8),
        batch_size=4,
        aggregator=sum,
        transfer_fn=lambda b: seen.append(b) or -b,
        num_threads=2,
        output_order="input",
    )
    assert list(dl) == [-6, -22]
    assert seen[:2] == [6, 22]  # (the warm pipeline may already load the next epoch)


def test_none_drops_items():
    dl = DataLoader(range(10), preprocessor=lambda x: x if x % 2 else None, num_threads=2, output_order="input")
    assert list(dl) == [1, 3, 5, 7, 9]


def test_one_warm_pipeline_across_epochs():
    dl = DataLoader(range(6), preprocessor=lambda x: x, batch_size=2, num_threads=2)
    list(dl)
    pipeline = dl._pipeline
    assert isinstance(pipeline, Pipeline)
    for _ in range(3):
        assert sorted(x for b in dl for x in b) == list(range(6))
    assert dl._pipeline is pipeline
    assert dl.epoch == 4
    dl.close()
    assert dl._pipeline is None


def test_set_epoch_is_called_on_the_source_before_each_pass():
    sampler = DistributedRandomSampler(12, rank=0, world_size=1, seed=2)
    dl = DataLoader(sampler, num_threads=1, output_order="input")
    epochs = [list(dl) for _ in range(3)]
    for e, got in enumerate(epochs):
        ref = DistributedRandomSampler(12, rank=0, world_size=1, seed=2)
        ref.set_epoch(e)
        assert got == list(ref)
    assert epochs[0] != epochs[1]


def test_set_epoch_restarts_at_that_epoch():
    sampler = DistributedRandomSampler(12, rank=0, world_size=1, seed=2)
    dl = DataLoader(sampler, num_threads=2, output_order="input")
    first = list(dl)
    dl.set_epoch(1)  # the current one: nothing changes
    second = list(dl)
    dl.set_epoch(0)
    assert list(dl) == first
    assert list(dl) == second


def test_break_then_for_continues_the_epoch():
    dl = DataLoader(range(10), num_threads=2, output_order="input")
    got = []
    for x in dl:
        got.append(x)
        if x == 3:
            break
    assert dl.epoch == 0
    got += list(dl)
    assert got == list(range(10))
    assert dl.epoch == 1


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("order", ["input", "completion"])
@pytest.mark.parametrize("drop_last", [False, True])
def test_a_for_that_stops_at_the_last_batch_leaves_the_next_epoch_whole(tmp_path, drop_last, order, native):
    # zip(range(len(loader)), loader) stops without asking for the value
    # after the last batch; the epoch's end was then all the next `for` read.
    src: list = list(range(10))
    kwargs = {}
    if native:  # a native preprocessor: counted mode (nothing tagged)
        for i in src:
            (tmp_path / str(i)).write_text(str(i))
        src, kwargs = [str(tmp_path / str(i)) for i in src], {"preprocessor": ops.read_file(field=None)}
    dl = DataLoader(src, batch_size=4, num_threads=2, drop_last=drop_last, output_order=order, **kwargs)
    n_batches, n_items = (2, 8) if drop_last else (3, 10)

    def check(batches, what):
        items = sorted(x for b in batches for x in _ints(b))
        assert len(batches) == n_batches and len(items) == n_items, what
        assert set(items) <= set(range(10)) and len(set(items)) == n_items, what

    for epoch in range(3):
        check([b for _, b in zip(range(len(dl)), dl)], f"zip, epoch {epoch}")
    check(list(itertools.islice(dl, len(dl))), "islice")
    check(list(dl), "the next epoch, whole")
    assert dl.epoch == 5


def test_a_break_at_the_last_batch_then_a_break_mid_epoch():
    dl = DataLoader(range(10), batch_size=4, num_threads=2, output_order="input")
    for i, _ in enumerate(dl):
        if i == 2:
            break  # the last batch
    assert dl.epoch == 0
    for b in dl:  # finishes epoch 0 (nothing left) and reads epoch 1
        assert b == [0, 1, 2, 3]
        break
    assert dl.epoch == 1
    assert list(dl) == [[4, 5, 6, 7], [8, 9]]  # the rest of epoch 1
    assert dl.epoch == 2


def test_item_rng_inside_and_outside_a_preprocessor():
    def draw(i):
        return i, int(item_rng().integers(1 << 30))

    runs = [sorted(DataLoader(range(50), preprocessor=draw, num_threads=t, seed=3)) for t in (1, 4)]
    assert runs[0] == runs[1]
    other = sorted(DataLoader(range(50), preprocessor=draw, num_threads=2, seed=4))
    assert other != runs[0]
    with pytest.raises(RuntimeError, match="only available inside"):
        item_rng()


def test_failed_items_are_dropped_and_the_epoch_goes_on():
    def pre(x):
        if x in (2, 5):
            raise ValueError(f"bad {x}")
        return x

    dl = DataLoader(range(8), preprocessor=pre, batch_size=3, num_threads=2, output_order="input")
    assert list(dl) == [[0, 1, 3], [4, 6, 7]]
    assert list(dl) == [[0, 1, 3], [4, 6, 7]]


def test_buffer_lets_the_pipeline_run_ahead():
    # With a buffer of 5 the pipeline loads 5 items before the consumer reads.
    loaded = threading.Semaphore(0)

    def pre(x):
        loaded.release()
        return x

    dl = DataLoader(range(20), preprocessor=pre, buffer_size=5, num_threads=2)
    it = iter(dl)
    next(it)
    for _ in range(5):
        assert loaded.acquire(timeout=10)
    assert len([next(it) for _ in range(19)]) == 19
    dl.close()


def test_timeout_is_passed_to_the_pipeline():
    gate = threading.Event()

    def pre(x):
        gate.wait(10)
        return x

    dl = DataLoader(range(2), preprocessor=pre, num_threads=1, timeout=0.05)
    with pytest.raises(TimeoutError):
        next(iter(dl))
    gate.set()
    dl.close()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(batch_size=0), r"batch_size must be >= 1, got 0"),
        (dict(batch_size=-2), r"batch_size must be >= 1, got -2"),
        (dict(num_threads=0), r"num_threads must be >= 1, got 0"),
        (dict(buffer_size=0), r"buffer_size must be >= 1, got 0"),
        (dict(output_order="random"), r"output_order must be 'completion' or 'input', got 'random'"),
        (dict(timeout=0), r"timeout must be > 0 seconds or None, got 0"),
        (dict(preprocessor=3), r"preprocessor must be callable"),
        (dict(seed=-1), r"seed must be >= 0, got -1"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(range(4), **kwargs)


def test_bad_sources():
    with pytest.raises(ValueError, match=r"src is empty \(len\(\) == 0\)$"):
        DataLoader([])
    # A shard of fewer items than ranks: the message names the rank.
    empty_shard = DistributedRandomSampler(3, rank=3, world_size=4, ddp_drop_last_distributed_round=False)
    with pytest.raises(ValueError, match="rank 3 of world_size 4 gets no index"):
        DataLoader(empty_shard)
    with pytest.raises(ValueError, match="src must be an iterable, got int"):
        DataLoader(3)


# -- cache_iterator / CacheDataLoader -------------------------------------------------


def test_cache_iterator():
    it = cache_iterator(range(100), 3, stop_after=10)
    assert list(it) == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    it = cache_iterator(range(100), 3, return_caches_after=5, stop_after=11)
    assert list(it) == [0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2]
    it = cache_iterator(iter(range(2)), 3, stop_after=6)
    assert list(it) == [0, 1, 0, 1, 0, 1]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_caches=0), r"num_caches must be >= 1, got 0"),
        (dict(num_caches=3, return_caches_after=2), r"return_caches_after must be >= num_caches \(3\), got 2"),
        (dict(num_caches=3, stop_after=2), r"stop_after must be >= num_caches \(3\)"),
        (dict(num_caches=3, return_caches_after=5, stop_after=4), r"and >= return_caches_after \(5\), got 4"),
    ],
)
def test_cache_iterator_bad_arguments(kwargs, match):
    n = kwargs.pop("num_caches")
    with pytest.raises(ValueError, match=match):
        cache_iterator(range(10), n, **kwargs)


def test_cache_dataloader_wraps_a_loader():
    dl = DataLoader(range(20), batch_size=4, num_threads=2, output_order="input")
    cached = CacheDataLoader(dl, num_caches=2, return_caches_after=3, stop_after=7)
    assert len(cached) == 5
    assert cached.epoch == 0  # attributes are the wrapped loader's
    assert list(cached) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]] + [[0, 1, 2, 3], [4, 5, 6, 7]] * 2
    with pytest.raises(ValueError, match="return_caches_after"):
        CacheDataLoader(dl, 3, 2)


def test_torch_stays_optional():
    # Importing the loaders (and running one) never imports torch.
    code = (
        "import sys\n"
        "from feedline.dataloader import DataLoader, default_collate\n"
        "import feedline.source\n"
        "assert list(DataLoader(range(4), batch_size=2, output_order='input')) == [[0, 1], [2, 3]]\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_item_rng_in_interleaved_async_preprocessors():
    import asyncio

    from feedline.source import item_rng as keyed_rng

    async def pre(i):
        for _ in range(i % 3):
            await asyncio.sleep(0)  # let the other coroutines run in between
        return i, int(item_rng().integers(1 << 30))

    got = sorted(DataLoader(range(40), preprocessor=pre, num_threads=4, seed=2))
    assert got == [(i, int(keyed_rng(2, 0, i).integers(1 << 30))) for i in range(40)]


class _BadAtFive:
    """A map-style dataset (no torch needed) whose item 5 raises."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 5:
            raise KeyError(f"sample {i} is missing")
        return i


def test_pytorch_dataloader_raises_a_failed_item_as_torch_does():
    # The DataLoader's own default tolerates failures (logged, left out);
    # torch's DataLoader raises, and so does its drop-in replacement.
    from feedline import PipelineFailure
    from feedline.dataloader import PyTorchDataLoader

    with pytest.raises(PipelineFailure, match="sample 5 is missing"):
        list(PyTorchDataLoader(_BadAtFive(), batch_size=4))
    tolerant = PyTorchDataLoader(_BadAtFive(), batch_size=4, max_failures=-1)
    assert [b.tolist() for b in tolerant] == [[0, 1, 2, 3], [4, 6, 7]]
