"""Routes the engine's log messages to the ``feedline`` logger."""

import atexit
import logging

from . import _feedline_ext

_logger = logging.getLogger("feedline")


def _handle(level, message):
    _logger.log(level, message)


def install():
    """Sends engine messages (failure reports, stats) to Python logging."""
    _feedline_ext._set_log_handler(_handle)
    # Messages are filtered by the logger's level; let the engine send all
    # but debug ones.
    _feedline_ext._set_log_level(logging.INFO)
    # Native threads must not call into Python while it shuts down; and
    # references that native threads dropped are released while it still can.
    atexit.register(_feedline_ext._drain_released)
    atexit.register(_feedline_ext._set_log_handler, None)
