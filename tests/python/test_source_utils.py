"""feedline.source utilities and sources: MergeIterator, repeat_source,
embed_shuffle, item_rng, LocalDirectory, ImageNet; their resumable state and
bad-argument errors."""

import itertools
import pickle

import pytest

from feedline.source import (
    DistributedRandomSampler,
    ImageNet,
    IterableWithShuffle,
    LocalDirectory,
    MergeIterator,
    SizedIterable,
    SizedIterableWithShuffle,
    embed_shuffle,
    item_rng,
    repeat_source,
)
from feedline.source.imagenet import get_mappings, parse_wnid

# -- MergeIterator ---------------------------------------------------------------


def test_merge_round_robin_until_all_exhausted():
    assert list(MergeIterator([[1, 2, 3], [10, 20], [100]])) == [1, 10, 100, 2, 20, 3]


def test_merge_stop_after():
    srcs = [[1, 2, 3], [10, 20], [100]]
    assert list(MergeIterator(srcs, stop_after=4)) == [1, 10, 100, 2]
    assert list(MergeIterator(srcs, stop_after=100)) == [1, 10, 100, 2, 20, 3]
    # -1: stop at the first exhausted iterable.
    assert list(MergeIterator(srcs, stop_after=-1)) == [1, 10, 100, 2, 20]
    assert list(MergeIterator([[], [1]], stop_after=-1)) == []


def test_merge_weighted_is_seeded_and_skips_zero_weights():
    srcs = [range(0, 1000), range(1000, 2000), range(2000, 3000)]
    a = list(MergeIterator(srcs, weights=[1, 3, 0], seed=5, stop_after=400))
    b = list(MergeIterator(srcs, weights=[1, 3, 0], seed=5, stop_after=400))
    c = list(MergeIterator(srcs, weights=[1, 3, 0], seed=6, stop_after=400))
    assert a == b != c
    assert not [x for x in a if x >= 2000]
    share = sum(1000 <= x < 2000 for x in a) / len(a)
    assert 0.65 < share < 0.85
    # Each iterable's items keep their own order.
    assert [x for x in a if x < 1000] == sorted(x for x in a if x < 1000)
    # Until all exhausted (zero-weight ones left out).
    assert sorted(MergeIterator([[1, 2], [3], [4]], weights=[1, 1, 0])) == [1, 2, 3]


def test_merge_state_resumes_the_same_sequence():
    srcs = [range(0, 50), range(100, 130), range(200, 210)]
    for weights in (None, [2, 1, 1]):
        full = list(MergeIterator(srcs, weights=weights, seed=3))
        for stop in (0, 1, 7, 40, len(full)):
            m = MergeIterator(srcs, weights=weights, seed=3)
            head = list(itertools.islice(iter(m), stop))
            resumed = MergeIterator(srcs, weights=weights, seed=3)
            resumed.load_state_dict(m.state_dict())
            assert head + list(resumed) == full


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ([], {}, "iterables must not be empty"),
        ([[1], [2]], {"weights": [1]}, r"weights must have 2 entries"),
        ([[1], [2]], {"weights": [1, -1]}, r"weights must be finite and >= 0, got -1.0 at index 1"),
        ([[1], [2]], {"weights": [0, 0]}, "weights must not all be zero"),
        ([[1]], {"stop_after": -2}, r"stop_after must be >= -1, got -2"),
    ],
)
def test_merge_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        MergeIterator(args, **kwargs)


# -- embed_shuffle / repeat_source -------------------------------------------------


class Shuffled:
    """A sized iterable whose order is a function of the last shuffle seed."""

    def __init__(self, n):
        self.n = n
        self.seeds = []

    def __len__(self):
        return self.n

    def shuffle(self, seed):
        self.seeds.append(seed)

    def __iter__(self):
        seed = self.seeds[-1] if self.seeds else -1
        return iter([(seed, i) for i in range(self.n)])


def test_protocols():
    assert isinstance(Shuffled(1), SizedIterableWithShuffle)
    assert isinstance(Shuffled(1), IterableWithShuffle)
    assert isinstance([1], SizedIterable)
    assert not isinstance([1], IterableWithShuffle)


def test_embed_shuffle_before_each_pass():
    src = Shuffled(2)
    it = embed_shuffle(src, epoch=3)
    assert len(it) == 2
    assert list(it) == [(3, 0), (3, 1)]
    assert list(it) == [(4, 0), (4, 1)]
    assert src.seeds == [3, 4]


