"""Loading data into arrays: images (JPEG and PNG on a fast path, anything
else through FFmpeg), video and audio through FFmpeg (demux, decode, filter,
convert, with SPDL's names), NumPy files (NPY, NPZ), WAV audio, TAR and ZIP
archives.

Every decode runs in C++ with the GIL released and returns a
:class:`Buffer`, which NumPy (``numpy.asarray``, :func:`to_numpy`) and
PyTorch (``torch.from_dlpack``, :func:`to_torch`) use without a copy. The
same decoders are pipeline ops in :mod:`feedline.io.ops`, so a pipeline from
paths to batches runs without the GIL.

Bad input raises :class:`feedline.DecodeError` (a missing file
:class:`feedline.IoError`) with the source's name in the message.
"""

from __future__ import annotations

import logging
import os

from .._feedline_ext import DecodeError, UnsupportedFormat
from .._feedline_ext import io as _io
from . import _av, _encode, ops, utils  # noqa: F401 (submodules as attributes)
from ._arrays import NpzFile, WAVHeader, ZipArchive, iter_tarfile, load_npy, load_npz, load_wav, open_zip, parse_wav
from ._audio import load_audio
from ._av import *  # noqa: F401,F403 -- SPDL's FFmpeg API
from ._encode import *  # noqa: F401,F403 -- SPDL's encoding API
from ._options import image_options

Buffer = _io.Buffer
Buffer.__module__ = __name__

_LG = logging.getLogger(__name__)

__all__ = (
    _av.__all__
    + _encode.__all__
    + [
        "Buffer",
        "buffer_cache_size",
        "set_buffer_cache_limit",
        "NpzFile",
        "WAVHeader",
        "ZipArchive",
        "decode_image",
        "iter_tarfile",
        "load_audio",
        "load_npy",
        "load_npz",
        "load_wav",
        "open_zip",
        "parse_wav",
        "prepare_jpeg",
        "load_image",
        "load_image_batch",
        "random_resized_crop_box",
        "transform_image",
        "to_numpy",
        "to_torch",
    ]
)


def decode_image(data, /, *, name: str | None = None, index: int | None = None, **options) -> Buffer:
    """Decodes a JPEG or PNG held in ``data`` (bytes-like).

    Options (all keyword): ``width``, ``height``, ``scale_mode``,
    ``resize_shorter``, ``crop``, ``pix_fmt``, ``layout``, ``dtype``,
    ``mean``, ``std``, and the augmentation ``random_resized_crop``,
    ``crop_scale``, ``crop_ratio``, ``hflip``, ``seed``, ``epoch`` (see
    :func:`feedline.io._options.image_options`). Without a resize the result
    has the image's own size; the shape is ``(H, W, C)`` (or ``(C, H, W)``)
    with C = 3, or 1 for ``pix_fmt="gray"``. ``name`` names the data in
    errors; ``index`` (the sample's index) keys a seeded augmentation, which
    otherwise uses a hash of ``name``.
    """
    opts = image_options(**options)
    if opts.seed is not None and name is None and index is None:
        raise ValueError("a seeded augmentation needs the sample's index= (or a unique name=)")
    return _io.decode_image(data, opts, name or f"<{len(data)} bytes>", _index(index))


def prepare_jpeg(data, /, *, name: str | None = None, max_pixels: int = 2**27) -> bytes:
    """Rewrites a JPEG (bytes-like) so that crops of it decode faster,
    without changing a pixel, and returns the new file's bytes.

    Baseline JPEG data has no random access: to decode a crop, every row
    above it must be entropy-decoded, and Huffman decoding is about half of
    a photograph's decode. The rewritten file holds the same DCT
    coefficients in one baseline scan with a restart marker every few MCUs
    (at least 8 to a row where the row allows), and a CRC-32 of the scan.
    :func:`decode_image`, :func:`load_image` and :func:`load_image_batch`
    then decode a random resized crop or a centre crop of it from only the
    MCU rows and restart intervals the crop covers. Every decode of the
    file checks the CRC, so damage anywhere in its scan is a
    :class:`DecodeError`, outside the crop too (and even where libjpeg-turbo
    alone would decode the damaged data without a complaint). EXIF, ICC and
    comment segments are kept; the file grows by 1-3%.
    Progressive files become baseline ones (the same pixels).

    A one-time step over a dataset, like writing its shards::

        for path in paths:
            with open(path, "rb") as f:
                data = f.read()
            with open(out_dir / path.name, "wb") as f:
                f.write(feedline.io.prepare_jpeg(data, name=str(path)))

    or, for a folder tree and the JPEG members of tar and ZIP shards,
    ``python -m feedline prepare-jpegs SRC DST`` (every other member of a
    shard kept as it is).

    Raises :class:`UnsupportedFormat` for data that is not a JPEG (or one of
    more than 4 components) and :class:`DecodeError` naming ``name`` for a
    JPEG that cannot be read or whose header claims more than
    ``max_pixels`` pixels (the rewrite holds every DCT coefficient, about 3
    bytes a pixel; the default is :func:`decode_image`'s).
    """
    return _io.prepare_jpeg(data, name or f"<{len(data)} bytes>", int(max_pixels))


