"""Small helpers shared by the pipeline modules: run-time subscripting of
SPDL's generic classes, and the source locator (where an op, a source or a
config was defined)."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import types
from typing import Any

__all__ = ["Subscriptable", "caller_location", "locate", "locate_source_object"]


class Subscriptable:
    """Makes a class subscriptable at run time, as SPDL's generic classes are:
    ``PipelineConfig[int]``, ``PipeConfig[int, str]``. Any parameters are
    accepted (SPDL changed the number of some between releases); the alias
    builds the class itself, so ``Pipeline[int]`` serves only annotations."""

    __slots__ = ()

    def __class_getitem__(cls, params: Any) -> types.GenericAlias:
        return types.GenericAlias(cls, params)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caller_location(skip: int = 0) -> str | None:
    """``file:line`` of the first frame outside the feedline package: the
    user's line that made a config (``Pipe(...)``, ``builder.pipe(...)``).
    ``skip`` frames above the caller are passed over first (a dataclass's
    generated ``__init__``, which is not in any file)."""
    frame: types.FrameType | None = sys._getframe(1 + skip)
    while frame is not None:
        file = frame.f_code.co_filename
        if not os.path.abspath(file).startswith(_PACKAGE_DIR + os.sep):
            return f"{file}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _where(obj) -> str:
    try:
        file = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return ""
    return f" at {file}:{line}" if file else ""


def locate(obj) -> str:
    """``module.name at file:line`` of a function, callable object or
    ``functools.partial`` (with its bound arguments); the name alone where
    the source is not known (builtins)."""
    if isinstance(obj, functools.partial):
        args = [repr(a) for a in obj.args] + [f"{k}={v!r}" for k, v in obj.keywords.items()]
        inner = locate(obj.func)
        return f"partial({inner}{', ' if args else ''}{', '.join(_short(a) for a in args)})"
    target = obj
    if not (inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj) or isinstance(obj, type)):
        target = type(obj)  # a callable object: where its class is defined
    name = getattr(target, "__qualname__", None) or type(target).__name__
    module = getattr(target, "__module__", None)
    prefix = f"{module}.{name}" if module and module != "builtins" else name
    return prefix + _where(inspect.unwrap(target) if inspect.isfunction(target) else target)


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def locate_source_object(src) -> str:
    """How a source appears in reprs: never its data. A generator shows the
    function that made it, an object of a class defined in Python source its
    class and where that is; anything else its type and id."""
    code = getattr(src, "gi_code", None) or getattr(src, "ag_code", None)
    if code is not None:
        kind = "generator" if hasattr(src, "gi_code") else "async_generator"
        return f"<{kind} {code.co_qualname if hasattr(code, 'co_qualname') else code.co_name} at {code.co_filename}:{code.co_firstlineno}>"
    cls = type(src)
    where = "" if cls.__module__ == "builtins" else _where(cls)
    if where:
        return f"<{cls.__qualname__}{where}>"
    return f"<{cls.__name__} object at {id(src):#x}>"