def test_embed_shuffle_last_also_on_early_exit():
    src = Shuffled(3)
    it = embed_shuffle(src, shuffle_last=True)
    assert list(it) == [(-1, 0), (-1, 1), (-1, 2)]
    assert src.seeds == [0]
    gen = iter(it)
    next(gen)
    gen.close()  # left early: still shuffled
    assert src.seeds == [0, 1]


def test_embed_shuffle_pickles_and_resumes_a_sampler():
    def new():
        return embed_shuffle(DistributedRandomSampler(40, rank=0, world_size=2))

    ref = new()
    epochs = [list(ref) for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    e = new()
    list(e)
    gen = iter(e)
    head = [next(gen) for _ in range(5)]
    state = e.state_dict()
    assert state["epoch"] == 1
    resumed = pickle.loads(pickle.dumps(new()))
    resumed.load_state_dict(state)
    assert head + list(resumed) == epochs[1]
    assert list(resumed) == epochs[2]


def test_embed_shuffle_needs_shuffle():
    with pytest.raises(ValueError, match="src must have a shuffle"):
        embed_shuffle([1, 2])


def test_repeat_source_repeats_and_shuffles():
    src = Shuffled(2)
    it = repeat_source(src, epoch=5)
    assert list(itertools.islice(it, 5)) == [(5, 0), (5, 1), (6, 0), (6, 1), (7, 0)]
    plain = repeat_source([1, 2, 3])
    assert list(itertools.islice(plain, 7)) == [1, 2, 3, 1, 2, 3, 1]


def test_repeat_source_pickles_before_iteration_and_resumes():
    it = repeat_source([1, 2, 3])
    it2 = pickle.loads(pickle.dumps(it))
    next(it2)
    with pytest.raises(TypeError, match="only before iteration"):
        pickle.dumps(it2)
    a = repeat_source(range(4))
    head = list(itertools.islice(a, 6))  # 0 1 2 3 0 1
    b = repeat_source(range(4))
    b.load_state_dict(a.state_dict())
    assert a.state_dict() == {"epoch": 1, "position": 2}
    assert head + list(itertools.islice(b, 6)) == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]


def _shuffled(n, seed=0):
    return embed_shuffle(DistributedRandomSampler(n, rank=0, world_size=1, seed=seed))


def test_repeat_source_over_embed_shuffle_resumes_the_same_epoch():
    # embed_shuffle's pass depends on its epoch: repeat_source numbers it
    # (set_epoch), so a restored repeat_source replays the epoch it saved.
    def make():
        return repeat_source(_shuffled(5))

    reference = list(itertools.islice(make(), 15))
    for stop in (3, 5, 7, 12):
        first = make()
        head = list(itertools.islice(first, stop))
        restored = make()
        restored.load_state_dict(first.state_dict())
        assert head + list(itertools.islice(restored, 15 - stop)) == reference, stop


def test_merge_over_stateful_iterables_resumes_their_pass():
    # Each child's pass changes from pass to pass: the state holds the
    # children's states at the start of the pass, which a fresh object
    # restores before replaying the picks.
    def make():
        return MergeIterator([_shuffled(4), _shuffled(4, seed=1)], weights=[1, 2], seed=5)

    reference = make()
    passes = [list(reference) for _ in range(3)]
    for k in range(len(passes[1]) + 1):
        first = make()
        list(first)
        it = iter(first)
        head = [next(it) for _ in range(k)]
        state = first.state_dict()
        assert len(state["iterables"]) == 2
        restored = make()
        restored.load_state_dict(pickle.loads(pickle.dumps(state)))
        assert head + list(restored) == passes[1], k
        assert list(restored) == passes[2], k


def test_merge_passes_set_epoch_on():
    a, b = _shuffled(4), [10, 11]
    m = MergeIterator([a, b])
    m.set_epoch(3)
    other = _shuffled(4)
    other.set_epoch(3)
    assert [x for x in m if x < 10] == list(other)


def test_repeat_source_of_empty_source_raises():
    with pytest.raises(ValueError, match="yielded no items"):
        next(repeat_source([]))


# -- item_rng ------------------------------------------------------------------------


def test_item_rng_depends_on_the_key_only():
    a = item_rng(1, 2, 3).integers(1 << 40, size=4).tolist()
    assert a == item_rng(1, 2, 3).integers(1 << 40, size=4).tolist()
    assert a != item_rng(1, 2, 4).integers(1 << 40, size=4).tolist()
    assert a != item_rng(1, 3, 3).integers(1 << 40, size=4).tolist()
    with pytest.raises(ValueError, match="index must be >= 0, got -1"):
        item_rng(0, 0, -1)


