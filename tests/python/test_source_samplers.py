"""feedline.source samplers: sharding properties over many configurations,
per-epoch reshuffling, independence from global state, resumable state, and
ValueErrors that name the bad argument."""

import itertools
import pickle
import random
import warnings

import numpy as np
import pytest

from feedline.source import DistributedDeterministicSampler, DistributedRandomSampler, LocalDirectory

SIZES = [1, 2, 3, 5, 7, 8, 12, 13, 50]
WORLD_SIZES = [1, 2, 3, 4, 5]
SEEDS = [0, 7, 12345]


def _configs():
    for n, ws, drop in itertools.product(SIZES, WORLD_SIZES, (True, False)):
        if drop and n < ws:
            continue  # rejected (see test_drop_last_needs_n_at_least_world_size)
        yield n, ws, drop


def _random_shards(n, ws, drop, seed, epoch=None, **kw):
    shards = []
    for rank in range(ws):
        s = DistributedRandomSampler(n, rank=rank, world_size=ws, seed=seed, ddp_drop_last_distributed_round=drop, **kw)
        if epoch is not None:
            s.set_epoch(epoch)
        shards.append(list(s))
        assert len(shards[-1]) == len(s)
    return shards


@pytest.mark.parametrize("n,ws,drop", list(_configs()))
@pytest.mark.parametrize("seed", SEEDS)
def test_random_sampler_shards_are_disjoint_complete_balanced_reproducible(n, ws, drop, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shards = _random_shards(n, ws, drop, seed)
        again = _random_shards(n, ws, drop, seed)
    flat = [i for s in shards for i in s]
    assert all(isinstance(i, int) for i in flat)
    assert len(flat) == len(set(flat)), "a sample appears on two ranks (or twice)"
    if drop:
        assert {len(s) for s in shards} == {n // ws}
        assert len(flat) == n // ws * ws
    else:
        # Full coverage: every sample exactly once across ranks.
        assert sorted(flat) == list(range(n))
        assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shards == again


@pytest.mark.parametrize("n,ws,drop", [c for c in _configs() if c[0] >= 8])
def test_random_sampler_reshuffles_per_epoch_and_repeats_without(n, ws, drop):
    s = DistributedRandomSampler(n, rank=0, world_size=ws, seed=3, ddp_drop_last_distributed_round=drop)
    first, second = list(s), list(s)
    assert first == second  # no reshuffle without set_epoch/shuffle
    by_epoch = [_random_shards(n, ws, drop, 3, epoch=e) for e in range(4)]
    assert by_epoch[0] == _random_shards(n, ws, drop, 3)
    orders = [tuple(i for shard in shards for i in shard) for shards in by_epoch]
    assert len(set(orders)) == 4, "every epoch has its own order"
    for shards in by_epoch:  # still disjoint and complete in every epoch
        flat = sorted(i for shard in shards for i in shard)
        assert flat == (list(range(n)) if not drop else sorted(set(flat)))
        assert len(flat) == len(set(flat))


def test_random_sampler_shuffle_and_set_epoch():
    s = DistributedRandomSampler(30, rank=1, world_size=3, seed=10)
    base = list(s)
    s.shuffle(seed=11)
    by_shuffle = list(s)
    s.set_epoch(1)  # seed + epoch = 11
    assert list(s) == by_shuffle != base
    s.shuffle(seed=10)
    assert list(s) == base


def test_random_sampler_matches_numpy_choice_and_ignores_global_state():
    # The draw is numpy's default_rng(seed).choice, whatever the global RNGs.
    n, ws, seed = 17, 3, 42
    expected = np.random.default_rng(seed).choice(n, size=n // ws * ws, replace=False)
    np.random.seed(1)
    random.seed(1)
    got = [list(DistributedRandomSampler(n, rank=r, world_size=ws, seed=seed)) for r in range(ws)]
    np.random.seed(2)
    random.seed(2)
    s = DistributedRandomSampler(n, rank=2, world_size=ws, seed=seed)
    assert list(pickle.loads(pickle.dumps(s))) == got[2]
    assert got == [expected[r::ws].tolist() for r in range(ws)]


def test_random_sampler_num_draws():
    s = DistributedRandomSampler(10, rank=0, world_size=3, num_draws=7)
    assert len(s) == 2  # 7 rounded down to 6, 2 per rank
    s = DistributedRandomSampler(10, rank=0, world_size=3, num_draws=7, ddp_drop_last_distributed_round=False)
    assert len(s) == 3
    shards = [list(DistributedRandomSampler(10, rank=r, world_size=3, num_draws=7)) for r in range(3)]
    assert len({i for s in shards for i in s}) == 6


def test_weighted_sampling_follows_weights_and_never_draws_zero_weight():
    weights = [0.0, 1.0, 3.0, 0.0]
    s = DistributedRandomSampler(4, rank=0, world_size=1, num_draws=40000, weights=weights, seed=1)
    draws = np.asarray(list(s))
    assert set(np.unique(draws)) == {1, 2}
    assert abs((draws == 2).mean() - 0.75) < 0.02
    # Weighted draws are with replacement, so num_draws may exceed n.
    shards = [list(DistributedRandomSampler(4, rank=r, world_size=2, num_draws=10, weights=weights)) for r in range(2)]
    assert [len(x) for x in shards] == [5, 5]


@pytest.mark.parametrize("n,ws,drop", [c for c in _configs() if c[0] >= 5])
def test_deterministic_sampler_shards(n, ws, drop):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shards = [
            list(DistributedDeterministicSampler(n, rank=r, world_size=ws, ddp_drop_last_distributed_round=drop))
            for r in range(ws)
        ]
    flat = sorted(i for s in shards for i in s)
    assert len(flat) == len(set(flat))
    if drop:
        assert flat == list(range(n // ws * ws))
        assert {len(s) for s in shards} == {n // ws}
    else:
        assert flat == list(range(n))
    assert shards[0] == list(range(0, len(flat), ws))[: len(shards[0])]


def test_deterministic_sampler_is_stable_across_epochs_and_warns_on_dropped_tail():
    s = DistributedDeterministicSampler(10, rank=1, world_size=4, ddp_drop_last_distributed_round=False)
    first = list(s)
    s.set_epoch(3)
    assert list(s) == first == [1, 5, 9]
    with pytest.warns(UserWarning, match="last 2 indices"):
        s = DistributedDeterministicSampler(10, rank=1, world_size=4)
    assert list(s) == [1, 5]


@pytest.mark.parametrize("make", ["random", "deterministic"])
def test_sampler_state_resumes_mid_pass(make):
    def new():
        if make == "random":
            s = DistributedRandomSampler(1000, rank=1, world_size=3, seed=9)
            s.set_epoch(2)
            return s
        return DistributedDeterministicSampler(1000, rank=1, world_size=3, ddp_drop_last_distributed_round=False)

    full = list(new())
    for stop in (0, 1, 17, len(full) - 1, len(full)):
        s = new()
        it = iter(s)
        head = [next(it) for _ in range(stop)]
        state = s.state_dict()
        assert len(pickle.dumps(state)) <= 1024
        resumed = new() if make == "deterministic" else DistributedRandomSampler(1000, rank=1, world_size=3, seed=9)
        resumed.load_state_dict(state)
        if make == "random":
            resumed.set_epoch(2)  # the same epoch again (as a DataLoader does): keeps the position
        rest = list(resumed)
        if stop == len(full):
            assert rest == full  # a finished pass: the next one is whole, not empty
        else:
            assert head + rest == full
        assert list(resumed) == full  # the position applies to one pass only


@pytest.mark.parametrize("make", ["random", "deterministic", "directory"])
def test_a_state_saved_after_an_epoch_restores_to_a_whole_next_epoch(tmp_path, make):
    # The torch-style loop: set_epoch(e), a full pass, a checkpoint.
    for i in range(4):
        (tmp_path / f"{i}.txt").write_text("")

    def new():
        if make == "random":
            return DistributedRandomSampler(4, rank=0, world_size=1, seed=3)
        if make == "deterministic":
            return DistributedDeterministicSampler(4, rank=0, world_size=1)
        return LocalDirectory(tmp_path, "*.txt")

    def epochs(s, first, last):
        out = []
        for e in range(first, last):
            if hasattr(s, "set_epoch"):
                s.set_epoch(e)
            out.append(list(s))
        return out

    want = epochs(new(), 0, 3)[1:]
    s = new()
    epochs(s, 0, 1)
    restored = new()
    restored.load_state_dict(s.state_dict())
    assert epochs(restored, 1, 3) == want
    assert all(len(e) == 4 for e in want)


def test_sampler_state_is_small_whatever_the_size():
    s = DistributedRandomSampler(2_000_000, rank=3, world_size=8, seed=1)
    it = iter(s)
    for _ in range(1000):
        next(it)
    assert len(pickle.dumps(s.state_dict())) <= 1024


def test_sampler_state_for_another_configuration_is_refused():
    a = DistributedRandomSampler(100, rank=0, world_size=2)
    b = DistributedRandomSampler(100, rank=1, world_size=2)
    with pytest.raises(ValueError, match="rank=0"):
        b.load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="position"):
        a.load_state_dict({"seed": 0})
    with pytest.raises(ValueError, match="position must be <= 50"):
        a.load_state_dict({"seed": 0, "position": 51})


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n=10, rank=2, world_size=2), r"rank must be < world_size \(2\), got 2"),
        (dict(n=10, rank=-1, world_size=2), r"rank must be >= 0, got -1"),
        (dict(n=10, rank=0, world_size=0), r"world_size must be >= 1, got 0"),
        (dict(n=0, rank=0, world_size=1), r"n must be >= 1, got 0"),
        (dict(n=-5, rank=0, world_size=1), r"n must be >= 1, got -5"),
        (dict(n=2.5, rank=0, world_size=1), r"n must be an int, got 2.5"),
        (dict(n=3, rank=0, world_size=4), r"n \(3\) must be >= world_size \(4\)"),
    ],
)
@pytest.mark.parametrize("cls", [DistributedRandomSampler, DistributedDeterministicSampler])
def test_bad_arguments_name_the_argument(cls, kwargs, match):
    kwargs = dict(kwargs)
    n = kwargs.pop("n")
    with pytest.raises(ValueError, match=match):
        cls(n, **kwargs)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(num_draws=0), r"num_draws must be >= 1, got 0"),
        (dict(num_draws=-3), r"num_draws must be >= 1, got -3"),
        (dict(num_draws=11), r"num_draws must be <= n \(10\)"),
        (dict(num_draws=1, world_size=2, rank=0), r"num_draws must be >= world_size \(2\)"),
        (dict(weights=[1.0] * 9), r"weights must have n \(10\) entries"),
        (dict(weights=[1.0] * 9 + [-1.0]), r"weights must be >= 0, got -1.0 at index 9"),
        (dict(weights=[1.0] * 9 + [float("nan")]), r"weights must be finite"),
        (dict(weights=[0.0] * 10), r"weights must not all be zero"),
        (dict(seed=-1), r"seed must be >= 0, got -1"),
    ],
)
def test_random_sampler_bad_arguments(kwargs, match):
    kw = dict(rank=0, world_size=1)
    kw.update(kwargs)
    with pytest.raises(ValueError, match=match):
        DistributedRandomSampler(10, **kw)
