"""Writing media: encode configurations, Muxer, encoders, frames from
arrays, ``save_image`` and ``encode_image``.

The names and defaults are SPDL's (``spdl.io``); the work is done in C++
(``feedline/media/encode.h``) with the GIL released. Where feedline differs:

* Configurations are checked against what the chosen encoder takes (pixel
  and sample formats, frame and sample rates, channel counts) when the
  stream is added, and the error lists what it does take.
* An encoder converts video frames of another pixel format (same size) with
  libswscale, so RGB arrays go straight into a ``yuv420p`` H.264 stream;
  SPDL raises. Audio frames are regrouped into the encoder's frame size
  (AAC's 1024 samples, say); SPDL leaves that to the caller.
* ``create_reference_video_frame`` / ``create_reference_audio_frame`` copy
  the array once (SPDL's refer to it); the frames never depend on the
  array's lifetime.
* ``encode_image(data, format=...)`` returns the file's bytes (SPDL's
  ``encode_image`` is unusable: it calls a binding that no longer exists).
* A ``Muxer`` left by an exception (``with`` block, or garbage-collected)
  still writes what it can and releases its file.
* ``Muxer(None, format=...)`` writes to memory (``getvalue()`` after
  ``close()``); SPDL's Muxer needs a path.
* Audio frames of another sample format, rate or channel count are
  converted (libswresample); SPDL's encoder takes only its own format.
"""

from __future__ import annotations

import os
import sys
from fractions import Fraction
from typing import Any

from .._feedline_ext import io as _io

__all__ = [
    "AudioEncodeConfig",
    "AudioEncoder",
    "Encoder",
    "Muxer",
    "VideoEncodeConfig",
    "VideoEncoder",
    "audio_encode_config",
    "create_reference_audio_frame",
    "create_reference_video_frame",
    "encode_image",
    "save_image",
    "video_encode_config",
]

VideoEncodeConfig = _io.VideoEncodeConfig
AudioEncodeConfig = _io.AudioEncodeConfig
for _cls in (VideoEncodeConfig, AudioEncodeConfig):
    _cls.__module__ = "feedline.io"


def _rate(value) -> tuple[int, int]:
    """(num, den) from a (num, den) pair, an int, a float or a Fraction."""
    if isinstance(value, tuple | list):
        num, den = value
        return int(num), int(den)
    f = Fraction(value).limit_denominator(1 << 20)
    return f.numerator, f.denominator


def video_encode_config(
    *,
    height: int,
    width: int,
    frame_rate=None,
    pix_fmt: str | None = "rgb24",
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
    gop_size: int = -1,
    max_b_frames: int = -1,
    colorspace: str | None = None,
    color_primaries: str | None = None,
    color_trc: str | None = None,
    color_range: str | None = None,
    sample_aspect_ratio=None,
    time_base=None,
) -> VideoEncodeConfig:
    """The encoder's picture: size, rate (``(num, den)``, int, float or
    Fraction; None: the encoder's default), ``pix_fmt`` (the encoder's; None:
    its first), and the rate-control and colour settings (-1 / None leave
    the encoder's defaults; ``qscale`` >= 0 is constant quality).
    ``color_range`` is ``"tv"`` (limited) or ``"pc"`` (full; None: full for
    ``yuvj*`` formats, else untagged); ``sample_aspect_ratio`` the shape of
    a pixel, as a rate (None: square). ``time_base`` (a rate, e.g.
    ``(1, 1000)``): the stream's, and each frame keeps its own time (from
    the first frame's), so unevenly spaced frames stay so; None: frames are
    numbered 0, 1, 2, ... at ``frame_rate`` whatever their times (encoders of
    fixed rates, MPEG-1/2, take only that)."""
    c = VideoEncodeConfig()
    c.height, c.width = int(height), int(width)
    c.frame_rate = None if frame_rate is None else _rate(frame_rate)
    c.pix_fmt = pix_fmt or ""
    c.bit_rate, c.compression_level, c.qscale = bit_rate, compression_level, qscale
    c.gop_size, c.max_b_frames = gop_size, max_b_frames
    c.colorspace = colorspace or ""
    c.color_primaries = color_primaries or ""
    c.color_trc = color_trc or ""
    c.color_range = color_range or ""
    c.sample_aspect_ratio = None if sample_aspect_ratio is None else _rate(sample_aspect_ratio)
    c.time_base = None if time_base is None else _rate(time_base)
    return c