# -- LocalDirectory / ImageNet ---------------------------------------------------------


def test_local_directory(tmp_path):
    for name in ("b.jpg", "a.jpg", "c.png", "sub/d.jpg"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"x")
    src = LocalDirectory(tmp_path, "*.jpg")
    assert [p.name for p in src] == ["a.jpg", "b.jpg"]
    assert len(LocalDirectory(tmp_path, "**/*.jpg")) == 3
    deep = LocalDirectory(tmp_path, "**/*.jpg")
    deep.shuffle(seed=4)
    order = list(deep)
    deep.shuffle(seed=9)
    deep.shuffle(seed=4)  # the order depends on the seed alone
    assert list(deep) == order
    assert sorted(order) == sorted(LocalDirectory(tmp_path, "**/*.jpg"))
    it = iter(deep)
    head = [next(it)]
    again = LocalDirectory(tmp_path, "**/*.jpg")
    again.load_state_dict(deep.state_dict())
    assert head + list(again) == order


def test_local_directory_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="root must be a directory"):
        LocalDirectory(tmp_path / "missing", "*")
    with pytest.raises(ValueError, match=r"matches pattern '\*.jpg'"):
        LocalDirectory(tmp_path, "*.jpg")
    with pytest.raises(ValueError, match="pattern must be relative to root, got '/tmp/\\*.jpg'"):
        LocalDirectory(tmp_path, "/tmp/*.jpg")
    for bad in (5, "", None):
        with pytest.raises(ValueError, match="pattern must be a non-empty str"):
            LocalDirectory(tmp_path, bad)


def _imagenet_tree(root):
    layout = {
        "train": {"n01440764": 3, "n03709823": 2, "n09999999": 1},
        "val": {"n01440764": 1, "n03709823": 1},
    }
    for split, classes in layout.items():
        for wnid, count in classes.items():
            (root / split / wnid).mkdir(parents=True)
            for i in range(count):
                (root / split / wnid / f"{wnid}_{i}.JPEG").write_bytes(b"x")


def test_imagenet(tmp_path):
    _imagenet_tree(tmp_path)
    assert get_mappings(tmp_path) == {"n01440764": 0, "n03709823": 1, "n09999999": 2}
    train = ImageNet(tmp_path, split="train")
    assert len(train) == 6
    pairs = list(train)
    assert [label for _, label in pairs] == [0, 0, 0, 1, 1, 2]
    assert all(parse_wnid(p) == list(train.classes)[label] for p, label in pairs)
    val = ImageNet(tmp_path, "val")
    assert [(p.name, label) for p, label in val] == [("n01440764_0.JPEG", 0), ("n03709823_0.JPEG", 1)]
    train.shuffle(seed=1)
    assert sorted(train) == pairs


def test_imagenet_takes_images_of_class_folders_only(tmp_path):
    # A folder whose name holds a WordNet id but is not one (a backup copy)
    # is not a class: get_mappings() skips it, and so do its images.
    _imagenet_tree(tmp_path)
    old = tmp_path / "train" / "n01440764_old"
    old.mkdir()
    (old / "n01440764_9.JPEG").write_bytes(b"x")
    assert "n01440764_old" not in get_mappings(tmp_path)
    assert [p.parent.name for p, _ in ImageNet(tmp_path, "train")].count("n01440764_old") == 0
    assert len(ImageNet(tmp_path, "train")) == 6


def test_weights_whose_sum_overflows_are_scaled_not_refused():
    s = DistributedRandomSampler(3, rank=0, world_size=1, weights=[1e308, 1e308, 0], num_draws=50)
    assert set(s) <= {0, 1} and len(list(s)) == 50
    m = MergeIterator([[1] * 20, [2] * 20, [3] * 20], weights=[1e308, 1e308, 0])
    assert set(m) == {1, 2}


def test_imagenet_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="split must be 'train' or 'val', got 'test'"):
        ImageNet(tmp_path, split="test")
    with pytest.raises(ValueError, match="no class folders"):
        get_mappings(tmp_path)
    with pytest.raises(ValueError, match="no WordNet id"):
        parse_wnid("/data/cat.jpg")
    _imagenet_tree(tmp_path)
    with pytest.raises(ValueError, match="no image matches"):
        ImageNet(tmp_path, split="val", pattern="*.png")
