"""Audio, video and images through FFmpeg: demux, decode, filter, convert.

The names, defaults and shapes are SPDL's (``spdl.io``), so migrating is an
import change. Everything heavy runs in C++ with the GIL released; this
module arranges arguments and builds filter descriptions.

Where feedline differs:

* :func:`load_video` without a ``filter_desc`` takes a fast path: frames are
  converted with libswscale straight into the output array (no filter graph,
  no intermediate frame), and non-reference frames before a window are not
  decoded at all. The pixels equal the filter path's and the ``ffmpeg``
  CLI's.
* Errors are typed: :class:`feedline.DecodeError` (naming the source) for
  data that is not media, has no such stream or decodes to nothing,
  :class:`feedline.IoError` for a missing file, ``ValueError`` for bad
  options, unknown or unused FFmpeg options and bad filter descriptions. A
  window past the end of the stream raises instead of returning an empty
  array.
* Input is safe by default: paths are read with the ``file`` protocol
  only, and formats that open other files or URLs (HLS, concat, ...) or are
  not media (FFmpeg's ``tty`` text decoder, ...) raise
  :class:`feedline.UnsupportedFormat` unless named with
  ``demux_config(format=...)``; other protocols must be listed in
  ``format_options={"protocol_whitelist": ...}``. Decoders refuse frames
  over 2**27 pixels (the decoder option ``max_pixels``).
* A Demuxer, Decoder or FilterGraph used from a second thread while a call
  is in progress raises :class:`feedline.Error` instead of racing it.
* Unknown keyword arguments, which SPDL accepts and ignores, are ignored
  with a warning naming them (a typo would otherwise pass unnoticed).
* A consumed :class:`Packets` or :class:`Frames` raises ``TypeError`` without
  nanobind's warning.
"""

from __future__ import annotations

import copyreg
import decimal
import math
import numbers
import os
from collections.abc import Iterator, Sequence
from typing import cast

from .._feedline_ext import io as _io
from ._filters import (
    FilterGraph,
    get_abuffer_desc,
    get_audio_filter_desc,
    get_buffer_desc,
    get_filter_desc,
    get_video_filter_desc,
)
from ._options import _int

__all__ = [
    "AudioFrames",
    "AudioPackets",
    "BSF",
    "Codec",
    "DecodeConfig",
    "Decoder",
    "DemuxConfig",
    "Demuxer",
    "FilterGraph",
    "Frames",
    "ImageFrames",
    "ImagePackets",
    "Packets",
    "VideoFrames",
    "VideoPackets",
    "apply_bsf",
    "convert_array",
    "convert_frames",
    "decode_config",
    "decode_packets",
    "demux_audio",
    "demux_config",
    "demux_image",
    "demux_video",
    "get_abuffer_desc",
    "get_audio_filter_desc",
    "get_buffer_desc",
    "get_filter_desc",
    "get_video_filter_desc",
    "load_image_ffmpeg",
    "load_video",
    "sample_decode_video",
    "streaming_load_video",
]

Codec = _io.Codec
DemuxConfig = _io.DemuxConfig  # what demux_config() makes
DecodeConfig = _io.DecodeConfig  # what decode_config() makes
Packets = _io.Packets
AudioPackets = _io.AudioPackets
VideoPackets = _io.VideoPackets
ImagePackets = _io.ImagePackets
Frames = _io.Frames
AudioFrames = _io.AudioFrames
VideoFrames = _io.VideoFrames
ImageFrames = _io.ImageFrames
for _cls in (Codec, Packets, AudioPackets, VideoPackets, ImagePackets, Frames, AudioFrames, VideoFrames, ImageFrames):
    _cls.__module__ = "feedline.io"


class _Default:
    def __repr__(self):
        return "<default filter>"


#: The default ``filter_desc``: build the standard chain for the media
#: (audio: trim to the window and float planar; video and images: rgb24).
FILTER_DESC_DEFAULT = _Default()

# --- configs ----------------------------------------------------------------


