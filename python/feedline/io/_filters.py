"""FFmpeg filter descriptions as SPDL builds them, and :class:`FilterGraph`.

Part of :mod:`feedline.io` (re-exported there); the strings are FFmpeg's
filter syntax, built in SPDL's order so that a description written for SPDL
reads the same here.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import cast

from .._feedline_ext import io as _io

AudioPackets = _io.AudioPackets
VideoPackets = _io.VideoPackets
ImagePackets = _io.ImagePackets
Codec = _io.Codec
Frames = _io.Frames


def _num(v) -> str:
    return str(float(v)) if isinstance(v, (Fraction, Decimal)) else str(v)


def _trim_args(timestamp) -> str:
    """ "start=S:end=E" for a window, leaving out an infinite or None end."""
    args = []
    for key, value in zip(("start", "end"), timestamp):
        if value is not None and not (isinstance(value, float) and math.isinf(value)):
            args.append(f"{key}={_num(value)}")
    return ":".join(args)


def _chain(parts: list[str], filter_desc: str | None, output_format: str | None) -> str | None:
    """``parts``, then the user's ``filter_desc``, then the output format
    filter, joined; None when there is nothing to do."""
    parts = parts + [p for p in (filter_desc, output_format) if p]
    return ",".join(parts) if parts else None


def get_audio_filter_desc(
    *,
    sample_rate: int | None = None,
    num_channels: int | None = None,
    sample_fmt: str | None = "fltp",
    timestamp=None,
    num_frames: int | None = None,
    filter_desc: str | None = None,
) -> str | None:
    """The audio filter chain, in SPDL's order: channel layout, resample,
    ``atrim`` to the window, pad or cut to ``num_frames`` samples, the
    user's ``filter_desc``, then ``aformat=sample_fmts=...``. None when
    there is nothing to do."""
    parts = []
    if num_channels is not None:
        parts.append(f"aformat=channel_layouts={num_channels}c")
    if sample_rate is not None:
        parts.append(f"aresample={sample_rate}")
    if timestamp is not None:
        trim = _trim_args(timestamp)
        if trim:
            parts.append("atrim=" + trim)
    if num_frames is not None:
        parts.append("apad")
        parts.append(f"atrim=end_sample={num_frames}")
    return _chain(parts, filter_desc, None if sample_fmt is None else f"aformat=sample_fmts={sample_fmt}")


def get_video_filter_desc(
    *,
    frame_rate=None,
    timestamp=None,
    scale_width: int | None = None,
    scale_height: int | None = None,
    scale_algo: str = "bicubic",
    scale_mode: str | None = "pad",
    crop_width: int | None = None,
    crop_height: int | None = None,
    pix_fmt: str | None = "rgb24",
    num_frames: int | None = None,
    pad_mode: str | None = None,
    filter_desc: str | None = None,
) -> str | None:
    """The video filter chain, in SPDL's order: ``fps``, ``trim`` to the
    window, scale (``scale_mode`` None: stretch, "pad": fit and pad, "crop":
    fill and crop), a centre crop, padding to ``num_frames`` frames (by
    repeating the last frame, or with ``pad_mode`` colour), the user's
    ``filter_desc``, then ``format=pix_fmts=...``. None when there is
    nothing to do."""
    parts = []
    if frame_rate is not None:
        if isinstance(frame_rate, tuple):
            num, den = frame_rate
        else:
            f = Fraction(frame_rate)
            num, den = f.numerator, f.denominator
        parts.append(f"fps={num}/{den}")
    if timestamp is not None:
        trim = _trim_args(timestamp)
        if trim:
            parts.append("trim=" + trim)
    if scale_width is not None or scale_height is not None:
        w, h = scale_width or 0, scale_height or 0
        scale = f"scale=w={w}:h={h}:flags={scale_algo}"
        if scale_mode is None:
            parts.append(scale)
        elif scale_mode == "pad":
            parts.append(scale + ":force_original_aspect_ratio=decrease")
            parts.append(f"pad=w={w}:h={h}:x=-1:y=-1:color={pad_mode or 'black'}")
        elif scale_mode == "crop":
            parts.append(scale + ":force_original_aspect_ratio=increase")
            parts.append(f"crop=w={w}:h={h}")
        else:
            raise ValueError(f"scale_mode must be None, 'pad' or 'crop', got {scale_mode!r}")
    if crop_width is not None or crop_height is not None:
        parts.append(f"crop=w={crop_width or 0}:h={crop_height or 0}")
    if num_frames is not None:
        if pad_mode is None:
            parts.append("tpad=stop=-1:stop_mode=clone")
        else:
            parts.append(f"tpad=stop=-1:stop_mode=add:color={pad_mode}")
        parts.append(f"trim=end_frame={num_frames}")
    return _chain(parts, filter_desc, None if pix_fmt is None else f"format=pix_fmts={pix_fmt}")


def get_filter_desc(packets, **kwargs) -> str | None:
    """The default chain for ``packets``: audio with their window; video and
    images without (the decoder applies the window itself)."""
    if type(packets) is AudioPackets:
        return get_audio_filter_desc(timestamp=packets.timestamp, **kwargs)
    if type(packets) in (VideoPackets, ImagePackets):
        return get_video_filter_desc(timestamp=None, **kwargs)
    raise TypeError(f"get_filter_desc needs Packets, got {type(packets).__name__}")


def get_abuffer_desc(codec: Codec, *, label: str | None = None, sample_fmt: str | None = None) -> str:
    """The ``abuffer`` source description for a :class:`FilterGraph` fed
    frames of ``codec``."""
    return _io.buffer_source_desc(codec, label or "", sample_fmt or "")


def get_buffer_desc(codec: Codec, label: str | None = None, pix_fmt: str | None = None) -> str:
    """The ``buffer`` source description for a :class:`FilterGraph` fed
    frames of ``codec``."""
    return _io.buffer_source_desc(codec, label or "", pix_fmt or "")


class FilterGraph:
    """An FFmpeg filter graph with ``buffer``/``abuffer`` inputs and
    ``buffersink``/``abuffersink`` outputs, keyed by instance name
    (``Parsed_buffer_0``, or ``buffer@in0`` with a label). ``add_frames``
    consumes the frames; ``get_frames`` returns what an output has ready, or
    None."""

    def __init__(self, filter_desc: str):
        self._g = _io.FilterGraph(filter_desc)

    @property
    def inputs(self) -> list[str]:
        return self._g.inputs

    @property
    def outputs(self) -> list[str]:
        return self._g.outputs

    def add_frames(self, frames: Frames, *, key: str | None = None) -> None:
        self._g.add_frames(frames, key or "")

    def flush(self) -> None:
        self._g.flush()

    def get_frames(self, *, key: str | None = None) -> Frames | None:
        return cast("Frames | None", self._g.get_frames(key or ""))

    def dump(self) -> str:
        return self._g.dump()
