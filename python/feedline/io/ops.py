"""Native pipeline ops for loading images.

Each function returns a :class:`feedline.pipeline.NativeOp`; between them
items stay native (encoded bytes, decoded Buffers) and the GIL is never
taken::

    from feedline.io import ops
    pipeline = (
        PipelineBuilder()
        .add_source(paths)
        .pipe(ops.read_file(), concurrency=4)
        .pipe(ops.decode_image(resize_shorter=256, crop=224, layout="CHW",
                               dtype="float32", mean=MEAN, std=STD), concurrency=2)
        .aggregate(32)
        .pipe(ops.stack())           # one Buffer (32, 3, 224, 224)
        .add_sink(3)
        .build(num_threads=4)
    )

A file that cannot be read or decoded is a failed call of its stage, counted
and logged with its path, within the pipeline's ``max_failures``.

``aggregate(n)`` then :func:`decode_batch` decodes each batch straight into
its Buffer instead (no per-image buffer and no copy; failed images are left
out of their batch and logged).

Samples: every op also takes a *sample*, a tuple or dict of which it works
on one field (``field=``: a tuple's index, default 0, or a dict's key) and
gives the sample back in its shape with that field replaced; the other
fields ride along untouched, without the GIL::

    source = [("a.jpg", 3), ("b.jpg", 5), ...]          # (path, label)
    ... .pipe(ops.read_file()).pipe(ops.decode_image(...))  # -> (Buffer, 3)
    ... .aggregate(32).pipe(ops.decode_batch(...))        # -> (Buffer, [3, 5, ...])

A batch op gives the batch in the sample's shape with every other field a
column: the list of the rows' values, in row order (``{"image": Buffer,
"label": [...]}`` for dicts). A row it leaves out (an image that does not
decode) leaves out its fields too, so rows and labels stay aligned.
"""

from __future__ import annotations

import copyreg
import functools

from .._feedline_ext import NativeOp
from .._feedline_ext import io as _io
from . import _av, _encode
from ._options import image_options

#: Where an op finds its payload in a sample: a tuple's index or a dict's key.
Field = int | str


def _on(op, field: Field | None):
    """`op`, taking samples whose payload is `field` (None: payloads only).
    The op's ``field`` attribute says which (what DataLoader reads to carry
    its positions through native ops)."""
    if field is not None:
        if isinstance(field, bool) or not isinstance(field, (int, str)):
            raise TypeError(f"field must be an int (a tuple index) or a str (a dict key), got {field!r}")
        op = _io.on_field(op, field)
    op.field = field
    return op


__all__ = [
    "load_audio",
    "decode_batch",
    "decode_image",
    "load_npy",
    "load_wav",
    "read_file",
    "read_tar_members",
    "read_zip_members",
    "stack",
    "tar_members",
    "zip_members",
]


def read_file(*, field: Field | None = 0):
    """Path (str or os.PathLike) -> the file's bytes, named by the path."""
    return _on(_io.read_file_op(), field)


def decode_image(*, field: Field | None = 0, **options):
    """Encoded image (from :func:`read_file`, or bytes) -> Buffer; options as
    :func:`feedline.io.decode_image`. A seeded augmentation
    (``random_resized_crop``/``hflip`` with ``seed``) keys each image by its
    name, the path or archive member, so the same file gets the same crop
    for a given ``seed`` and ``epoch`` on any number of threads and in any
    order. Python bytes have no name: they are keyed by a hash of their
    contents (identical bytes draw alike; give a sample index with
    :func:`feedline.io.decode_image` and ``index=`` to tell copies apart)."""
    return _on(_io.decode_image_op(image_options(**options)), field)