def demux_config(
    format: str | None = None,
    format_options: dict[str, str] | None = None,
    buffer_size: int = 65536,
    *,
    find_stream_info: bool | None = None,
    allow_unsafe_formats: bool = False,
) -> _io.DemuxConfig:
    """How to open a source: a forced ``format`` ("rawvideo", "s16le", ...;
    naming a format refused by default, such as "hls" or "concat", allows
    it),
    ``format_options`` for the demuxer (every one must be used, or
    ``ValueError`` is raised), the AVIO ``buffer_size``
    for in-memory sources, and whether to probe streams by decoding their
    first frames (``find_stream_info``; ``None``: :class:`Demuxer` and the
    ``demux_*`` functions probe, for complete codec metadata as SPDL's;
    ``load_video`` and the native ops probe only containers whose headers
    lack codec parameters; ``False`` skips it, which demuxes H.264 MP4s
    about 10x faster, leaving the metadata the header lacks, such as the
    pixel format, unknown). ``allow_unsafe_formats=True`` accepts whatever format
    probing finds, including playlists and scripts that open other files
    (see docs/ffmpeg.md, "Safe input by default"); only for trusted data."""
    cfg = _io.DemuxConfig()
    cfg.allow_unsafe_formats = bool(allow_unsafe_formats)
    if format is not None:
        cfg.format = format
    if format_options:
        cfg.format_options = {str(k): str(v) for k, v in format_options.items()}
    if buffer_size <= 0:
        raise ValueError(f"buffer_size must be > 0, got {buffer_size}")
    cfg.buffer_size = int(buffer_size)
    cfg.find_stream_info = find_stream_info
    return cfg


def decode_config(
    decoder: str | None = None, decoder_options: dict[str, str] | None = None, *, threads: int | None = None
) -> _io.DecodeConfig:
    """How to decode: a ``decoder`` by name (default: FFmpeg's for the
    codec), ``decoder_options`` (every one must be used), and ``threads``
    (0 lets FFmpeg choose). By default one thread, as SPDL (a data loader
    decodes many files at once), except that :func:`load_video` of a whole
    clip takes the cores no other ``load_video`` of the process is using: 2
    threads on 2 cores with one clip in flight, 1 with two."""
    cfg = _io.DecodeConfig()
    if decoder is not None:
        cfg.decoder = decoder
    if decoder_options:
        cfg.decoder_options = {str(k): str(v) for k, v in decoder_options.items()}
    if threads is not None:
        threads = _int(threads, "threads")  # not True, not 2.7
        if threads < 0:
            raise ValueError(f"threads must be >= 0, got {threads}")
        cfg.threads = threads
    return cfg


def _demux_cfg(cfg):
    return cfg if cfg is not None else _io.DemuxConfig()


def _decode_cfg(cfg):
    return cfg if cfg is not None else _io.DecodeConfig()


# --- times ------------------------------------------------------------------


def _window(timestamp):
    """(start, end) in seconds -> a native Window (None: no window). The
    times may be int, float, Fraction, Decimal or str; end may be inf."""
    if timestamp is None:
        return None
    try:
        start, end = timestamp
    except (TypeError, ValueError):
        raise TypeError(f"timestamp must be (start, end), got {timestamp!r}") from None
    for t in (start, end):
        if t is not None and (isinstance(t, bool) or not isinstance(t, (numbers.Real, decimal.Decimal, str))):
            raise TypeError(f"a time must be a number, Fraction, Decimal or str, got {type(t).__name__}")
    return _io.Window(start, end)


def _limit(num_frames):
    """A frame count as the native limit: None (all) for None or <= 0."""
    return None if num_frames is None or num_frames <= 0 else int(num_frames)


def _ignored(where: str, kwargs: dict) -> None:
    if kwargs:
        import warnings

        warnings.warn(f"{where} ignores these arguments: {sorted(kwargs)}", stacklevel=3)


