"""feedline: a data-loading engine for machine learning.

feedline runs input pipelines (read, decode, transform, batch) on a C++
engine with a shared thread pool and bounded queues. The native core lives in
the private extension module ``feedline._feedline_ext``; this package is the
public API: ``feedline.pipeline`` builds pipelines on that engine with the
names and semantics of ``spdl.pipeline``.

Errors raised by the engine are subclasses of :class:`feedline.Error` (itself
a :class:`RuntimeError`). Invalid arguments raise :class:`ValueError` and
out-of-range indices :class:`IndexError`.
"""

from ._errors import PipelineFailure
from ._feedline_ext import (
    Cancelled,
    DecodeError,
    Error,
    FormatError,
    Internal,
    IoError,
    Timeout,
    TooManyFailures,
    UnsupportedFormat,
    __version__,
)

__all__ = [
    "Cancelled",
    "DecodeError",
    "Error",
    "FormatError",
    "Internal",
    "IoError",
    "PipelineFailure",
    "Timeout",
    "TooManyFailures",
    "UnsupportedFormat",
    "__version__",
]

# Show the public home of the exception classes in tracebacks and reprs
# (feedline.DecodeError, not feedline._feedline_ext.DecodeError).
for _cls in (
    Cancelled,
    DecodeError,
    Error,
    FormatError,
    Internal,
    IoError,
    Timeout,
    TooManyFailures,
    UnsupportedFormat,
):
    _cls.__module__ = __name__
del _cls

from . import _logging  # noqa: E402

_logging.install()
del _logging
