"""feedline.PipelineFailure: the exception a failed pipeline raises."""

import sys

from ._feedline_ext import Error, TooManyFailures

__all__ = ["PipelineFailure"]


def _as_exception(exc):
    # An ExceptionGroup holds Exceptions only; a BaseException raised by an op
    # (SystemExit, say) is carried as the cause of a RuntimeError.
    if isinstance(exc, Exception):
        return exc
    wrapper = RuntimeError(f"{type(exc).__name__}: {exc}")
    wrapper.__cause__ = exc
    return wrapper


if sys.version_info >= (3, 11):

    class PipelineFailure(ExceptionGroup, Error):  # noqa: F821 (builtin since 3.11)
        """One or more pipeline stages failed.

        An :class:`ExceptionGroup` (and a :class:`feedline.Error`) holding the
        exception of every failed stage, in stage order. Each carries a note
        ``"Pipeline stage: <index>:<name>"``; the exception of a Python op is
        the very object the op raised, with its traceback. A stage that failed
        by exceeding ``max_failures`` contributes a
        :class:`feedline.TooManyFailures` whose ``__cause__`` is the error
        that exceeded the budget (for a stage whose every call failed, the
        last one). Use ``except*`` to handle one kind.

        The consumer receives it after every item that made it through the
        pipeline, from ``get_item()`` or the iterator, and then again on every
        later read.
        """

        def __new__(cls, message, exceptions):
            return super().__new__(cls, message, [_as_exception(e) for e in exceptions])

        def __init__(self, message, exceptions):
            super().__init__(message, [_as_exception(e) for e in exceptions])

        def derive(self, excs):
            return PipelineFailure(self.message, excs)

else:

    class PipelineFailure(Error):
        """One or more pipeline stages failed (Python 3.10 form).

        ``exceptions`` holds the exception of every failed stage, in stage
        order; ``message`` the summary.
        """

        def __init__(self, message, exceptions):
            super().__init__(message)
            self.message = message
            self.exceptions = tuple(_as_exception(e) for e in exceptions)

        def __reduce__(self):
            return (type(self), (self.message, self.exceptions))


PipelineFailure.__module__ = "feedline"


# Called by the extension to convert the engine's failures.


def _add_note(exc, note):
    """``exc.add_note(note)``; on Python 3.10, which has no add_note, the
    same ``__notes__`` list (PEP 678), which tracebacks show from 3.11."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        try:
            exc.__notes__ = [*getattr(exc, "__notes__", ()), note]
        except AttributeError:  # an exception type without a __dict__
            pass


def _describe(exc):
    """``"Type: message (at file.py:12 in fn)"`` for an exception a Python op
    raised, the place being the innermost frame of its traceback."""
    what = type(exc).__name__
    try:
        text = str(exc)
    except Exception:
        text = ""
    if text:
        what += f": {text}"
    tb = exc.__traceback__
    if tb is not None:
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code
        what += f" (at {code.co_filename}:{tb.tb_lineno} in {code.co_name})"
    return what


def _pipeline_failure(message, stages):
    """The PipelineFailure of a pipeline whose stages failed: ``stages`` holds
    the (stage name, exception) of each, in stage order. Each exception gets
    the note ``"Pipeline stage: <name>"``."""
    for stage, exc in stages:
        _add_note(exc, f"Pipeline stage: {stage}")
    return PipelineFailure(message, [exc for _, exc in stages])


def _too_many_failures(message, cause):
    """A TooManyFailures whose ``__cause__`` is ``cause``, the error that
    exceeded the budget (None: unknown)."""
    exc = TooManyFailures(message)
    if cause is not None:
        exc.__cause__ = cause
    return exc