def _src(src):
    """Paths stay paths; tensors become NumPy arrays (no copy); bytes-likes
    are read in place."""
    if isinstance(src, (str, os.PathLike, bytes, bytearray, memoryview)):
        return src
    if hasattr(src, "numpy") and hasattr(src, "device"):  # a CPU tensor
        return src.numpy()
    return src


# --- demuxing ---------------------------------------------------------------


class Demuxer:
    """Reads packets from ``src``: a path, an FFmpeg URL, or a bytes-like
    object (bytes, bytearray, memoryview, a uint8 NumPy array, a CPU tensor)
    read in place and kept alive by the Demuxer and its packets.

    ``name`` names the source in errors and reprs (default: the path, or
    ``<Bytes: 0x...>``). Use it as a context manager to free it early.
    """

    def __init__(self, src, *, demux_config: _io.DemuxConfig | None = None, name: str | None = None, **kwargs):
        _ignored("Demuxer", kwargs)
        cfg = _demux_cfg(demux_config)
        if demux_config is None or cfg.find_stream_info is None:
            # Codec metadata (pix_fmt, exact frame rate) as SPDL reports it
            # needs the probe; load_video skips it where it can.
            cfg = _demux_config_copy(cfg, find_stream_info=True)
        self._d: _io.Demuxer | None = _io.Demuxer(_src(src), cfg, name or "")

    @property
    def _native(self):
        d = self._d
        if d is None:
            raise RuntimeError("the Demuxer was closed")
        return d

    def demux_audio(self, window=None, *, bsf: str | None = None) -> AudioPackets:
        """Packets of the best audio stream, in the window ``(start, end)``
        (seconds) when given, through the bit-stream filter ``bsf`` when
        given (see :func:`apply_bsf`)."""
        return _with_bsf(self._native.demux(_io.Media.AUDIO, _window(window)), bsf)

    def demux_video(self, window=None, *, bsf: str | None = None) -> VideoPackets:
        """Packets of the best video stream, in the window when given (the
        packets from the key frame before its start are kept: the decoder
        needs them), through the bit-stream filter ``bsf`` when given."""
        return _with_bsf(self._native.demux(_io.Media.VIDEO, _window(window)), bsf)

    def demux_image(self, *, bsf: str | None = None) -> ImagePackets:
        """The first packet of the best video stream (an image)."""
        return _with_bsf(self._native.demux(_io.Media.IMAGE, None), bsf)

    def streaming_demux(self, indices=None, *, duration: float = -1, num_packets: int = -1):
        """Iterates over the file in chunks: ``num_packets`` packets of one
        stream, or ``duration`` seconds. ``indices``: None (stream 0) or an
        int gives Packets; a sequence gives ``{index: Packets}``. Streamed
        packets carry no codec: take it from :attr:`video_codec` etc."""
        if duration <= 0 and num_packets <= 0:
            raise ValueError("Either `duration` or `num_packets` must be specified.")
        if duration > 0 and num_packets > 0:
            raise ValueError("Only one of `duration` and `num_packets` can be specified.")
        if indices is None or isinstance(indices, int):
            streams, single = [0 if indices is None else indices], True
        else:
            streams, single = sorted(set(indices)), False
        native = self._native
        native.rewind()
        while True:
            chunk = native.next_chunk(streams, float(duration), int(num_packets))
            if not chunk:
                return
            if single:
                yield chunk[streams[0]]
            else:
                yield chunk

    def has_audio(self) -> bool:
        return self._native.has_audio()

    @property
    def audio_stream_index(self) -> int:
        return self._native.best_stream(_io.Media.AUDIO)

    @property
    def video_stream_index(self) -> int:
        return self._native.best_stream(_io.Media.VIDEO)

    @property
    def audio_codec(self) -> Codec:
        return self._native.codec(_io.Media.AUDIO)

    @property
    def video_codec(self) -> Codec:
        return self._native.codec(_io.Media.VIDEO)

    @property
    def image_codec(self) -> Codec:
        return self._native.codec(_io.Media.IMAGE)

    @property
    def duration(self) -> float:
        """Seconds, or 0 when the container does not say."""
        return self._native.duration

    def _drop(self):
        self._d = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._drop()

    def __repr__(self):
        return f"Demuxer({self._d.name if self._d is not None else '<closed>'})"