def transform_image(pixels, /, *, name: str | None = None, index: int | None = None, **options) -> Buffer:
    """Applies the image options of :func:`decode_image` (resize, crop,
    random resized crop, flip, pixel format, layout, dtype, normalisation)
    to pixels decoded elsewhere: a uint8 array (or :class:`Buffer`) of shape
    ``(H, W, 3)`` (RGB), ``(H, W, 1)`` or ``(H, W)`` (grey), in C++ with the
    GIL released. :func:`load_image` uses it for the formats FFmpeg decodes
    (WebP, TIFF, BMP, ...), which are decoded whole and then cropped."""
    data: object
    if isinstance(pixels, Buffer):
        data, shape = pixels, tuple(pixels.shape)
    else:
        import numpy as np

        array = np.asarray(pixels)
        if array.dtype != np.uint8:
            raise ValueError(f"transform_image takes uint8 pixels, got {array.dtype}")
        data = np.ascontiguousarray(array)
        shape = data.shape
    return _io.transform_image(data, list(shape), image_options(**options), name or "<pixels>", _index(index))


def _index(index):
    if index is None:
        return None
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"index must be an int, got {index!r}")
    return index & 0xFFFFFFFFFFFFFFFF


def random_resized_crop_box(
    width: int,
    height: int,
    /,
    *,
    scale=(0.08, 1.0),
    ratio=(3.0 / 4.0, 4.0 / 3.0),
    seed: int | None = None,
    epoch: int = 0,
    index: int = 0,
    draws=None,
) -> tuple[int, int, int, int]:
    """The box ``(top, left, height, width)`` that ``random_resized_crop``
    takes from an image of ``width`` x ``height`` with this ``seed``,
    ``epoch`` and ``index`` (no seed: fresh draws). With ``draws``, a
    sequence of numbers in [0, 1), the box is torchvision's
    ``RandomResizedCrop.get_params`` computed from those draws (two per
    attempt, two more for the position of the one that fits)."""
    top, left, h, w = _io.random_resized_crop_box(
        int(width),
        int(height),
        [float(x) for x in scale],
        [float(x) for x in ratio],
        None if draws is None else [float(x) for x in draws],
        None if seed is None else int(seed) & 0xFFFFFFFFFFFFFFFF,
        int(epoch),
        _index(index),
    )
    return top, left, h, w


def load_image(
    src,
    /,
    *,
    demux_config=None,
    decode_config=None,
    filter_desc=_av.FILTER_DESC_DEFAULT,
    index: int | None = None,
    name: str | None = None,
    device_config=None,
    **options,
) -> Buffer:
    """Reads and decodes the image at path ``src``, or held in ``src`` (a
    bytes-like object or a 1-D uint8 array), options as
    :func:`decode_image`. ``name`` names the source in errors;
    ``device_config`` (SPDL's GPU transfer) is ignored with a warning.

    JPEG and PNG take the fast path (libjpeg-turbo, libpng). Any other
    format FFmpeg reads (BMP, TIFF, WebP, GIF, ...), or a call with
    ``demux_config``, ``decode_config`` or ``filter_desc``, goes through
    FFmpeg (:func:`load_image_ffmpeg`); there ``width``/``height``/
    ``scale_mode`` and ``pix_fmt`` alone become the filter chain and the
    result is ``(H, W, C)`` uint8, while any other option (a crop, the
    augmentation, ``dtype``, ``layout``, ...) decodes the whole image and
    applies the options with :func:`transform_image`; ``max_pixels`` is
    the decoder's pixel limit. A file
    that is neither JPEG/PNG nor media FFmpeg reads safely raises
    :class:`feedline.UnsupportedFormat` or :class:`feedline.DecodeError`
    naming it.
    """
    if device_config is not None:
        _av._ignored("load_image", {"device_config": device_config})
    ffmpeg = demux_config is not None or decode_config is not None or filter_desc is not _av.FILTER_DESC_DEFAULT
    is_path = isinstance(src, (str, os.PathLike))
    if not ffmpeg:
        try:
            if is_path:
                path = os.fspath(src)
                return _io.decode_image(_io.read_file(path), image_options(**options), name or path, _index(index))
            data = _av._src(src)
            return _io.decode_image(data, image_options(**options), name or f"<{len(data)} bytes>", _index(index))
        except UnsupportedFormat:
            pass  # not JPEG or PNG: FFmpeg's turn
    max_pixels = options.pop("max_pixels", None)
    if max_pixels is not None:
        decode_config = _with_max_pixels(decode_config, max_pixels)
    if filter_desc is _av.FILTER_DESC_DEFAULT:
        extra = set(options) - {"width", "height", "scale_mode", "pix_fmt"}
        if extra:
            # Decoded whole by FFmpeg, then the same native transform as the
            # JPEG/PNG path (resize, crops, augmentation, dtype, layout).
            pixels = _av.load_image_ffmpeg(src, demux_config=demux_config, decode_config=decode_config, name=name)
            if name is None and is_path:
                name = os.fspath(src)
            return transform_image(pixels, name=name, index=index, **options)
        pix_fmt = {"rgb": "rgb24", "bgr": "bgr24", "gray": "gray"}.get(
            options.get("pix_fmt", "rgb24"), options.get("pix_fmt", "rgb24")
        )
        if "width" in options or "height" in options:
            filter_desc = _av.get_video_filter_desc(
                scale_width=options.get("width"),
                scale_height=options.get("height"),
                scale_mode=options.get("scale_mode", "pad"),
                pix_fmt=pix_fmt,
            )
        else:
            return _av.load_image_ffmpeg(
                src, demux_config=demux_config, decode_config=decode_config, pix_fmt=pix_fmt, name=name
            )
    return _av.load_image_ffmpeg(
        src, demux_config=demux_config, decode_config=decode_config, filter_desc=filter_desc, name=name
    )


