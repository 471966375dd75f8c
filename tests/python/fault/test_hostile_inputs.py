"""Hostile input for every loader of feedline.io: each file of every
fuzz/corpus/<target>/ directory, truncations of the loader's own seeds at
several offsets, random bytes, an empty file and a text file.

Each loader runs over all of them in a process of its own. Every file must
either load, or raise a feedline error (feedline.Error) or a ValueError
whose message names the file; never crash the process, hang, or raise an
untyped exception (a bare RuntimeError, UnicodeDecodeError, ...). A TAR
cut inside one of its members must raise: members are never lost silently.
"""

import json
import pathlib
import random
import re
import subprocess
import sys
import tarfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
CORPUS = ROOT / "fuzz" / "corpus"
CHILD = pathlib.Path(__file__).with_name("hostile_child.py")
TIMEOUT = 300  # seconds per loader: a guard only

# loader -> the corpus directory of its own format (whose seeds are also
# truncated).
OWN = {
    "load_image": "image",
    "decode_image": "image",
    "load_npy": "npy",
    "load_wav": "wav",
    "load_audio": "audio",
    "load_video": "video",
    "Demuxer": "video",
    "tar": "tar",
    "zip": "zip",
    "npz": "zip",
}


def _truncations(data):
    n = len(data)
    return sorted({k for k in (1, 8, 64, n // 3, n // 2, n - 1) if 0 < k < n})


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    """The generated hostile files, one folder per corpus target."""
    root = tmp_path_factory.mktemp("hostile")
    rng = random.Random(12)
    for target in sorted(p.name for p in CORPUS.iterdir()):
        folder = root / target
        folder.mkdir()
        for seed in sorted((CORPUS / target).iterdir()):
            data = seed.read_bytes()
            for k in _truncations(data):
                (folder / f"{seed.name}.cut{k}").write_bytes(data[:k])
            # The seed with a run of bytes in its header overwritten.
            flipped = bytearray(data)
            for i in range(8, min(len(data), 40)):
                flipped[i] = rng.randrange(256)
            (folder / f"{seed.name}.garbled").write_bytes(bytes(flipped))
    common = root / "common"
    common.mkdir()
    (common / "empty").write_bytes(b"")
    (common / "text.txt").write_text("this is a plain text file, not media\n" * 30)
    (common / "random.bin").write_bytes(rng.randbytes(4096))
    (common / "zeros.bin").write_bytes(bytes(4096))
    return root


def _cut_inside_a_member(path):
    """For ``<seed>.tar.cut<k>``: whether offset k lies inside a member of
    the seed (its header, or its data), by Python's tarfile."""
    m = re.fullmatch(r"(.+\.tar)\.cut(\d+)", path.name)
    if m is None:
        return False
    k = int(m.group(2))
    try:
        with tarfile.open(CORPUS / "tar" / m.group(1)) as archive:
            members = archive.getmembers()
    except tarfile.TarError:  # a seed tarfile refuses (a regression input): no judgement
        return False
    return any(t.offset < k < t.offset_data + t.size for t in members if t.isfile())


def _files(hostile_dir, loader):
    files = sorted(p for p in CORPUS.glob("*/*") if p.is_file())
    files += sorted((hostile_dir / OWN[loader]).iterdir())
    files += sorted((hostile_dir / "common").iterdir())
    return [str(f) for f in files]


@pytest.mark.parametrize("loader", sorted(OWN))
def test_loader_survives_hostile_input(hostile_dir, loader):
    files = _files(hostile_dir, loader)
    cmd = [sys.executable, str(CHILD), loader, *files]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        began = [line for line in (e.stdout or b"").decode().splitlines() if line.startswith("BEGIN ")]
        pytest.fail(f"{loader} hung on {began[-1][6:] if began else '?'}")
    began = [line[6:] for line in r.stdout.splitlines() if line.startswith("BEGIN ")]
    assert r.returncode == 0, (
        f"{loader} {'was killed by signal ' + str(-r.returncode) if r.returncode < 0 else 'exited'}"
        f" ({r.returncode}) on {began[-1] if began else '?'}:\n{r.stderr[-3000:]}"
    )
    results = [json.loads(line[7:]) for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert [x["file"] for x in results] == files
    bad = []
    for x in results:
        name = pathlib.Path(x["file"]).name
        if x["outcome"] == "ok":
            if loader == "tar" and _cut_inside_a_member(pathlib.Path(x["file"])):
                bad.append(f"{name}: a TAR cut inside a member read without an error")
            continue
        if not x["typed"]:
            bad.append(f"{name}: untyped {x['type']}: {x['message'][:200]}")
        elif name not in x["message"]:
            bad.append(f"{name}: {x['type']} does not name the input: {x['message'][:200]}")
    assert not bad, f"{loader}:\n" + "\n".join(bad)