# Every field of DemuxConfig (a test checks the list against the class).
_DEMUX_FIELDS = ("format", "format_options", "buffer_size", "find_stream_info", "allow_unsafe_formats")


def _demux_config_copy(cfg: _io.DemuxConfig, **changes) -> _io.DemuxConfig:
    out = _io.DemuxConfig()
    for k in _DEMUX_FIELDS:
        setattr(out, k, changes[k] if k in changes else getattr(cfg, k))
    return out


def demux_audio(src, *, timestamp=None, demux_config=None, bsf=None, name=None, **kwargs) -> AudioPackets:
    with Demuxer(src, demux_config=demux_config, name=name, **kwargs) as d:
        return d.demux_audio(timestamp, bsf=bsf)


def demux_video(src, *, timestamp=None, demux_config=None, bsf=None, name=None, **kwargs) -> VideoPackets:
    with Demuxer(src, demux_config=demux_config, name=name, **kwargs) as d:
        return d.demux_video(timestamp, bsf=bsf)


def demux_image(src, *, demux_config=None, bsf=None, name=None, **kwargs) -> ImagePackets:
    with Demuxer(src, demux_config=demux_config, name=name, **kwargs) as d:
        return d.demux_image(bsf=bsf)


# --- bit-stream filters -----------------------------------------------------


class BSF:
    """A bit-stream filter, or a chain of them (``"h264_mp4toannexb"``,
    ``"hevc_mp4toannexb,dump_extra"``), for packets of ``codec``: rewrites
    packets without decoding them. Typical use: MP4's length-prefixed
    H.264/HEVC to the Annex B start codes that hardware decoders and raw
    elementary-stream files take. ``"null"`` passes packets through.

    An unknown filter, bad options, or a filter that does not take the
    codec raise ``ValueError`` naming the codecs it takes.
    """

    def __init__(self, codec: Codec, bsf: str):
        self._bsf = _io.BSF(codec, bsf)

    @property
    def codec(self) -> Codec:
        """The codec of the packets that come out (for the decoder)."""
        return self._bsf.codec

    def filter(self, packets: Packets, flush: bool = False) -> Packets | None:
        """Filters ``packets`` (consumed). The result keeps the src, stream
        and window, and has :attr:`codec` when the input had a codec; None
        when nothing came out. With ``flush=True`` the filter is drained and
        reset, ready for another stream."""
        out = self._bsf._filter(packets, flush)
        return out if out.num_packets else None

    def flush(self) -> Packets | None:
        """Whatever the filter still holds (None when nothing), and resets it."""
        out = self._bsf._flush()
        return out if out.num_packets else None

    def __repr__(self):
        return repr(self._bsf)


def apply_bsf(packets: Packets, bsf: str) -> Packets | None:
    """``BSF(packets.codec, bsf).filter(packets, flush=True)``: packets
    (consumed) through a bit-stream filter. ``ValueError`` when the packets
    carry no codec (streamed packets)."""
    if packets.codec is None:
        raise ValueError("The packets object does not have codec.")
    return BSF(packets.codec, bsf).filter(packets, flush=True)


def _with_bsf(packets, bsf):
    if bsf is None:
        return packets
    src = packets.src
    out = apply_bsf(packets, bsf)
    if out is None:
        raise ValueError(f"bit-stream filter {bsf!r} gave no packets for {src}")
    return out


# --- packets across processes -----------------------------------------------


def _deserialize(data) -> Packets:
    """Rebuilds pickled packets (copied)."""
    return _io.Packets.deserialize(data)


def _reduce_packets(packets: Packets):
    return _deserialize, (packets.serialize(),)


for _cls in (AudioPackets, VideoPackets, ImagePackets):
    copyreg.pickle(_cls, _reduce_packets)


def _deserialize_frames(data) -> Frames:
    """Rebuilds pickled frames."""
    return _io.Frames.deserialize(data)


