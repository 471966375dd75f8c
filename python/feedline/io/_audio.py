"""Audio through FFmpeg: any format FFmpeg reads, to float32 arrays."""

from __future__ import annotations

from .._feedline_ext import io as _io
from ._arrays import _source

__all__ = ["load_audio"]


def load_audio(src, timestamp: tuple[float, float] | None = None, *, sample_rate: int | None = None,
               num_channels: int | None = None):
    """Decodes the best audio stream of ``src`` (a path or bytes-like) to a
    :class:`Buffer` of float32 samples, shape ``(channels, samples)`` (SPDL's
    default planar layout).

    ``timestamp=(start, end)`` keeps that window, in seconds. ``sample_rate``
    and ``num_channels`` resample and remix through libswresample; by
    default the stream's own are kept and samples are only converted to
    float, as the ffmpeg CLI converts them. Runs with the GIL released.
    Raises :class:`feedline.DecodeError` naming the source for data that is
    not media, has no audio stream, or fails to decode.
    """
    data, name = _source(src, "audio")
    start, duration = 0.0, None
    if timestamp is not None:
        start, end = timestamp
        if start < 0 or end < start:
            raise ValueError(f"timestamp must be (start, end) with 0 <= start <= end, got {timestamp}")
        duration = end - start
    buf, _, _ = _io.load_audio(data, name, sample_rate or 0, num_channels or 0, float(start), duration)
    return buf
