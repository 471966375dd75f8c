"""Process-wide defaults of feedline.pipeline, as ``spdl.pipeline.config``.

- :func:`set_default_hook_class`: the hook each stage gets when
  ``build_pipeline`` has no ``task_hook_factory``.
- :func:`set_default_queue_class`: a :class:`StatsQueue` subclass set here
  is fed the counters of each native queue; another class is ignored with a
  warning at build time.
- :func:`set_default_build_callback`: called with every PipelineConfig that
  is built (to log or record descriptions).
- :func:`is_diagnostic_mode_enabled` and :func:`diagnostic_mode_num_sources`:
  the diagnostic mode (``FEEDLINE_PIPELINE_DIAGNOSTIC_MODE``, or SPDL's
  ``SPDL_PIPELINE_DIAGNOSTIC_MODE``), in which ``build_pipeline`` returns a
  pipeline that profiles the config and exits.
- :func:`set_compact_log`: one-line failure logs. feedline's failure logs
  are always one line per failure (type, message, file and line of the op),
  rate-limited per stage; the setting is kept for code that reads it.

The defaults are read when a pipeline is built; pipelines built before a
change keep what they had.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from ._hooks import TaskStatsHook

__all__ = [
    "diagnostic_mode_num_sources",
    "get_default_background_tasks",
    "get_default_build_callback",
    "get_default_hook_class",
    "get_default_profile_callback",
    "get_default_profile_hook",
    "get_default_queue_class",
    "is_compact_log_enabled",
    "is_diagnostic_mode_enabled",
    "set_compact_log",
    "set_default_background_tasks",
    "set_default_build_callback",
    "set_default_hook_class",
    "set_default_profile_callback",
    "set_default_profile_hook",
    "set_default_queue_class",
]

_lock = threading.Lock()
_hook_class: type | None = TaskStatsHook
_queue_class: type | None = None
_build_callback: Callable[[Any], None] | None = None
_background_tasks: list | None = None
_profile_hook: Any = None
_profile_callback: Callable[[Any], None] | None = None
_compact_log: bool | None = None  # None: not read from the environment yet

_TRUE = ("1", "true", "TRUE", "on", "ON", "yes", "YES")
_FALSE = ("0", "false", "FALSE", "off", "OFF", "no", "NO")
_ENV = ("FEEDLINE_PIPELINE_COMPACT_LOG", "SPDL_PIPELINE_COMPACT_LOG")
_DIAGNOSTIC_ENV = ("FEEDLINE_PIPELINE_DIAGNOSTIC_MODE", "SPDL_PIPELINE_DIAGNOSTIC_MODE")
_NUM_ITEMS_ENV = ("FEEDLINE_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS", "SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS")
_DEFAULT_NUM_ITEMS = 1000


def set_default_hook_class(cls: type | None = TaskStatsHook) -> None:
    """Sets the hook class of stages built without ``task_hook_factory``.

    ``cls(info, interval=report_stats_interval)`` is made per stage; ``None``
    disables default hooks. With :class:`TaskStatsHook` (the default) the
    engine's native statistics report, and no hook object is made.
    """
    if cls is not None and not callable(cls):
        raise TypeError(f"the default hook class must be a class or None, got {type(cls).__name__}")
    global _hook_class
    with _lock:
        _hook_class = cls


def get_default_hook_class() -> type | None:
    """The class set by :func:`set_default_hook_class` (TaskStatsHook)."""
    return _hook_class


def set_default_queue_class(cls: type | None = None) -> None:
    """Sets the default queue class. feedline's inter-stage queues are
    native and always measured: a :class:`StatsQueue` subclass set here is
    made per native queue as ``cls(info, buffer_size=n,
    interval=report_stats_interval)`` and fed that queue's counters; building
    while another class is set warns that it is ignored. ``None`` resets."""
    global _queue_class
    with _lock:
        _queue_class = cls


def get_default_queue_class() -> type | None:
    """The class set by :func:`set_default_queue_class`; None (the default):
    the native queues report through the engine's statistics alone."""
    return _queue_class


def set_default_build_callback(callback: Callable[[Any], None] | None) -> None:
    """Sets a function called with the PipelineConfig of every pipeline that
    ``build_pipeline`` (or ``PipelineBuilder.build``) builds, before it is
    built. Its exceptions are logged, never raised. ``None`` removes it."""
    if callback is not None and not callable(callback):
        raise TypeError(f"the build callback must be callable or None, got {type(callback).__name__}")
    global _build_callback
    with _lock:
        _build_callback = callback


