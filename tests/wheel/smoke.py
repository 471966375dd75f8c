"""Smoke test of an installed feedline: every module, from an installed wheel.

Run by scripts/test_wheel.sh as ``python -I tests/wheel/smoke.py VERSION``
in a fresh virtual environment holding only the wheel and its dependencies,
from a directory outside the repository, so nothing of the source tree or
the build trees can be imported. Media are made with the ffmpeg CLI.
Prints one line per check and ends with "N passed, 0 failed"; exits 1 on
the first failure.
"""

from __future__ import annotations

import importlib
import io
import json
import pkgutil
import subprocess
import sys
import tarfile
import tempfile
import wave
from collections.abc import Callable
from pathlib import Path

import numpy as np

CHECKS: list[tuple[str, Callable[[Path], None]]] = []


def check(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    CHECKS.append((fn.__name__, fn))
    return fn


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True)


@check
def installed_not_source(tmp: Path) -> None:
    import feedline

    where = Path(feedline.__file__).resolve()
    prefix = Path(sys.prefix).resolve()
    assert prefix in where.parents, f"feedline imported from {where}, not from {prefix}"
    ext = Path(feedline._feedline_ext.__file__).resolve()
    assert prefix in ext.parents, f"extension imported from {ext}"


@check
def version(tmp: Path) -> None:
    import importlib.metadata

    import feedline

    expected = sys.argv[1]
    assert feedline.__version__ == expected, (feedline.__version__, expected)
    assert importlib.metadata.version("feedline") == expected


@check
def every_module_imports(tmp: Path) -> None:
    import feedline

    names = [m.name for m in pkgutil.walk_packages(feedline.__path__, "feedline.")]
    for name in names:
        if name.endswith("__main__"):
            continue  # runs the CLI; checked by cli_info below
        importlib.import_module(name)
    for public in (
        "feedline.pipeline",
        "feedline.pipeline.defs",
        "feedline.io",
        "feedline.io.ops",
        "feedline.io.utils",
        "feedline.dataloader",
        "feedline.source",
        "feedline.source.utils",
    ):
        assert public in names, f"{public} missing from the wheel ({names})"


@check
def library_versions(tmp: Path) -> None:
    import feedline
    from feedline.io import utils

    versions = utils.get_library_versions()
    assert versions["feedline"] == feedline.__version__
    for lib in ("libavcodec", "libavformat", "libavutil", "libjpeg-turbo", "libpng", "libdeflate"):
        major = int(versions[lib].split(".")[0])
        assert major > 0, (lib, versions[lib])
    assert "h264" in utils.get_ffmpeg_decoders()


@check
def pipeline_python_stages(tmp: Path) -> None:
    from feedline.pipeline import PipelineBuilder

    pipeline = (
        PipelineBuilder()
        .add_source(range(100))
        .pipe(lambda x: x * 2, concurrency=4)
        .aggregate(10)
        .add_sink(2)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        batches = list(pipeline)
    assert sorted(x for b in batches for x in b) == [2 * i for i in range(100)]


@check
def dataloader_resumes(tmp: Path) -> None:
    from feedline.dataloader import DataLoader
    from feedline.source import DistributedRandomSampler

    def loader() -> DataLoader:
        sampler = DistributedRandomSampler(50, rank=0, world_size=1)
        return DataLoader(sampler, preprocessor=lambda i: i, batch_size=8, num_threads=2, output_order="input")

    reference = [x for b in loader() for x in b]
    first = loader()
    it = iter(first)
    head = next(it) + next(it)
    second = loader()
    second.load_state_dict(first.state_dict())
    first.close()
    assert head + [x for b in second for x in b] == reference


@check
def images_native_pipeline(tmp: Path) -> None:
    from feedline.io import decode_image, load_image, ops, to_numpy
    from feedline.pipeline import PipelineBuilder

    paths = []
    for i, ext in enumerate(("jpg", "png", "jpg", "png")):
        path = tmp / f"img{i}.{ext}"
        ffmpeg("-f", "lavfi", "-i", f"testsrc=size={64 + 8 * i}x48", "-frames:v", "1", str(path))
        paths.append(str(path))
    one = to_numpy(load_image(paths[0]))
    assert one.shape == (48, 64, 3) and one.dtype == np.uint8 and one.std() > 10, one.shape
    png = to_numpy(decode_image(Path(paths[1]).read_bytes()))
    assert png.shape == (48, 72, 3), png.shape
    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=2)
        .aggregate(2)
        .pipe(ops.decode_batch(resize_shorter=32, crop=32, layout="CHW", dtype="float32"))
        .add_sink(2)
        .build(num_threads=2)
    )
    with pipeline.auto_stop():
        shapes = [np.asarray(batch).shape for batch in pipeline]
    assert shapes == [(2, 3, 32, 32), (2, 3, 32, 32)], shapes


