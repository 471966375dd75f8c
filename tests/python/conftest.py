"""Shared pytest configuration and fixtures for the feedline Python tests.

The markers (``slow``, ``gpu``) and the default ``-m 'not slow'`` are declared
in pyproject.toml under [tool.pytest.ini_options].

Fixtures for the FFmpeg tests (test_io_audio.py, test_io_video.py,
test_io_av_filters.py), which compare feedline against the ``ffmpeg`` CLI:

- ``ffmpeg``: runs the CLI (``ffmpeg(*args)``) and reads its own decode of a
  file (``ffmpeg.raw``, ``ffmpeg.video``, ``ffmpeg.audio``); tests that use it
  are skipped where the CLI is missing.
- ``media``: the clips, audio files and images of :data:`MEDIA`, made with the
  CLI on first use and kept for the session; ``media / name`` is their path
  (names not in :data:`MEDIA` give a path that does not exist).
- ``rgb``: ``rgb(name)`` is the CLI's rgb24 decode of a clip of ``media``,
  shape (N, H, W, 3), cached for the session.

The native test ops and error hooks come from ``_feedline_testing``, a
test-only extension that is never installed (source in tests/python/native/).
``make test-ext`` builds it into build/pytest; this file puts that directory
(or $FEEDLINE_TEST_EXT_DIR) on sys.path.
"""

import importlib.util
import io
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import threading
import time

import numpy as np
import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
TEST_EXT_DIR = pathlib.Path(
    os.environ.get("FEEDLINE_TEST_EXT_DIR", _ROOT / "build" / "pytest" / "tests" / "python" / "native")
)
sys.path.insert(0, str(TEST_EXT_DIR))


def tar_bytes(members, fmt=tarfile.GNU_FORMAT, encoding="utf-8") -> bytes:
    """A tar archive, written by Python's tarfile, of (name, bytes) pairs."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=fmt, encoding=encoding) as tf:
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def process_gone(pid: int, seconds: float = 15.0) -> bool:
    """Whether process ``pid`` has exited (or is a zombie) within ``seconds``
    (polled every 50 ms: waiting for an exit, not synchronising)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def pytest_report_header(config):
    spec = importlib.util.find_spec("_feedline_testing")
    if spec is None:
        return f"_feedline_testing: not built in {TEST_EXT_DIR} (run `make test-ext`)"
    return f"_feedline_testing: {spec.origin}"


W, H = 320, 240  # the size of the generated clips and images (but the odd ones)
ODD_W, ODD_H = 321, 241
TESTSRC = f"-f lavfi -i testsrc=duration=2:size={W}x{H}:rate=25"
ODD = f"-f lavfi -i testsrc=duration=1:size={ODD_W}x{ODD_H}:rate=25"
SINE = "-f lavfi -i sine=frequency=440:duration=1:sample_rate=48000"
IMAGE = f"-f lavfi -i testsrc=size={W}x{H} -frames:v 1"
X264 = "-c:v libx264 -pix_fmt yuv420p"
VP9 = "-c:v libvpx-vp9 -pix_fmt yuv420p -deadline realtime -cpu-used 8"

# name -> the ffmpeg arguments that make it (split at spaces; the output path
# follows them; "{name}" is the path of another file of MEDIA).
MEDIA = {
    # testsrc is RGB, so libx264 picks yuv444p (as in SPDL's tests); 2 s at
    # 25 fps, a key frame every second.
    "h264_444.mp4": f"{TESTSRC} -c:v libx264 -force_key_frames expr:eq(mod(n,25),0)",
    "h264_420.mp4": f"{TESTSRC} {X264} -g 25",
    "hevc.mp4": f"{TESTSRC} -c:v libx265 -pix_fmt yuv420p -x265-params log-level=none:keyint=25:min-keyint=25"
    " -vtag hvc1",
    "vp9.webm": f"{TESTSRC} {VP9} -g 25",
    "mpeg2.mkv": f"{TESTSRC} -c:v mpeg2video -g 25 -bf 2",
    "mpeg2.mpg": f"{TESTSRC} -c:v mpeg2video -g 25 -bf 2",
    "h264.ts": f"{TESTSRC} {X264} -g 25",
    "mjpeg.avi": f"{TESTSRC} -c:v mjpeg -q:v 3",
    # h264_420.mp4 with its index in front (to cut in half).
    "faststart.mp4": "-i {h264_420.mp4} -c copy -movflags +faststart",
    # Odd sizes: yuv444p H.264, yuv420p VP9 (odd chroma), MJPEG in Matroska.
    "odd.mp4": f"{ODD} -c:v libx264",
    "odd.webm": f"{ODD} {VP9}",
    "odd_mjpeg.mkv": f"{ODD} -c:v mjpeg",
    # Variable frame rate: 1 s at 10 fps, then 1 s at 25 fps.
    "vfr.mkv": f"-f lavfi -i testsrc=duration=1:size={W}x{H}:rate=10"
    f" -f lavfi -i testsrc=duration=1:size={W}x{H}:rate=25"
    f" -filter_complex [0][1]concat=n=2:v=1:a=0 {X264} -fps_mode vfr -g 25",
    # Video and mono 44.1 kHz AAC; and the same with the audio stream first.
    "av.mp4": f"{TESTSRC} -f lavfi -i sine=frequency=440:duration=2:sample_rate=44100 {X264} -g 25 -c:a aac -shortest",
    "rev.mp4": f"{TESTSRC} -f lavfi -i sine=duration=2 -map 1 -map 0 {X264} -c:a aac -shortest",
    # 10 fps, 3 s.
    "ten.mp4": f"-f lavfi -i testsrc=duration=3:size={W}x{H}:rate=10 {X264} -g 10",
    # 1 s of a 440 Hz tone at 48 kHz, stereo (and 5.1).
    "stereo.m4a": f"{SINE} -ac 2 -c:a aac",
    "stereo.mp3": f"{SINE} -ac 2 -c:a libmp3lame",
    "stereo.flac": f"{SINE} -ac 2 -c:a flac",
    "stereo.wav": f"{SINE} -ac 2 -c:a pcm_s16le",
    "stereo.opus": f"{SINE} -ac 2 -c:a libopus",
    "six.flac": f"{SINE} -af pan=5.1|c0=c0|c1=c0|c2=c0|c3=c0|c4=c0|c5=c0 -c:a flac",
    # One frame of testsrc.
    "img.png": IMAGE,
    "img.bmp": IMAGE,
    "img.tiff": IMAGE,
    "lossy.webp": f"{IMAGE} -c:v libwebp",
    "lossless.webp": f"{IMAGE} -c:v libwebp -lossless 1",
}
# Media that are not made by the CLI.
GARBAGE = {"garbage.mp4": b"this is not a video, " * 40}