def audio_encode_config(
    *,
    num_channels: int,
    sample_rate: int | None = None,
    sample_fmt: str | None = "fltp",
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
) -> AudioEncodeConfig:
    """The encoder's audio: channels, rate (None: the encoder's first),
    ``sample_fmt`` (None: the encoder's first) and rate control."""
    c = AudioEncodeConfig()
    c.num_channels = int(num_channels)
    if sample_rate is not None and int(sample_rate) <= 0:
        raise ValueError(f"sample_rate must be positive (or None: the encoder's first); got {sample_rate}")
    c.sample_rate = 0 if sample_rate is None else int(sample_rate)
    c.sample_fmt = sample_fmt or ""
    c.bit_rate, c.compression_level, c.qscale = bit_rate, compression_level, qscale
    return c


class Encoder:
    """Encodes frames for one stream of a :class:`Muxer` (from
    :meth:`Muxer.add_encode_stream`)."""

    def __init__(self, native: Any, muxer: Muxer):
        self._e = native
        self._muxer = muxer  # the native encoder lives in the Muxer

    @property
    def codec(self):
        return self._e.codec

    @property
    def name(self) -> str:
        return self._e.name

    @property
    def frame_size(self) -> int:
        """Audio: the samples per frame the encoder takes (0: any)."""
        return self._e.frame_size

    def encode(self, frames):
        """Encodes ``frames`` (consumed); the packets ready so far, or None."""
        out = self._e._encode(frames)
        return out if out.num_packets else None

    def flush(self):
        """Drains the encoder at the end of the stream; packets or None."""
        out = self._e._flush()
        return out if out.num_packets else None


# SPDL's names for the two kinds.
VideoEncoder = AudioEncoder = Encoder


class Muxer:
    """An output file: add streams (:meth:`add_encode_stream`,
    :meth:`add_remux_stream`), :meth:`open`, :meth:`write` packets,
    :meth:`close`. ``format`` names the muxer (``"mp4"``, ``"matroska"``,
    ``"wav"``, ...) when the file name does not tell.

    ``with muxer.open(): ...`` flushes and closes on leaving, also on an
    exception; a Muxer garbage-collected without :meth:`close` still
    finishes the file as well as it can and releases it.

    ``dst=None`` writes to memory (``format`` is then needed; MP4 and
    Matroska write their indexes as to a file): :meth:`getvalue` returns
    the file's bytes after :meth:`close`.
    """

    def __init__(self, dst=None, /, *, format: str | None = None):
        self._value: bytes | None = None
        if dst is None:
            if not format:
                raise ValueError("a Muxer in memory (dst=None) needs format=, e.g. 'mp4' or 'matroska'")
            self._m = _io.Muxer.in_memory(format)
        else:
            self._m = _io.Muxer(os.fspath(dst), format or "")

    def getvalue(self) -> bytes:
        """The bytes written, for a Muxer in memory (``dst=None``), after
        :meth:`close`; ``ValueError`` before, or for a Muxer of a path."""
        if self._value is None:
            self._value = self._m.take_bytes()
        return self._value

    def add_encode_stream(self, config, *, encoder: str | None = None, encoder_config: dict | None = None) -> Encoder:
        """A stream encoded by ``encoder`` (by name; None: the format's
        default, for images the extension's), with its private options
        ``encoder_config`` (``{"crf": "18", "preset": "fast"}``)."""
        options = {str(k): str(v) for k, v in (encoder_config or {}).items()}
        if isinstance(config, VideoEncodeConfig):
            native = self._m.add_video_stream(config, encoder or "", options)
        elif isinstance(config, AudioEncodeConfig):
            native = self._m.add_audio_stream(config, encoder or "", options)
        else:
            raise TypeError(f"expected video_encode_config() or audio_encode_config(), got {type(config).__name__}")
        return Encoder(native, self)

    def add_remux_stream(self, codec) -> int:
        """A stream for packets written as they are (``codec`` from a
        Demuxer or Packets); returns its index."""
        return self._m.add_remux_stream(codec)

    def open(self, muxer_config: dict | None = None) -> Muxer:
        """Opens the file and writes the header; ``muxer_config`` are the
        muxer's options (``{"movflags": "+faststart"}``)."""
        self._m.open({str(k): str(v) for k, v in (muxer_config or {}).items()})
        return self

    def write(self, stream_index: int, packets) -> None:
        """Writes ``packets`` (not consumed) to the stream."""
        self._m.write(stream_index, packets)

    def flush(self) -> None:
        self._m.flush()

    def close(self) -> None:
        """Writes the trailer and closes the file."""
        self._m.close()

    def __enter__(self) -> Muxer:
        return self

    def __exit__(self, *exc) -> None:
        if self._m.closed:
            return
        try:
            if self._m.is_open:
                self._m.flush()
        finally:
            self._m.close()

    def __repr__(self) -> str:
        return f"Muxer({self._m.dst!r}, format={self._m.format!r})"