def get_default_build_callback() -> Callable[[Any], None] | None:
    """The callback set by :func:`set_default_build_callback`, or None."""
    return _build_callback


def set_default_background_tasks(tasks: Sequence[Callable[[], Any]] | None) -> None:
    """Sets background task factories that every pipeline built afterwards
    runs (before its own ``background_tasks``). ``None`` removes them."""
    if tasks is not None and not all(callable(t) for t in tasks):
        raise TypeError("background tasks must be callables that return a BackgroundTask")
    global _background_tasks
    with _lock:
        _background_tasks = None if tasks is None else list(tasks)


def get_default_background_tasks() -> list | None:
    """The factories set by :func:`set_default_background_tasks`, or None."""
    return None if _background_tasks is None else list(_background_tasks)


def set_default_profile_hook(hook: Any) -> None:
    """Sets the :class:`~feedline.pipeline.ProfileHook` that
    :func:`~feedline.pipeline.profile_pipeline` uses when given none.
    ``None`` removes it."""
    from ._profile import ProfileHook

    if hook is not None and not isinstance(hook, ProfileHook):
        raise TypeError(f"the profile hook must be a ProfileHook or None, got {type(hook).__name__}")
    global _profile_hook
    with _lock:
        _profile_hook = hook


def get_default_profile_hook() -> Any:
    """The hook set by :func:`set_default_profile_hook`, or None."""
    return _profile_hook


def set_default_profile_callback(callback: Callable[[Any], None] | None) -> None:
    """Sets the function :func:`~feedline.pipeline.profile_pipeline` calls
    with each stage's ProfileResult when given none (also in the diagnostic
    mode). ``None`` removes it."""
    if callback is not None and not callable(callback):
        raise TypeError(f"the profile callback must be callable or None, got {type(callback).__name__}")
    global _profile_callback
    with _lock:
        _profile_callback = callback


def get_default_profile_callback() -> Callable[[Any], None] | None:
    """The callback set by :func:`set_default_profile_callback`, or None."""
    return _profile_callback


def _parse_bool(name: str, value: str) -> bool:
    if value in _TRUE:
        return True
    if value not in _FALSE:
        warnings.warn(f"{name}={value!r} is not a boolean (1/0, true/false, on/off, yes/no); using False", stacklevel=3)
    return False


def _compact_from_env() -> bool:
    for name in _ENV:
        value = os.environ.get(name)
        if value is not None:
            return _parse_bool(name, value)
    return False


def set_compact_log(enabled: bool | None) -> None:
    """Overrides ``FEEDLINE_PIPELINE_COMPACT_LOG`` (or SPDL's
    ``SPDL_PIPELINE_COMPACT_LOG``); ``None`` reads the environment again."""
    global _compact_log
    with _lock:
        _compact_log = None if enabled is None else bool(enabled)


def is_compact_log_enabled() -> bool:
    """Whether compact failure logs are asked for: the value given to
    :func:`set_compact_log`, else the environment variable (read once)."""
    global _compact_log
    with _lock:
        if _compact_log is None:
            _compact_log = _compact_from_env()
        return _compact_log


def is_diagnostic_mode_enabled() -> bool:
    """Whether the diagnostic mode is on: ``FEEDLINE_PIPELINE_DIAGNOSTIC_MODE``
    or SPDL's ``SPDL_PIPELINE_DIAGNOSTIC_MODE`` set to a true value (read at
    every call). In it, ``build_pipeline`` returns a pipeline whose first read
    profiles the config (see ``profile_pipeline``) and exits the program."""
    return any(_parse_bool(n, os.environ[n]) for n in _DIAGNOSTIC_ENV if n in os.environ)


def diagnostic_mode_num_sources() -> int:
    """How many source items the diagnostic mode profiles with:
    ``FEEDLINE_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS`` or SPDL's
    ``SPDL_PIPELINE_DIAGNOSTIC_MODE_NUM_ITEMS`` (at least 1; default 1000,
    also, with a warning, for a value that is not an int)."""
    for name in _NUM_ITEMS_ENV:
        if name in os.environ:
            try:
                return max(1, int(os.environ[name]))
            except ValueError:
                warnings.warn(
                    f"{name}={os.environ[name]!r} is not an int; profiling {_DEFAULT_NUM_ITEMS} inputs", stacklevel=2
                )
    return _DEFAULT_NUM_ITEMS
