"""Audio through FFmpeg: any format FFmpeg reads, to float32 arrays."""

from __future__ import annotations

from .._feedline_ext import DecodeError
from .._feedline_ext import io as _io
from . import _av
from ._arrays import _source

__all__ = ["load_audio"]


def load_audio(
    src,
    timestamp: tuple[float, float] | None = None,
    *,
    sample_rate: int | None = None,
    num_channels: int | None = None,
    demux_config=None,
    decode_config=None,
    filter_desc=_av.FILTER_DESC_DEFAULT,
    name: str | None = None,
    **kwargs,
):
    """Decodes the best audio stream of ``src`` (a path or bytes-like) to a
    :class:`Buffer` of float32 samples, shape ``(channels, samples)`` (SPDL's
    default planar layout).

    ``timestamp=(start, end)`` keeps that window, in seconds. ``sample_rate``
    and ``num_channels`` resample and remix through libswresample; by
    default the stream's own are kept and samples are only converted to
    float, as the ffmpeg CLI converts them. Runs with the GIL released.

    With ``demux_config``, ``decode_config`` or ``filter_desc`` the call
    takes SPDL's route instead: demux, decode through the filter chain
    (default: :func:`get_audio_filter_desc` with the window, rate and
    channels), convert. A ``filter_desc`` that leaves out the final
    ``aformat=sample_fmts=fltp`` keeps the decoder's sample format: packed
    formats give ``(samples, channels)``.

    Times may be int, float, Fraction, Decimal or str; ``end`` may be
    ``inf`` or None (to the end).

    Raises :class:`feedline.DecodeError` naming the source for data that is
    not media, has no audio stream, fails to decode, or has no sample in a
    window. Other keyword arguments (SPDL's ``device_config``, say) are
    ignored with a warning.
    """
    _av._ignored("load_audio", kwargs)
    if demux_config is not None or decode_config is not None or filter_desc is not _av.FILTER_DESC_DEFAULT:
        if filter_desc is _av.FILTER_DESC_DEFAULT:
            filter_desc = _av.get_audio_filter_desc(
                sample_rate=sample_rate, num_channels=num_channels, timestamp=timestamp
            )
        elif sample_rate is not None or num_channels is not None:
            raise ValueError("give sample_rate and num_channels in filter_desc when you pass one")
        with _av.Demuxer(src, demux_config=demux_config, name=name) as d:
            packets = d.demux_audio(timestamp)
        return _av.convert_frames(_av.decode_packets(packets, filter_desc, decode_config))
    data, default_name = _source(src, "audio")
    start, duration = 0.0, None
    window = _av._window(timestamp)
    if window is not None:
        start, duration = window.start, window.end - window.start
    label = name or default_name
    out = _io.load_audio(data, label, sample_rate or 0, num_channels or 0, start, duration)
    if window is not None and out.shape[1] == 0 and duration != 0:
        # As decode_packets: a window past the end is an error, not an
        # empty clip (a file without samples gives its empty array).
        whole = _io.load_audio(data, label, sample_rate or 0, num_channels or 0, 0.0, None)
        if whole.shape[1] > 0:
            raise DecodeError(f"{label}: no audio in the window [{window.start}, {window.end}) s")
    return out
