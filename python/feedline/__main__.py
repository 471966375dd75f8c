"""``python -m feedline``: ``info`` (versions, decoders, build) and ``demo``
(an image-loading epoch on a generated dataset). See feedline._cli."""

import sys

from ._cli import main

sys.exit(main(prog="python -m feedline"))