def _with_max_pixels(decode_config, max_pixels):
    """decode_config with FFmpeg's max_pixels decoder option (the pixel limit
    of the FFmpeg image path) unless it already has one."""
    if int(max_pixels) <= 0:
        raise ValueError(f"max_pixels must be > 0, got {max_pixels}")
    base = decode_config if decode_config is not None else _io.DecodeConfig()
    options = dict(base.decoder_options)
    options.setdefault("max_pixels", str(int(max_pixels)))
    threads = None if base.threads == _io.DecodeConfig.AUTO_THREADS else base.threads
    return _av.decode_config(decoder=base.decoder or None, decoder_options=options, threads=threads)


def load_image_batch(
    srcs,
    /,
    *,
    width: int | None,
    height: int | None,
    pix_fmt: str = "rgb24",
    strict: bool = True,
    scale_mode: str = "pad",
    indices=None,
    **options,
) -> Buffer:
    """Decodes several images (paths or bytes-likes) into one batch Buffer of
    shape ``(N, height, width, C)``, each image written straight into its
    slot.

    As in SPDL, ``width`` and ``height`` are required keywords (``None``
    keeps the images' own size, which must then agree), the default
    ``scale_mode`` is ``"pad"``, and a failed image is logged; with
    ``strict`` any failure raises :class:`feedline.DecodeError`, otherwise the
    batch holds the images that decoded (an error is raised only if none
    did).

    With ``random_resized_crop`` (see :func:`decode_image`), ``width`` and
    ``height`` are ``None``. ``indices`` (one int per source) key a seeded
    augmentation; without them each path keys its own image (bytes then
    need ``indices``).
    """
    srcs = list(srcs)
    if not srcs:
        raise ValueError("load_image_batch needs at least one source")
    opts = image_options(width=width, height=height, scale_mode=scale_mode, pix_fmt=pix_fmt, **options)
    keys = []
    if indices is not None:
        keys = [_index(i) for i in indices]
        if len(keys) != len(srcs):
            raise ValueError(f"indices has {len(keys)} entries for {len(srcs)} sources")
    elif opts.seed is not None and not all(isinstance(s, (str, os.PathLike)) for s in srcs):
        raise ValueError("a seeded augmentation of bytes needs indices= (one sample index per source)")
    batch, failures = _io.load_image_batch(srcs, opts, keys)
    for failure in failures:
        _LG.error("load_image_batch: image %d failed: %s", failure.index, failure.message)
    if failures and (strict or len(failures) == len(srcs)):
        kind = "all the images" if len(failures) == len(srcs) else "some images"
        detail = "; ".join(failure.message for failure in failures[:3])
        raise DecodeError(f"Failed to load {kind} ({len(failures)} of {len(srcs)}): {detail}")
    return batch


def set_buffer_cache_limit(nbytes: int) -> None:
    """Caps the cache of freed large buffers (2 MiB and more), which later
    buffers of similar size reuse instead of asking the kernel for fresh,
    zeroed pages. Default: 2 GiB, or 1/16 of physical memory if less; 0
    disables the cache and frees what it holds."""
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    _io.set_buffer_cache_limit(int(nbytes))


def buffer_cache_size() -> int:
    """Bytes the cache of freed large buffers holds now."""
    return int(_io.buffer_cache_size())


def to_numpy(buffer):
    """A NumPy view of ``buffer`` (no copy; the array keeps it alive)."""
    import numpy as np

    if not hasattr(buffer, "__array_interface__"):
        raise TypeError(f"to_numpy needs a Buffer, got {type(buffer).__name__}")
    return np.asarray(buffer)


def to_torch(buffer):
    """A PyTorch tensor viewing ``buffer`` through DLPack (no copy; a
    read-only Buffer, such as a view of bytes, goes as a copy)."""
    import torch

    return torch.from_dlpack(buffer)