def _reduce_frames(frames: Frames):
    return _deserialize_frames, (frames.serialize(),)


for _cls in (AudioFrames, VideoFrames, ImageFrames):
    copyreg.pickle(_cls, _reduce_frames)


# --- filter descriptions (in _filters) ------------------------------------


def _resolve_filter(packets, filter_desc):
    if filter_desc is FILTER_DESC_DEFAULT:
        return get_filter_desc(packets)
    return filter_desc


# --- decoding ---------------------------------------------------------------


def decode_packets(
    packets: Packets, filter_desc=FILTER_DESC_DEFAULT, decode_config=None, *, num_frames: int | None = None
) -> Frames:
    """Decodes ``packets`` (consumed) to frames. ``filter_desc``: the default
    chain (audio float planar trimmed to the window; video and images
    rgb24), None for the decoder's own format, or a chain of your own.
    ``num_frames`` stops after that many frames (None, or SPDL's -1: all).
    Video frames outside the packets' window are dropped."""
    fd = _resolve_filter(packets, filter_desc)
    return _io.decode_packets(packets, fd, _decode_cfg(decode_config), _limit(num_frames))


class _StreamingDecoder:
    def __init__(self, codec: Codec, filter_desc, decode_config):
        self._media = codec.media
        if filter_desc is FILTER_DESC_DEFAULT:
            if codec.media == _io.Media.AUDIO:
                filter_desc = get_audio_filter_desc()
            else:
                filter_desc = get_video_filter_desc()
        self._d = _io.Decoder(codec, filter_desc, _decode_cfg(decode_config))
        self._buffer_size = 0

    def set_buffer_size(self, n: int) -> None:
        """Video: yield at most ``n`` frames at a time (0: all a call makes)."""
        if n < 0:
            raise ValueError(f"buffer size must be >= 0, got {n}")
        self._buffer_size = n

    def _split(self, frames):
        if frames is None or frames.num_frames == 0:
            return
        n = self._buffer_size
        if self._media == _io.Media.AUDIO or n <= 0 or len(frames) <= n:
            yield frames
            return
        total = len(frames)
        for i in range(0, total, n):
            yield frames._select(list(range(i, min(i + n, total))))

    def streaming_decode_packets(self, packets: Packets) -> Iterator[Frames]:
        """Decodes ``packets`` (consumed); yields the frames they made."""
        yield from self._split(self._d.decode(packets))

    def flush(self) -> Iterator[Frames]:
        """Yields what the decoder and filter still hold at the end."""
        yield from self._split(self._d.flush())


def Decoder(codec: Codec, *, filter_desc=FILTER_DESC_DEFAULT, decode_config=None) -> _StreamingDecoder:  # noqa: N802
    """A streaming decoder for packets of ``codec`` (from a Demuxer):
    ``streaming_decode_packets(packets)`` and ``flush()`` yield Frames."""
    return _StreamingDecoder(codec, filter_desc, decode_config)


def sample_decode_video(
    packets: VideoPackets, indices: Sequence[int], *, decode_config=None, filter_desc=FILTER_DESC_DEFAULT
) -> list[ImageFrames]:
    """Decodes only the frames at ``indices`` (in the packets' window, in
    presentation order): the packets are split at key frames, splits without
    a wanted frame are not decoded, and within a split frames nothing refers
    to are skipped. ``packets`` are consumed. The filter is applied to each
    returned frame (per-frame filters such as scale and format)."""
    indices = list(indices)
    if not indices:
        raise ValueError("indices must not be empty")
    n = len(packets)
    # Packets without a time (MPEG-PS B-frames) are counted after decoding.
    untimed = any(math.isnan(t) for t in packets.get_timestamps(raw=True))
    for i in indices:
        if i < 0 or (i >= n and not untimed):
            raise IndexError(f"frame index {i} is out of range [0, {n})")
    if any(b < a for a, b in zip(indices, indices[1:])):
        raise ValueError("indices must be sorted in ascending order")
    if len(set(indices)) != len(indices):
        raise ValueError("indices must not contain duplicates")
    if filter_desc is FILTER_DESC_DEFAULT:
        filter_desc = get_video_filter_desc()
    frames = _io.sample_decode_video(packets, indices, filter_desc, _decode_cfg(decode_config))
    return cast("list[ImageFrames]", frames)