class Ffmpeg:
    """The ffmpeg CLI: makes files and gives its own decode of them."""

    BASE = ("ffmpeg", "-nostdin", "-loglevel", "error")

    def __call__(self, *args):
        """Runs ``ffmpeg -y *args`` (the last argument is usually the output)."""
        subprocess.run([*self.BASE, "-y", *map(str, args)], check=True)

    def sine(self, path, channels=2, rate=48000, seconds=1, encoder=()):
        """Writes a 440 Hz tone to ``path`` with the encoder arguments given."""
        source = f"sine=frequency=440:duration={seconds}:sample_rate={rate}"
        self("-f", "lavfi", "-i", source, "-ac", channels, *encoder, path)

    def raw(self, path, pix_fmt="rgb24", extra=()):
        """What ``ffmpeg -i path [extra] -f rawvideo -pix_fmt X -`` writes, every frame kept."""
        tail = ["-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"]
        cmd = [*self.BASE, "-i", str(path), *extra, *tail]
        return subprocess.run(cmd, check=True, capture_output=True).stdout

    def video(self, path, shape, vf=None, pix_fmt="rgb24", flag="-vf"):
        """``ffmpeg -i path [-vf vf] -f rawvideo -pix_fmt X -`` as uint8 (N, *shape)."""
        raw = self.raw(path, pix_fmt, [flag, vf] if vf else [])
        return np.frombuffer(raw, np.uint8).reshape(-1, *shape)

    def audio(self, path, channels, af=None):
        """``ffmpeg -i path [-af af] -f f32le -`` as float32 (channels, samples)."""
        extra = ["-af", af] if af else []
        cmd = [*self.BASE, "-i", str(path), *extra, "-f", "f32le", "-"]
        raw = subprocess.run(cmd, check=True, capture_output=True).stdout
        return np.frombuffer(raw, "<f4").reshape(-1, channels).T


class Media:
    """A folder of the files of MEDIA, each made on its first use."""

    def __init__(self, folder, cli):
        self._folder = folder
        self._cli = cli
        self._lock = threading.Lock()

    def __truediv__(self, name):
        path = self._folder / name
        with self._lock:
            if not path.exists():
                if name in GARBAGE:
                    path.write_bytes(GARBAGE[name])
                elif name in MEDIA:
                    try:
                        self._make(name, path)
                    except BaseException:
                        path.unlink(missing_ok=True)  # no half-written file for the next test
                        raise
        return path

    def _make(self, name, path):
        args = []
        for a in MEDIA[name].split():
            if a.startswith("{") and a.endswith("}"):  # another file of MEDIA
                other = self._folder / a[1:-1]
                if not other.exists():
                    self._make(a[1:-1], other)
                a = str(other)
            args.append(a)
        self._cli(*args, path)


@pytest.fixture(scope="session")
def ffmpeg():
    if shutil.which("ffmpeg") is None:
        pytest.skip("needs the ffmpeg CLI")
    return Ffmpeg()


@pytest.fixture(scope="session")
def media(tmp_path_factory, ffmpeg):
    return Media(tmp_path_factory.mktemp("media"), ffmpeg)


@pytest.fixture(scope="session")
def rgb(media, ffmpeg):
    """rgb(name): the CLI's rgb24 decode of media / name, (N, H, W, 3)."""
    cache = {}

    def get(name):
        if name not in cache:
            w, h = (ODD_W, ODD_H) if name.startswith("odd") else (W, H)
            cache[name] = ffmpeg.video(media / name, (h, w, 3))
        return cache[name]

    return get
