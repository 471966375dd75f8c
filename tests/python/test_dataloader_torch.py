"""The PyTorch migration adapter: a map-style torch Dataset + DataLoader
script ported by changing one import gives the same batches."""

import collections
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader as TorchDataLoader  # noqa: E402
from torch.utils.data import Dataset, IterableDataset  # noqa: E402

from feedline.dataloader import PyTorchDataLoader, default_collate, get_pytorch_dataloader  # noqa: E402

Sample = collections.namedtuple("Sample", "image label")


class Images(Dataset):
    """Tensors, arrays, numbers, strings, dicts and namedtuples per sample."""

    def __init__(self, n=37):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        image = torch.full((3, 4, 4), float(i))
        extra = {"array": np.arange(3, dtype=np.float32) + i, "id": f"img{i}", "weight": i / 2}
        return Sample(image, i), extra


def train_script(DataLoader, **kwargs):  # noqa: N803 (the class being swapped)
    """A training script's loader code; only the DataLoader class differs."""
    loader = DataLoader(Images(), **kwargs)
    batches = []
    for _epoch in range(2):
        for batch in loader:
            batches.append(batch)
    return batches


def _equal(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(batch_size=5),
        dict(batch_size=5, drop_last=True, num_workers=2),
        dict(batch_size=1),
        dict(batch_size=8, num_workers=2, collate_fn=lambda b: [s[0].label for s in b]),
        dict(batch_size=None),
    ],
)
def test_same_batches_as_torch_without_shuffle(kwargs):
    expected = train_script(TorchDataLoader, **kwargs)
    got = train_script(PyTorchDataLoader, **kwargs)
    assert len(got) == len(expected)
    assert all(_equal(a, b) for a, b in zip(expected, got))
    assert len(PyTorchDataLoader(Images(), **kwargs)) == len(TorchDataLoader(Images(), **kwargs))


def _labels(batches):
    return [label for b in batches for label in b[0].label.tolist()]


def test_shuffle_gives_the_same_items_per_epoch_and_is_seeded():
    torch.manual_seed(0)
    expected = TorchDataLoader(Images(), batch_size=4, shuffle=True)
    ref = [sorted(_labels(list(expected))) for _ in range(2)]
    a = PyTorchDataLoader(Images(), batch_size=4, shuffle=True, num_workers=2, seed=3)
    epochs = [_labels(list(a)) for _ in range(2)]
    assert [sorted(e) for e in epochs] == ref
    assert epochs[0] != epochs[1]  # reshuffled each epoch
    b = PyTorchDataLoader(Images(), batch_size=4, shuffle=True, num_workers=3, seed=3)
    assert [_labels(list(b)) for _ in range(2)] == epochs
    g = torch.Generator()
    g.manual_seed(3)
    c = PyTorchDataLoader(Images(), batch_size=4, shuffle=True, generator=g)
    assert _labels(list(c)) == epochs[0]


def test_sampler_and_batch_sampler():
    sampler = [5, 1, 4, 1]
    got = list(PyTorchDataLoader(Images(), batch_size=2, sampler=sampler))
    expected = list(TorchDataLoader(Images(), batch_size=2, sampler=sampler))
    assert all(_equal(a, b) for a, b in zip(expected, got))
    batch_sampler = [[0, 1, 2], [7], [3, 3]]
    got = list(PyTorchDataLoader(Images(), batch_sampler=batch_sampler, num_workers=2))
    expected = list(TorchDataLoader(Images(), batch_sampler=batch_sampler))
    assert len(got) == 3 and all(_equal(a, b) for a, b in zip(expected, got))


def test_completion_order_gives_the_same_batches_as_a_set():
    got = PyTorchDataLoader(Images(), batch_size=4, num_workers=3, in_order=False)
    assert sorted(_labels(list(got))) == list(range(37))


def test_getitems_is_used_for_batch_samplers():
    class Batched(Images):
        def __getitems__(self, indices):
            return [("batched", self[i][0].label) for i in indices]

    got = list(PyTorchDataLoader(Batched(), batch_sampler=[[1, 2]], collate_fn=list))
    assert got == [[("batched", 1), ("batched", 2)]]


def test_resume_mid_epoch():
    def new():
        return PyTorchDataLoader(Images(), batch_size=4, shuffle=True, num_workers=2, seed=8)

    reference = _labels(list(new()))
    first = new()
    it = iter(first)
    head = _labels([next(it) for _ in range(3)])
    state = pickle.loads(pickle.dumps(first.state_dict()))
    first.close()
    second = new()
    second.load_state_dict(state)
    assert head + _labels(list(second)) == reference


def test_default_collate_is_torchs():
    batch = [{"a": np.ones(2), "b": 1.5, "c": (1, "x")}, {"a": np.zeros(2), "b": 2.5, "c": (2, "y")}]
    assert _equal(default_collate(batch), torch.utils.data.default_collate(batch))


def test_rejected_arguments():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="IterableDataset"):
        PyTorchDataLoader(Stream())
    with pytest.raises(ValueError, match="worker_init_fn"):
        PyTorchDataLoader(Images(), worker_init_fn=lambda i: None)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        PyTorchDataLoader(Images(), sampler=[0], shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler option is mutually exclusive"):
        PyTorchDataLoader(Images(), batch_sampler=[[0]], batch_size=2)
    with pytest.raises(ValueError, match="num_workers must be >= 0, got -1"):
        PyTorchDataLoader(Images(), num_workers=-1)
    with pytest.raises(ValueError, match="timeout must be >= 0, got -1"):
        PyTorchDataLoader(Images(), timeout=-1)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        PyTorchDataLoader(Images(), batch_size=0)


def test_get_pytorch_dataloader():
    loader = get_pytorch_dataloader(Images(), batch_size=10, num_workers=2)
    assert isinstance(loader, PyTorchDataLoader) and len(loader) == 4
    assert sorted(_labels(list(loader))) == list(range(37))  # SPDL's default: completion order
    loader = get_pytorch_dataloader(Images(), batch_size=10, num_workers=2, in_order=True)
    assert _labels(list(loader)) == list(range(37))
    with pytest.warns(UserWarning, match="num_workers=0"):
        get_pytorch_dataloader(Images(), num_workers=0)
    with pytest.raises(ValueError, match="persistent_workers"):
        get_pytorch_dataloader(Images(), persistent_workers=True)