def convert_frames(frames, storage=None):
    """Copies frames (consumed) into one :class:`Buffer`: video ``(N, H, W,
    C)`` (rgb24, rgba, gray, ...), ``(N, 3, H, W)`` for yuv444p, ``(N, 1,
    H*3/2, W)`` for yuv420p/nv12, ``(N, 1, 2H, W)`` for yuv422p, ``(N, 1, H,
    W)`` uint16 for gray16; images without N; audio ``(C, N)`` planar or
    ``(N, C)`` packed. A sequence of Frames of one shape gives a batch."""
    if storage is not None:
        raise NotImplementedError("storage= is not supported: feedline allocates each Buffer")
    return _io.convert_frames(frames if isinstance(frames, _io.Frames) else list(frames))


def convert_array(vals, storage=None):
    """Copies ``vals`` (array-like, e.g. class labels) into a new int64
    :class:`Buffer`, as SPDL's ``convert_array``."""
    import numpy as np

    if storage is not None:
        raise NotImplementedError("storage= is not supported: feedline allocates each Buffer")
    arr = np.array(vals, dtype=np.int64, copy=True, order="C")
    if arr.size == 0:
        raise ValueError("convert_array needs a non-empty array")
    return _io.buffer_view(arr.reshape(-1).view(np.uint8), "int64", list(arr.shape))


def _select(frames: VideoFrames, key):
    n = len(frames)
    if isinstance(key, int):
        if not -n <= key < n:
            raise IndexError(f"frame index {key} is out of range for {n} frames")
        return frames._image(key)
    if isinstance(key, slice):
        start, stop, step = key.indices(n)
        if step <= 0:
            raise ValueError("slice step must be positive")
        return frames._select(list(range(start, stop, step)))
    if isinstance(key, (list, tuple)):
        return frames._select([int(i) for i in key])
    raise TypeError(f"frames indices must be int, slice or list, got {type(key).__name__}")


# The frame classes are extended here, in Python, not in their stubs.
VideoFrames.__getitem__ = _select  # type: ignore[misc]


def _iter_frames(frames: VideoFrames):
    for i in range(len(frames)):
        yield frames._image(i)


VideoFrames.__iter__ = _iter_frames  # type: ignore[attr-defined]


def _image_pts(frames: ImageFrames) -> float:
    ts = frames.get_timestamps()
    return ts[0] if ts else 0.0


ImageFrames.pts = property(_image_pts)  # type: ignore[attr-defined]
for _cls, _kind in ((VideoFrames, "pix_fmt"), (ImageFrames, "pix_fmt"), (AudioFrames, "sample_fmt")):
    setattr(_cls, _kind, property(lambda self: self.format))


def _codec_attr(name):
    return property(lambda self: getattr(self.codec, name) if self.codec is not None else _no_codec(self))


def _no_codec(packets):
    raise RuntimeError(f"{type(packets).__name__} have no codec (streamed packets); take it from the Demuxer")


for _name in ("sample_rate", "num_channels"):
    setattr(AudioPackets, _name, _codec_attr(_name))
for _name in ("width", "height", "pix_fmt", "frame_rate"):
    setattr(VideoPackets, _name, _codec_attr(_name))
for _name in ("width", "height", "pix_fmt"):
    setattr(ImagePackets, _name, _codec_attr(_name))


# --- one-call loaders ---------------------------------------------------------


