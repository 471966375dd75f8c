"""Keyword arguments of the image functions and ops, as native ImageOptions."""

from __future__ import annotations

import operator

from .._feedline_ext import io as _io

_PIX_FMTS = {
    "rgb24": _io.PixelFormat.RGB,
    "rgb": _io.PixelFormat.RGB,
    "bgr24": _io.PixelFormat.BGR,
    "bgr": _io.PixelFormat.BGR,
    "gray": _io.PixelFormat.GRAY,
    "gray8": _io.PixelFormat.GRAY,
}
_LAYOUTS = {"HWC": _io.Layout.HWC, "CHW": _io.Layout.CHW}
_MODES = {"stretch": _io.ResizeMode.STRETCH, "pad": _io.ResizeMode.PAD, "crop": _io.ResizeMode.CROP}


def _choice(table, value, what):
    try:
        return table[value]
    except KeyError:
        raise ValueError(f"{what} must be one of {sorted(table)}, got {value!r}") from None


def _int(value, what):
    """``value`` as an int; a bool or a float is refused, not truncated."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an int, got {value!r}") from None


def _pair(value, what):
    if value is None:
        return 0, 0
    if not hasattr(value, "__iter__"):  # one int for both
        return _int(value, what), _int(value, what)
    w, h = value
    return _int(w, what), _int(h, what)


def image_options(
    *,
    width=None,
    height=None,
    scale_mode="stretch",
    resize_shorter=None,
    crop=None,
    pix_fmt="rgb24",
    layout="HWC",
    dtype="uint8",
    mean=None,
    std=None,
    dct_scaling=True,
    partial_decode=True,
    max_pixels=None,
    random_resized_crop=None,
    crop_scale=(0.08, 1.0),
    crop_ratio=(3.0 / 4.0, 4.0 / 3.0),
    hflip=0.0,
    seed=None,
    epoch=0,
):
    """Validates the image keyword arguments and returns native ImageOptions.

    - ``width``, ``height``: resize to this size, by ``scale_mode``:
      ``"stretch"`` (exactly), ``"pad"`` (fit inside, centred on black) or
      ``"crop"`` (cover, centre-cropped). Give both or neither.
    - ``resize_shorter``: resize so that the shorter side has this length
      (torchvision's ``Resize(int)``); not with ``width``/``height``.
    - ``crop``: centre crop ``(width, height)`` (or one int) after resizing
      (torchvision's ``CenterCrop``).
    - ``pix_fmt``: ``"rgb24"``, ``"bgr24"`` or ``"gray"``.
    - ``layout``: ``"HWC"`` or ``"CHW"``.
    - ``dtype``: ``"uint8"``, or ``"float32"`` for ``(x / 255 - mean) / std``
      per channel (``mean`` and ``std``: 3 numbers; default 0 and 1).
    - ``dct_scaling``: let libjpeg-turbo decode at a reduced size when that
      still covers the target.
    - ``partial_decode``: decode only the JPEG rows and columns the output
      reads (``False``: the whole image, the same pixels with more work; a
      reference for benchmarks).
    - ``max_pixels``: refuse larger images (default 2**27).

    Training augmentation, done while decoding (the JPEG is decoded only
    where the crop lies, at the smallest DCT scale that covers the output):

    - ``random_resized_crop``: output ``(width, height)`` (or one int) of
      torchvision's ``RandomResizedCrop``: a box of a random share
      ``crop_scale`` of the image's area and aspect ratio ``crop_ratio``
      (log-uniform), resized to that size; not with a resize or ``crop``.
    - ``hflip``: probability of a horizontal flip (``RandomHorizontalFlip``).
    - ``seed``, ``epoch``: with a seed, each image's draws are a function of
      ``(seed, epoch, index)`` (the index given with the image, else a hash
      of its name), so that the same seed gives the same crops on any number
      of threads and in any order; without one, each decode draws afresh.
    """
    o = _io.ImageOptions()
    if (width is None) != (height is None):
        raise ValueError("give both width and height, or neither")
    if width is not None:
        if resize_shorter is not None:
            raise ValueError("give width/height or resize_shorter, not both")
        o.resize_width, o.resize_height = _int(width, "width"), _int(height, "height")
        if o.resize_width < 1 or o.resize_height < 1:
            raise ValueError(f"width and height must be >= 1, got {width} x {height}")
        o.resize_mode = _choice(_MODES, scale_mode, "scale_mode")
    if resize_shorter is not None:
        if _int(resize_shorter, "resize_shorter") < 1:
            raise ValueError(f"resize_shorter must be >= 1, got {resize_shorter}")
        o.resize_shorter = _int(resize_shorter, "resize_shorter")
    o.crop_width, o.crop_height = _pair(crop, "crop")
    o.pixel_format = _choice(_PIX_FMTS, pix_fmt, "pix_fmt")
    o.layout = _choice(_LAYOUTS, layout, "layout")
    if dtype not in ("uint8", "float32"):
        raise ValueError(f'dtype must be "uint8" or "float32", got {dtype!r}')
    o.float32 = dtype == "float32"
    if (mean is not None or std is not None) and dtype != "float32":
        raise ValueError('mean and std apply to dtype="float32" only')
    if mean is not None:
        o.mean = [float(x) for x in _three(mean, "mean")]
    if std is not None:
        o.std = [float(x) for x in _three(std, "std")]
    o.dct_scaling = bool(dct_scaling)
    o.partial_decode = bool(partial_decode)
    if random_resized_crop is not None:
        o.random_resized_crop = _pair(random_resized_crop, "random_resized_crop")
        if min(o.random_resized_crop) < 1:
            raise ValueError(f"random_resized_crop must be >= 1, got {random_resized_crop}")
    o.crop_scale = _two(crop_scale, "crop_scale")
    o.crop_ratio = _two(crop_ratio, "crop_ratio")
    o.flip_probability = float(hflip)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        o.seed = seed & 0xFFFFFFFFFFFFFFFF
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an int >= 0, got {epoch!r}")
    o.epoch = epoch
    if max_pixels is not None:
        o.max_pixels = int(max_pixels)
    o.check()
    return o


def _two(values, what):
    values = [float(x) for x in values]
    if len(values) != 2:
        raise ValueError(f"{what} needs (min, max), got {len(values)} values")
    return values


def _three(values, what):
    values = list(values)
    if len(values) == 1:
        values *= 3
    if len(values) != 3:
        raise ValueError(f"{what} needs 1 or 3 values, got {len(values)}")
    return values
