"""FFmpeg information and settings."""

from __future__ import annotations

from .._feedline_ext import io as _io

__all__ = ["get_ffmpeg_filters", "get_ffmpeg_log_level", "get_ffmpeg_versions", "set_ffmpeg_log_level"]

_LEVELS = {"quiet": -8, "panic": 0, "fatal": 8, "error": 16, "warning": 24, "info": 32, "verbose": 40, "debug": 48}


def get_ffmpeg_versions() -> dict[str, tuple[int, int, int]]:
    """The FFmpeg libraries feedline runs with: ``{"libavcodec": (59, 37,
    100), ...}``."""
    out = {}
    for part in _io.ffmpeg_versions().split(", "):
        lib, version = part.split(" ")
        major, minor, micro = (int(x) for x in version.split("."))
        out[lib] = (major, minor, micro)
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