def _contiguous(data) -> Any:
    """A C-contiguous NumPy array of ``data`` (an array, a CPU tensor)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(data, torch.Tensor):
        if data.device.type != "cpu":
            raise ValueError(f"expected a CPU tensor, got one on {data.device}")
        data = data.detach().numpy()
    import numpy as np

    return np.ascontiguousarray(data)


def _native_array(data) -> tuple[Any, list[int], str]:
    a = _contiguous(data)
    if a.dtype.byteorder == ">" or a.dtype.kind not in "biuf":
        raise ValueError(f"expected a native-order numeric array, got dtype {a.dtype}")
    if a.size == 0:
        raise ValueError(f"expected an array with samples, got shape {a.shape}")
    return memoryview(a).cast("B") if a.ndim else memoryview(a.reshape(1)).cast("B"), list(a.shape), a.dtype.name


def create_reference_video_frame(array, pix_fmt: str, frame_rate, pts: int = 0):
    """VideoFrames from an array (copied): ``rgb24``/``bgr24`` (N, H, W, 3),
    ``rgba``/``bgra``/``argb``/``abgr`` (N, H, W, 4), ``gray8`` (N, H, W)
    uint8, ``gray16``/``gray16le``/``gray16be`` (N, H, W) uint16 (or int16,
    as SPDL passes them: the same bits),
    ``yuv444p``/``gbrp`` (N, 3, H, W), ``yuv420p`` (N, 1, H*3/2, W); frame i
    has time ``pts + i`` in time base 1/frame_rate."""
    data, shape, dtype = _native_array(array)
    return _io.video_frames_from(data, shape, dtype, pix_fmt, _rate(frame_rate), int(pts))


def create_reference_audio_frame(array, sample_fmt: str, sample_rate: int, pts: int = 0):
    """AudioFrames from an array (copied): (channels, samples) for planar
    formats (``fltp``, ``s16p``, ...), (samples, channels) for packed ones
    (``flt``, ``s16``, ...), with the format's dtype."""
    data, shape, dtype = _native_array(array)
    return _io.audio_frames_from(data, shape, dtype, sample_fmt, int(sample_rate), int(pts))


_FORMATS = {
    ".png": "png",
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".webp": "webp",
    ".tif": "tiff",
    ".tiff": "tiff",
    ".bmp": "bmp",
}


def _quality(quality: int | None) -> int:
    """The native quality: -1 for None (the encoder's default)."""
    if quality is None:
        return -1
    if int(quality) < 0:
        raise ValueError(
            f"quality must be JPEG 2 to 31 or WebP 0 to 100 (or None: the encoder's default); got {quality}"
        )
    return int(quality)


def encode_image(
    data,
    *,
    format: str = "png",
    pix_fmt: str = "rgb24",
    quality: int | None = None,
    lossless: bool = False,
    compression_level: int = -1,
) -> bytes:
    """One image as the bytes of a PNG, JPEG, WebP, TIFF or BMP file.

    ``data``: a NumPy array or CPU tensor, (H, W, 3) for ``rgb24`` (see
    :func:`create_reference_video_frame` for the others, without N).
    ``quality``: JPEG 2 (best) to 31, WebP 0 to 100; ``lossless``: WebP;
    ``compression_level``: PNG 0-9, WebP 0-6. The pixels are converted when
    the format does not store ``pix_fmt``, to one that keeps what they have
    (JPEG: full-range YUV 4:4:4); an alpha channel or 16-bit samples the
    format cannot keep raise ``ValueError`` rather than being dropped."""
    arr, shape, dtype = _native_array(data)
    return _io.encode_image(
        arr, shape, dtype, format, pix_fmt, _quality(quality), bool(lossless), int(compression_level)
    )


def save_image(
    path,
    data,
    pix_fmt: str = "rgb24",
    *,
    quality: int | None = None,
    lossless: bool = False,
    compression_level: int = -1,
    qscale: int = -1,
    **kwargs,
) -> None:
    """Writes one image to ``path``; the format comes from the extension
    (``.png``, ``.jpg``/``.jpeg``, ``.webp``, ``.tif``/``.tiff``,
    ``.bmp``). ``qscale`` is SPDL's name for JPEG quality. SPDL's other
    video settings do not apply to images and are ignored with a warning."""
    from ._av import _ignored

    _ignored("save_image", {k: v for k, v in kwargs.items() if v not in (-1, None)})
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in _FORMATS:
        raise ValueError(f"{os.fspath(path)}: cannot tell the image format from {ext!r}; use {sorted(_FORMATS)}")
    if quality is None and qscale >= 0:
        quality = qscale
    blob = encode_image(
        data,
        format=_FORMATS[ext],
        pix_fmt=pix_fmt,
        quality=quality,
        lossless=lossless,
        compression_level=compression_level,
    )
    with open(path, "wb") as f:
        f.write(blob)