def decode_batch(*, field: Field | None = 0, **options):
    """A batch (list) of encoded images -> one Buffer ``(N, ...)``, each
    image decoded straight into its slot: no per-image buffer, no copy. Put
    it after ``aggregate(n)``; options as :func:`decode_image`, and they must
    give one output size (``width``/``height``, ``crop`` or
    ``random_resized_crop``). An image that
    fails is left out of its batch (the batch is then smaller) and is a
    failure of the stage: logged, counted in its statistics and held against
    its ``max_failures``. The call fails only if no image of the batch
    decodes (which counts each image once)."""
    return _on(_io.decode_batch_op(image_options(**options)), field)


def stack():
    """A batch (list) of same-shaped Buffers -> one Buffer with a leading
    batch dimension. Put it after ``aggregate(n)``."""
    return _on(_io.stack_op(), None)


def load_npy(*, field: Field | None = 0):
    """Encoded NPY bytes (from :func:`read_file`, :func:`tar_members` or
    bytes) -> Buffer viewing them."""
    return _on(_io.load_npy_op(), field)


def load_wav(*, field: Field | None = 0):
    """Encoded WAV bytes -> Buffer (frames, channels)."""
    return _on(_io.load_wav_op(), field)


def tar_members(*, field: Field | None = 0):
    """A tar archive (from :func:`read_file`, or bytes) -> each regular
    file's bytes, named ``<archive>:<member>`` in errors and in the keys of
    seeded augmentation, viewing the archive (a generator
    op: 0..n items per archive). Follow it with a decoder op, e.g.
    ``read_file() -> tar_members() -> decode_image()`` for a WebDataset-style
    image shard."""
    return _on(_io.tar_members_op(), field)


def zip_members(*, field: Field | None = 0):
    """A ZIP archive (an ``.npz``, say; from :func:`read_file`, or bytes) ->
    each member's bytes, named as by :func:`tar_members`: views of the archive for
    stored members, inflated copies for deflated ones (a generator op).
    ``read_file() -> zip_members() -> load_npy()`` reads every array of a set
    of NPZ files without the GIL."""
    return _on(_io.zip_members_op(), field)


def read_tar_members(*, field: Field | None = 0):
    """Path of a tar archive (str or os.PathLike) -> each regular file's
    bytes, as :func:`tar_members`, read from the file a member at a time:
    its headers when the op starts on it, each member as it is given. So
    ``read_tar_members() -> decode_image()`` takes shards of any size in the
    memory of the members in flight, where ``read_file() -> tar_members()``
    holds each shard whole. A path that cannot be opened, or a shard that
    shrinks meanwhile, fails with :class:`feedline.IoError` naming it."""
    return _on(_io.read_tar_members_op(), field)


def read_zip_members(*, field: Field | None = 0):
    """Path of a ZIP archive -> its members, as :func:`zip_members`, read
    from the file a member at a time (the directory first); see
    :func:`read_tar_members`."""
    return _on(_io.read_zip_members_op(), field)


def load_audio(*, sample_rate: int | None = None, num_channels: int | None = None, field: Field | None = 0):
    """Encoded audio (any format FFmpeg reads; from :func:`read_file`,
    :func:`tar_members` or bytes) -> float32 Buffer (channels, samples)."""
    return _on(_io.load_audio_op(sample_rate or 0, num_channels or 0), field)


def load_video(
    *,
    timestamp=None,
    demux_config=None,
    decode_config=None,
    filter_desc=None,
    pix_fmt: str = "rgb24",
    num_frames: int | None = None,
    field: Field | None = 0,
):
    """Native op: encoded video bytes (from :func:`read_file`) -> a uint8
    Buffer ``(N, H, W, 3)`` of the whole clip, or of the window
    ``timestamp=(start, end)``; the fast path of
    :func:`feedline.io.load_video` (``filter_desc``: an FFmpeg chain
    instead)."""
    options = _io.VideoOptions(
        _av._window(timestamp),
        _av._demux_cfg(demux_config),
        _av._decode_cfg(decode_config),
        filter_desc,
        pix_fmt,
        _av._limit(num_frames),
    )
    return _on(_io.load_video_op(options), field)