@check
def arrays_and_archives(tmp: Path) -> None:
    from feedline.io import iter_tarfile, load_npy, load_wav

    array = np.arange(24, dtype=np.float32).reshape(4, 6)
    npy = io.BytesIO()
    np.save(npy, array)
    assert np.array_equal(load_npy(npy.getvalue()), array)

    wav = io.BytesIO()
    samples = (np.arange(800, dtype=np.int16) * 7).reshape(400, 2)
    with wave.open(wav, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(samples.tobytes())
    assert np.array_equal(np.asarray(load_wav(wav.getvalue())), samples)

    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        for name, data in (("a.txt", b"alpha"), ("b/c.bin", bytes(range(256)))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    members = {name: bytes(data) for name, data in iter_tarfile(tar.getvalue())}
    assert members == {"a.txt": b"alpha", "b/c.bin": bytes(range(256))}, members


@check
def video_and_audio(tmp: Path) -> None:
    from feedline.io import load_audio, load_video

    video = tmp / "clip.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=size=64x48:rate=10:duration=1", "-pix_fmt", "yuv420p", str(video))
    frames = np.asarray(load_video(str(video)))
    assert frames.shape[0] == 10 and frames.shape[1:] == (48, 64, 3), frames.shape
    audio = tmp / "tone.flac"
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=0.5", str(audio))
    samples = np.asarray(load_audio(str(audio)))
    assert samples.size == 8000 and np.abs(samples).max() > 0.05, samples.shape


@check
def bad_input_is_typed(tmp: Path) -> None:
    import feedline
    from feedline.io import decode_image

    try:
        decode_image(b"\xff\xd8 not a jpeg", name="broken.jpg")
    except feedline.DecodeError as e:
        assert "broken.jpg" in str(e), str(e)
    else:
        raise AssertionError("no DecodeError for a broken JPEG")


@check
def cli_info(tmp: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-m", "feedline", "info", "--json"], check=True, capture_output=True, text=True
    )
    info = json.loads(out.stdout)
    assert info["feedline"] == sys.argv[1] and info["libraries"]["libavcodec"], info


@check
def console_script(tmp: Path) -> None:
    script = Path(sys.executable).parent / "feedline"
    out = subprocess.run([str(script), "info"], check=True, capture_output=True, text=True)
    assert f"feedline: {sys.argv[1]}" in out.stdout, out.stdout


@check
def cli_demo(tmp: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-I",
            "-m",
            "feedline",
            "demo",
            "--images",
            "64",
            "--batch",
            "16",
            "--data",
            str(tmp / "demo"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "images/s" in out.stdout, out.stdout


def main() -> int:
    passed = 0
    with tempfile.TemporaryDirectory() as d:
        for name, fn in CHECKS:
            work = Path(d) / name
            work.mkdir()
            try:
                fn(work)
            except Exception as e:
                print(f"FAILED {name}: {type(e).__name__}: {e}")
                print(f"{passed} passed, 1 failed")
                return 1
            print(f"ok {name}")
            passed += 1
    print(f"{passed} passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
