"""FFmpeg information and settings, and the versions of the libraries
feedline runs with."""

from __future__ import annotations

from .._feedline_ext import __version__
from .._feedline_ext import io as _io

__all__ = [
    "get_ffmpeg_decoders",
    "get_ffmpeg_filters",
    "get_ffmpeg_log_level",
    "get_ffmpeg_versions",
    "get_library_versions",
    "set_ffmpeg_log_level",
]

_LEVELS = {"quiet": -8, "panic": 0, "fatal": 8, "error": 16, "warning": 24, "info": 32, "verbose": 40, "debug": 48}


def get_library_versions() -> dict[str, str]:
    """The versions feedline runs with, as ``"major.minor.micro"`` text:
    ``feedline`` itself, then FFmpeg's libraries (``libavformat``,
    ``libavcodec``, ``libavutil``, ``libavfilter``, ``libswscale``,
    ``libswresample``), ``libjpeg-turbo`` and ``libpng``.

    FFmpeg's and libpng's are those of the shared libraries loaded at run
    time; libjpeg-turbo's is the one feedline was compiled against (its
    TurboJPEG API has no run-time version query), ``"unknown"`` where that
    was not available."""
    out = {"feedline": __version__}
    out.update(_io.library_versions())
    return out


def get_ffmpeg_versions() -> dict[str, tuple[int, int, int]]:
    """The FFmpeg libraries feedline runs with (those loaded at run time):
    ``{"libavcodec": (59, 37, 100), ...}``."""
    out = {}
    for lib, version in _io.library_versions():
        if lib.startswith(("libav", "libsw")):
            major, minor, micro = (int(x) for x in version.split("."))
            out[lib] = (major, minor, micro)
    return out


def get_ffmpeg_decoders() -> dict[str, list[str]]:
    """Every decoder this FFmpeg has, by codec: ``{"h264": ["h264"], "av1":
    ["libdav1d", "av1"], ...}``, each codec's decoders in FFmpeg's order:
    unless a decoder is named (``DecodeConfig(decoder=...)``), feedline
    decodes with the first of them that is not experimental."""
    out: dict[str, list[str]] = {}
    for codec, decoder in _io.ffmpeg_decoders():
        out.setdefault(codec, []).append(decoder)
    return out


def set_ffmpeg_log_level(level: int | str) -> None:
    """Sets FFmpeg's own log level (``"quiet"`` by default in feedline;
    ``"error"``, ``"warning"``, ``"info"``, ... or FFmpeg's number). FFmpeg
    writes its messages to stderr; feedline reports failures as exceptions
    either way."""
    if isinstance(level, str):
        try:
            level = _LEVELS[level]
        except KeyError:
            raise ValueError(f"level must be one of {sorted(_LEVELS)} or an int, got {level!r}") from None
    _io.set_ffmpeg_log_level(int(level))


def get_ffmpeg_filters() -> list[str]:
    """The names of every filter this FFmpeg has (``scale``, ``aresample``,
    ...)."""
    return list(_io.ffmpeg_filters())


def get_ffmpeg_log_level() -> int:
    """FFmpeg's own log level (-8: quiet, feedline's default)."""
    return int(_io.ffmpeg_log_level())
