"""Runs one loader of feedline.io over files (test_hostile_inputs.py).

    python hostile_child.py LOADER FILE...

Before each file it prints ``BEGIN <file>`` (so a crash names the file),
then one line ``RESULT {json}``: the outcome, and for an error its type,
whether that type is a feedline error or a ValueError, and its message.
"""

import json
import sys

import numpy as np

import feedline
from feedline import io


def _image(path):
    io.load_image(path)


def _decode_image(path):
    with open(path, "rb") as f:
        io.decode_image(f.read(), name=path)


def _demuxer(path):
    with io.Demuxer(path) as d:
        if d.video_stream_index >= 0:
            d.demux_video()
        if d.has_audio:
            d.demux_audio()
        for _ in d.streaming_demux(num_packets=8):
            pass


def _tar(path):
    for _name, data in io.iter_tarfile(path):
        np.asarray(data).sum()


def _zip(path):
    archive = io.open_zip(path, max_member_size=64 << 20)
    for name in archive:
        bytes(archive[name])


def _npz(path):
    archive = io.load_npz(path, max_member_size=64 << 20)
    for name in archive:
        archive[name]


LOADERS = {
    "load_image": _image,
    "decode_image": _decode_image,
    "load_npy": lambda p: io.load_npy(p),
    "load_wav": lambda p: io.load_wav(p),
    "load_audio": lambda p: io.load_audio(p),
    "load_video": lambda p: io.load_video(p),
    "Demuxer": _demuxer,
    "tar": _tar,
    "zip": _zip,
    "npz": _npz,
}


def main():
    loader = LOADERS[sys.argv[1]]
    for path in sys.argv[2:]:
        print(f"BEGIN {path}", flush=True)
        result = {"file": path, "outcome": "ok"}
        try:
            loader(path)
        except Exception as e:  # noqa: BLE001 (every outcome is reported)
            result.update(
                outcome="error",
                type=f"{type(e).__module__}.{type(e).__qualname__}",
                typed=isinstance(e, (feedline.Error, ValueError)) and not isinstance(e, UnicodeError),
                message=str(e),
            )
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