def load_video(
    src,
    timestamp=None,
    *,
    demux_config=None,
    decode_config=None,
    filter_desc=FILTER_DESC_DEFAULT,
    pix_fmt: str = "rgb24",
    num_frames: int | None = None,
    name: str | None = None,
    **kwargs,
):
    """Decodes the best video stream of ``src`` (a path, URL or bytes-like)
    to a uint8 :class:`Buffer` of shape ``(N, H, W, 3)``, limited to the
    half-open window ``timestamp=(start, end)`` seconds when given.

    Without ``filter_desc`` this is the fast path: decoded frames are
    converted straight into the output (``pix_fmt``: rgb24, bgr24, rgba,
    bgra or gray), and frames before the window that nothing refers to are
    not decoded. ``num_frames`` stops after that many frames. With a
    ``filter_desc`` string (for example from :func:`get_video_filter_desc`)
    frames go through that FFmpeg filter chain instead; ``filter_desc=None``
    keeps the decoder's own pixel format (see :func:`convert_frames`).
    """
    _ignored("load_video", kwargs)
    window = _window(timestamp)
    if filter_desc is None:
        with Demuxer(src, demux_config=demux_config, name=name) as d:
            packets = d.demux_video(timestamp)
        frames = decode_packets(packets, None, decode_config, num_frames=num_frames)
        return convert_frames(frames)
    fd = None if filter_desc is FILTER_DESC_DEFAULT else filter_desc
    options = _io.VideoOptions(
        window, _demux_cfg(demux_config), _decode_cfg(decode_config), fd, pix_fmt, _limit(num_frames)
    )
    return _io.load_video(_src(src), options, name or "", False)


def load_image_ffmpeg(
    src,
    *,
    demux_config=None,
    decode_config=None,
    filter_desc=FILTER_DESC_DEFAULT,
    pix_fmt: str = "rgb24",
    name: str | None = None,
):
    """Decodes an image (any format FFmpeg reads: PNG, JPEG, BMP, TIFF,
    WebP, GIF's first frame, ...) to ``(H, W, 3)`` uint8 through FFmpeg."""
    if filter_desc is None:
        with Demuxer(src, demux_config=demux_config, name=name) as d:
            packets = d.demux_image()
        return convert_frames(decode_packets(packets, None, decode_config))
    fd = None if filter_desc is FILTER_DESC_DEFAULT else filter_desc
    options = _io.VideoOptions(None, _demux_cfg(demux_config), _decode_cfg(decode_config), fd, pix_fmt, None)
    return _io.load_video(_src(src), options, name or "", True)


def streaming_load_video(
    src,
    num_frames: int,
    *,
    demux_config=None,
    decode_config=None,
    filter_desc=FILTER_DESC_DEFAULT,
    name: str | None = None,
) -> Iterator:
    """Iterates over a long video in :class:`Buffer` chunks of
    ``num_frames`` frames ``(n, H, W, 3)`` (the last may be shorter), holding
    only one chunk's frames at a time."""
    if num_frames <= 0:
        raise ValueError(f"num_frames must be > 0, got {num_frames}")
    with Demuxer(src, demux_config=demux_config, name=name) as d:
        index = d.video_stream_index
        decoder = Decoder(d.video_codec, filter_desc=filter_desc, decode_config=decode_config)
        decoder.set_buffer_size(num_frames)
        pending = []
        have = 0

        def emit(frames):
            nonlocal have
            pending.append(frames)
            have += len(frames)

        for packets in d.streaming_demux(index, num_packets=num_frames):
            for frames in decoder.streaming_decode_packets(packets):
                emit(frames)
            while have >= num_frames:
                yield _take(pending, num_frames)
                have -= num_frames
        for frames in decoder.flush():
            emit(frames)
        while have > 0:
            n = min(have, num_frames)
            yield _take(pending, n)
            have -= n


def _take(pending: list, n: int):
    """Converts the first n frames held in ``pending`` into one Buffer."""
    parts, got = [], 0
    while got < n:
        frames = pending[0]
        k = len(frames)
        if got + k <= n:
            parts.append(pending.pop(0))
            got += k
        else:
            need = n - got
            parts.append(frames._select(list(range(need))))
            pending[0] = frames._select(list(range(need, k)))
            got = n
    merged = parts[0]
    for p in parts[1:]:
        merged._extend(p)
    return convert_frames(merged)