def load_video_clips(
    *,
    demux_config=None,
    decode_config=None,
    filter_desc=None,
    pix_fmt: str = "rgb24",
    num_frames: int | None = None,
    field: Field | None = None,
):
    """Native op: a clip request ``(src, start, end)`` or ``(src, None)`` --
    ``src`` a path (read into memory) or bytes -- -> the uint8 Buffer
    ``(N, H, W, 3)`` of that window. Lets a pipeline sample a different
    window per item without the GIL."""
    options = _io.VideoOptions(
        None, _av._demux_cfg(demux_config), _av._decode_cfg(decode_config), filter_desc, pix_fmt, _av._limit(num_frames)
    )
    return _on(_io.load_video_clips_op(options), field)


def demux_video(*, timestamp=None, demux_config=None, field: Field | None = 0):
    """Native op: encoded bytes -> :class:`feedline.io.VideoPackets` (of the
    window ``timestamp=(start, end)`` when given)."""
    return _on(_io.demux_op(_io.Media.VIDEO, _av._window(timestamp), _av._demux_cfg(demux_config)), field)


def demux_audio(*, timestamp=None, demux_config=None, field: Field | None = 0):
    """Native op: encoded bytes -> :class:`feedline.io.AudioPackets`."""
    return _on(_io.demux_op(_io.Media.AUDIO, _av._window(timestamp), _av._demux_cfg(demux_config)), field)


def demux_image(*, demux_config=None, field: Field | None = 0):
    """Native op: encoded bytes -> :class:`feedline.io.ImagePackets`."""
    return _on(_io.demux_op(_io.Media.IMAGE, None, _av._demux_cfg(demux_config)), field)


def decode_packets(
    *,
    filter_desc=_av.FILTER_DESC_DEFAULT,
    decode_config=None,
    num_frames: int | None = None,
    field: Field | None = 0,
):
    """Native op: Packets -> Frames, as :func:`feedline.io.decode_packets`
    (by default the standard chain for the packets' media; None keeps the
    decoder's format)."""
    default = filter_desc is _av.FILTER_DESC_DEFAULT
    op = _io.decode_packets_op(
        None if default else filter_desc, default, _av._decode_cfg(decode_config), _av._limit(num_frames)
    )
    return _on(op, field)


def convert_frames(*, field: Field | None = 0):
    """Native op: Frames -> Buffer, as :func:`feedline.io.convert_frames`."""
    return _on(_io.convert_frames_op(), field)


def encode_image(
    *,
    format: str = "png",
    pix_fmt: str = "rgb24",
    quality: int | None = None,
    lossless: bool = False,
    compression_level: int = -1,
    field: Field | None = 0,
):
    """Native op: one image Buffer (``(H, W, 3)`` uint8 for ``rgb24``) ->
    the bytes of a PNG, JPEG, WebP, TIFF or BMP file, as
    :func:`feedline.io.encode_image`."""
    q = _encode._quality(quality)
    return _on(_io.encode_image_op(format, pix_fmt, q, bool(lossless), int(compression_level)), field)


def encode_video(
    *,
    format: str = "mp4",
    encoder: str | None = None,
    encoder_config: dict | None = None,
    muxer_config: dict | None = None,
    pix_fmt: str | None = None,
    frame_rate=None,
    width: int = 0,
    height: int = 0,
    bit_rate: int = -1,
    qscale: int = -1,
    gop_size: int = -1,
    max_b_frames: int = -1,
    colorspace: str | None = None,
    color_primaries: str | None = None,
    color_trc: str | None = None,
    color_range: str | None = None,
    sample_aspect_ratio=None,
    field: Field | None = 0,
):
    """Native op: Frames (a decoded clip) -> the bytes of a complete file
    (``format``: the muxer), encoded by ``encoder`` (None: the format's
    default) with ``encoder_config``. Size defaults to the frames';
    ``pix_fmt`` to the encoder's first; without a ``frame_rate``, the
    frames keep their times (variable frame rates too; see docs/ffmpeg.md).
    The colour tags and the pixel shape (as
    :func:`feedline.io.video_encode_config`) default to the frames' own
    (YUV frames' matrix and range; the primaries, transfer and sample aspect
    ratio of any frames), so a BT.709, full-range or anamorphic clip stays
    one. Bad settings are a ``ValueError`` here, not at each clip. After
    :func:`demux_video` and :func:`decode_packets` (with a ``filter_desc``
    that scales, say), a transcoding pipeline that never takes the GIL."""
    from ._encode import video_encode_config

    config = video_encode_config(
        height=height,
        width=width,
        frame_rate=frame_rate,
        pix_fmt=pix_fmt,
        bit_rate=bit_rate,
        qscale=qscale,
        gop_size=gop_size,
        max_b_frames=max_b_frames,
        colorspace=colorspace,
        color_primaries=color_primaries,
        color_trc=color_trc,
        color_range=color_range,
        sample_aspect_ratio=sample_aspect_ratio,
    )
    enc = {str(k): str(v) for k, v in (encoder_config or {}).items()}
    mux = {str(k): str(v) for k, v in (muxer_config or {}).items()}
    return _on(_io.encode_video_op(format, encoder or "", config, enc, mux), field)


def encode_audio(
    *,
    format: str = "wav",
    encoder: str | None = None,
    encoder_config: dict | None = None,
    muxer_config: dict | None = None,
    sample_fmt: str | None = None,
    sample_rate: int | None = None,
    num_channels: int | None = None,
    bit_rate: int = -1,
    compression_level: int = -1,
    qscale: int = -1,
    field: Field | None = 0,
):
    """Native op: AudioFrames -> the bytes of a complete file (``format``:
    the muxer), encoded by ``encoder`` (None: the format's default) with
    ``encoder_config``. Channels and rate default to the frames',
    ``sample_fmt`` to the encoder's first; the frames are converted to
    them. Bad settings are a ``ValueError`` here, not at each clip. After
    :func:`demux_audio` and :func:`decode_packets`, an audio transcoding
    pipeline that never takes the GIL."""
    from ._encode import audio_encode_config

    config = audio_encode_config(
        num_channels=num_channels or 0,
        sample_rate=sample_rate,
        sample_fmt=sample_fmt,
        bit_rate=bit_rate,
        compression_level=compression_level,
        qscale=qscale,
    )
    enc = {str(k): str(v) for k, v in (encoder_config or {}).items()}
    mux = {str(k): str(v) for k, v in (muxer_config or {}).items()}
    return _on(_io.encode_audio_op(format, encoder or "", config, enc, mux), field)


# -- pickling -----------------------------------------------------------------------
# An op made here pickles as its factory call (name and keyword arguments),
# so that pipeline configs with native ops cross to worker processes
# (run_pipeline_in_subprocess with the spawn or forkserver start method).

_FACTORIES = (
    "read_file decode_image decode_batch stack load_npy load_wav tar_members zip_members read_tar_members "
    "read_zip_members load_audio "
    "load_video load_video_clips demux_video demux_audio demux_image decode_packets convert_frames "
    "encode_image encode_video encode_audio"
).split()


def _recorded(factory):
    @functools.wraps(factory)
    def make(**kwargs):
        op = factory(**kwargs)
        op._recipe = (factory.__name__, kwargs)
        return op

    return make


for _name in _FACTORIES:
    globals()[_name] = _recorded(globals()[_name])
del _name


def _rebuild(name: str, kwargs: dict):
    if name not in _FACTORIES:
        raise ValueError(f"not a feedline.io.ops factory: {name!r}")
    return globals()[name](**kwargs)


def _reduce_native_op(op):
    recipe = getattr(op, "_recipe", None)
    if recipe is None:
        raise TypeError(
            "cannot pickle this NativeOp: only ops made by the feedline.io.ops factories pickle (as their factory call)"
        )
    return _rebuild, recipe


copyreg.pickle(NativeOp, _reduce_native_op)
