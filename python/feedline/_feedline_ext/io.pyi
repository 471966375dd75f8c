"""Native core of feedline.io."""

from collections.abc import Mapping, Sequence
import enum
from typing import Final, overload

import feedline._feedline_ext


class Buffer:
    """
    An N-d array owned by feedline. Zero-copy to NumPy (numpy.asarray, the
    array interface) and to DLPack consumers (torch.from_dlpack); the memory
    stays alive as long as any view of it.
    """

    @property
    def shape(self) -> tuple: ...

    @property
    def dtype(self) -> str: ...

    @property
    def ndim(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def writable(self) -> bool:
        """False for views of read-only memory (bytes, file mappings)."""

    @property
    def __array_interface__(self) -> dict: ...

    def __dlpack__(self, *args, **kwargs) -> object:
        """
        A DLPack capsule of the buffer (CPU; stream and version requests are accepted and ignored).
        """

    def __dlpack_device__(self) -> tuple: ...

    def __len__(self) -> int: ...

    def __repr__(self) -> str: ...

class PixelFormat(enum.Enum):
    RGB = 0

    BGR = 1

    GRAY = 2

class Layout(enum.Enum):
    HWC = 0

    CHW = 1

class ResizeMode(enum.Enum):
    STRETCH = 0

    PAD = 1

    CROP = 2

class ImageOptions:
    def __init__(self) -> None: ...

    @property
    def resize_width(self) -> int: ...

    @resize_width.setter
    def resize_width(self, arg: int, /) -> None: ...

    @property
    def resize_height(self) -> int: ...

    @resize_height.setter
    def resize_height(self, arg: int, /) -> None: ...

    @property
    def resize_mode(self) -> ResizeMode: ...

    @resize_mode.setter
    def resize_mode(self, arg: ResizeMode, /) -> None: ...

    @property
    def resize_shorter(self) -> int: ...

    @resize_shorter.setter
    def resize_shorter(self, arg: int, /) -> None: ...

    @property
    def crop_width(self) -> int: ...

    @crop_width.setter
    def crop_width(self, arg: int, /) -> None: ...

    @property
    def crop_height(self) -> int: ...

    @crop_height.setter
    def crop_height(self, arg: int, /) -> None: ...

    @property
    def pixel_format(self) -> PixelFormat: ...

    @pixel_format.setter
    def pixel_format(self, arg: PixelFormat, /) -> None: ...

    @property
    def layout(self) -> Layout: ...

    @layout.setter
    def layout(self, arg: Layout, /) -> None: ...

    @property
    def float32(self) -> bool: ...

    @float32.setter
    def float32(self, arg: bool, /) -> None: ...

    @property
    def mean(self) -> list[float]: ...

    @mean.setter
    def mean(self, arg: Sequence[float], /) -> None: ...

    @property
    def std(self) -> list[float]: ...

    @std.setter
    def std(self, arg: Sequence[float], /) -> None: ...

    @property
    def dct_scaling(self) -> bool: ...

    @dct_scaling.setter
    def dct_scaling(self, arg: bool, /) -> None: ...

    @property
    def partial_decode(self) -> bool: ...

    @partial_decode.setter
    def partial_decode(self, arg: bool, /) -> None: ...

    @property
    def max_pixels(self) -> int: ...

    @max_pixels.setter
    def max_pixels(self, arg: int, /) -> None: ...

    @property
    def random_resized_crop(self) -> list[int]:
        """Output (width, height) of the random resized crop; (0, 0): off."""

    @random_resized_crop.setter
    def random_resized_crop(self, arg: Sequence[int], /) -> None: ...

    @property
    def crop_scale(self) -> list[float]: ...

    @crop_scale.setter
    def crop_scale(self, arg: Sequence[float], /) -> None: ...

    @property
    def crop_ratio(self) -> list[float]: ...

    @crop_ratio.setter
    def crop_ratio(self, arg: Sequence[float], /) -> None: ...

    @property
    def flip_probability(self) -> float: ...

    @flip_probability.setter
    def flip_probability(self, arg: float, /) -> None: ...

    @property
    def seed(self) -> int | None: ...

    @seed.setter
    def seed(self, arg: int | None, /) -> None: ...

    @property
    def epoch(self) -> int: ...

    @epoch.setter
    def epoch(self, arg: int, /) -> None: ...

    def check(self) -> None: ...

def decode_image(data: object, options: ImageOptions, name: str, index: int | None = None) -> Buffer: ...

def prepare_jpeg(data: object, name: str, max_pixels: int) -> bytes: ...

def transform_image(data: object, shape: Sequence[int], options: ImageOptions, name: str, index: int | None) -> Buffer: ...

def random_resized_crop_box(width: int, height: int, scale: Sequence[float], ratio: Sequence[float], draws: Sequence[float] | None, seed: int | None, epoch: int, index: int) -> list[int]: ...

class ImageFailure:
    """Why one image of a batch was left out."""

    @property
    def index(self) -> int:
        """The source's position."""

    @property
    def message(self) -> str: ...

def load_image_batch(srcs: list, options: ImageOptions, indices: Sequence[int] = []) -> tuple[Buffer, list[ImageFailure]]: ...

def load_npy(data: object, name: str) -> Buffer: ...

class ZipEntry:
    """One member of a ZIP archive."""

    @property
    def name(self) -> bytes: ...

    @property
    def data_offset(self) -> int: ...

    @property
    def compressed_size(self) -> int: ...

    @property
    def size(self) -> int:
        """Uncompressed size in bytes."""

    @property
    def method(self) -> int:
        """0 stored, 8 deflate."""

    @property
    def flags(self) -> int:
        """General purpose bits (1: encrypted, 8: data descriptor)."""

class FileReader:
    """A file read at any offset (pread), from any thread."""

    def __init__(self, path: str) -> None: ...

    @property
    def path(self) -> str: ...

    @property
    def size(self) -> int: ...

    def read(self, offset: int, n: int) -> Buffer:
        """The n bytes at `offset` (a new uint8 Buffer)."""

@overload
def list_zip(file: FileReader) -> list[ZipEntry]: ...

@overload
def list_zip(data: object, name: str) -> list[ZipEntry]: ...

@overload
def list_tar(file: FileReader) -> list[TarMember]: ...

@overload
def list_tar(data: object, name: str) -> list[TarMember]: ...

@overload
def read_zip_entry(file: FileReader, entry: ZipEntry, max_size: int) -> Buffer: ...

@overload
def read_zip_entry(archive: object, entry: ZipEntry, name: str, max_size: int) -> Buffer: ...

class TarMember:
    """One regular file of a tar archive."""

    @property
    def name(self) -> bytes: ...

    @property
    def offset(self) -> int:
        """Of the member's data."""

    @property
    def size(self) -> int: ...

    @property
    def header(self) -> int:
        """Of the member's header block."""

    @property
    def pax_size(self) -> bool:
        """Whether its size is a pax record's."""

class TarStream:
    """
    A tar archive read front to back from a file object (readinto() or read(n)), one member at a time; iterates (name, data bytes). A damaged header or a cut raises FormatError when reached.
    """

    def __init__(self, file: object, name: str) -> None: ...

    def __iter__(self) -> TarStream: ...

    def __next__(self) -> tuple[str, bytes]: ...

def replace_tar_members(data: object, name: str, replacements: Sequence[tuple[int, object]]) -> Buffer:
    """
    The archive (uint8) with new data for the members at the given indices of list_tar().
    """

def replace_zip_members(data: object, name: str, replacements: Sequence[tuple[int, object]]) -> Buffer:
    """
    The archive (uint8) with new data, stored, for the members at the given indices of list_zip().
    """

class ArchiveRewriter:
    """
    Writes a copy of a tar or ZIP archive to a file member by member, with new data for the members given in the order of order(): only the input and one member are held. After an exception the file holds part of an archive.
    """

    def order(self) -> list[int]:
        """Member indices in the order their data lies in the archive."""

    def replace(self, index: int, data: object) -> None:
        """
        Writes the archive up to the end of member `index`, with `data` as its new data (stored, for ZIP).
        """

    def finish(self) -> None:
        """Writes the rest of the archive and closes the file."""

@overload
def rewrite_tar(file: FileReader, path: str) -> ArchiveRewriter:
    """
    An ArchiveRewriter from the tar archive in `file` (a FileReader, kept alive) to the file `path`.
    """

@overload
def rewrite_tar(data: object, name: str, path: str) -> ArchiveRewriter:
    """An ArchiveRewriter from the tar archive `data` to the file `path`."""

@overload
def rewrite_zip(file: FileReader, path: str) -> ArchiveRewriter:
    """
    An ArchiveRewriter from the ZIP archive in `file` (a FileReader, kept alive) to the file `path`.
    """

@overload
def rewrite_zip(data: object, name: str, path: str) -> ArchiveRewriter:
    """An ArchiveRewriter from the ZIP archive `data` to the file `path`."""

def load_wav(data: object, name: str, start_frame: int, num_frames: int | None) -> Buffer: ...

class WavInfo:
    """A WAV file's format and data chunk."""

    @property
    def audio_format(self) -> int: ...

    @property
    def num_channels(self) -> int: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def bits_per_sample(self) -> int: ...

    @property
    def block_align(self) -> int: ...

    @property
    def num_frames(self) -> int: ...

    @property
    def data_offset(self) -> int: ...

def parse_wav(data: object, name: str) -> WavInfo: ...

def read_file(path: str) -> Buffer: ...

def map_file(path: str) -> Buffer:
    """The file memory-mapped read-only (no copy)."""

def load_audio(data: object, name: str, sample_rate: int, channels: int, start: float, duration: float | None) -> Buffer: ...

def set_buffer_cache_limit(bytes: int) -> None: ...

def buffer_cache_size() -> int: ...

def library_versions() -> list[tuple[str, str]]: ...

def set_ffmpeg_log_level(level: int) -> None: ...

def load_audio_op(sample_rate: int, channels: int) -> feedline._feedline_ext.NativeOp: ...

class Media(enum.Enum):
    AUDIO = 0

    VIDEO = 1

    IMAGE = 2

class Window:
    """A half-open time window [start, end)."""

    def __init__(self, start: object, end: object | None) -> None:
        """
        start and end in seconds (int, float, Fraction, Decimal or str); end None or inf: to the end.
        """

    @property
    def start(self) -> float: ...

    @property
    def end(self) -> float: ...

class DemuxConfig:
    def __init__(self) -> None: ...

    @property
    def format(self) -> str: ...

    @format.setter
    def format(self, arg: str, /) -> None: ...

    @property
    def format_options(self) -> dict[str, str]: ...

    @format_options.setter
    def format_options(self, arg: Mapping[str, str], /) -> None: ...

    @property
    def buffer_size(self) -> int: ...

    @buffer_size.setter
    def buffer_size(self, arg: int, /) -> None: ...

    @property
    def find_stream_info(self) -> bool | None: ...

    @find_stream_info.setter
    def find_stream_info(self, arg: bool | None, /) -> None: ...

    @property
    def allow_unsafe_formats(self) -> bool: ...

    @allow_unsafe_formats.setter
    def allow_unsafe_formats(self, arg: bool, /) -> None: ...

class DecodeConfig:
    def __init__(self) -> None: ...

    AUTO_THREADS: Final[int] = ...
    """(arg: object, /) -> int"""

    @property
    def decoder(self) -> str: ...

    @decoder.setter
    def decoder(self, arg: str, /) -> None: ...

    @property
    def decoder_options(self) -> dict[str, str]: ...

    @decoder_options.setter
    def decoder_options(self, arg: Mapping[str, str], /) -> None: ...

    @property
    def threads(self) -> int: ...

    @threads.setter
    def threads(self, arg: int, /) -> None: ...

class Codec:
    """A stream's codec parameters (read-only metadata)."""

    @property
    def media(self) -> Media: ...

    @property
    def name(self) -> str: ...

    @property
    def time_base(self) -> tuple: ...

    @property
    def frame_rate(self) -> tuple: ...

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...

    @property
    def pix_fmt(self) -> str: ...

    @property
    def sample_aspect_ratio(self) -> tuple: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def num_channels(self) -> int: ...

    @property
    def sample_fmt(self) -> str: ...

    @property
    def channel_layout(self) -> str: ...

    @property
    def bit_rate(self) -> int: ...

    @property
    def bits_per_sample(self) -> int: ...

    def __repr__(self) -> str: ...

class Packets:
    """Encoded packets of one stream."""

    @property
    def media(self) -> Media: ...

    @property
    def src(self) -> str: ...

    @property
    def stream_index(self) -> int: ...

    @property
    def time_base(self) -> tuple: ...

    @property
    def timestamp(self) -> object:
        """The window (start, end) in seconds, or None."""

    @property
    def codec(self) -> Codec | None:
        """The stream's Codec, or None for streamed packets."""

    @property
    def num_packets(self) -> int:
        """All packets held, including those before the window."""

    @property
    def consumed(self) -> bool: ...

    def __len__(self) -> int: ...

    def get_timestamps(self, *, raw: bool = False) -> list[float]:
        """
        Presentation times (s) of the packets in the window, sorted; with raw=True all of them, in stored order.
        """

    def clone(self) -> Packets:
        """
        A copy sharing every payload (no data is copied); the payloads of deserialize_view packets are copied, so that the copy outlives the viewed memory.
        """

    def _payloads(self) -> list:
        """Each packet's payload as bytes (for tests and debugging)."""

    def serialize(self) -> bytes:
        """The packets as bytes (for another process, or shared memory)."""

    @staticmethod
    def deserialize(data: object) -> Packets:
        """Packets from serialize() output (bytes-like), copied."""

    @staticmethod
    def deserialize_view(data: object) -> Packets:
        """
        Packets from serialize() output whose payloads stay in `data` (a bytes-like object, e.g. a memoryview of shared memory), which they keep alive; nothing is copied. `data` must not change while they live.
        """

    def __repr__(self) -> str: ...

class AudioPackets(Packets):
    pass

class VideoPackets(Packets):
    pass

class ImagePackets(Packets):
    pass

def deserialize_packets(data: object, view: bool = False, name: str = '') -> Packets:
    """
    Packets from Packets.serialize() output; with view=True the payloads stay in `data` (kept alive) instead of being copied.
    """

class BSF:
    """A bit-stream filter (or chain) for packets of one codec."""

    def __init__(self, codec: Codec, bsf: str) -> None: ...

    @property
    def codec(self) -> Codec:
        """The codec of the packets that come out."""

    @property
    def bsf(self) -> str: ...

    def _filter(self, packets: Packets, flush: bool = False) -> Packets: ...

    def _flush(self) -> Packets: ...

    def __repr__(self) -> str: ...

class Frames:
    """Decoded frames."""

    @property
    def media(self) -> Media: ...

    @property
    def num_frames(self) -> int: ...

    def __len__(self) -> int: ...

    @property
    def format(self) -> str: ...

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...

    @property
    def num_planes(self) -> int: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def num_channels(self) -> int: ...

    @property
    def time_base(self) -> tuple: ...

    @property
    def metadata(self) -> dict[str, str]: ...

    @property
    def consumed(self) -> bool: ...

    def get_pts(self) -> list[int]: ...

    def get_timestamps(self) -> list[float]: ...

    def clone(self) -> Frames:
        """A copy sharing every frame's data (no data is copied)."""

    def _select(self, arg: Sequence[int], /) -> Frames: ...

    def _image(self, arg: int, /) -> Frames: ...

    def _extend(self, arg: Frames, /) -> None: ...

    def serialize(self) -> bytes:
        """The frames as bytes (for another process); planes are copied."""

    @staticmethod
    def deserialize(data: object) -> Frames:
        """Frames from serialize() output (copied)."""

    def __repr__(self) -> str: ...

class AudioFrames(Frames):
    pass

class VideoFrames(Frames):
    pass

class ImageFrames(Frames):
    pass

class Demuxer:
    def __init__(self, src: object, config: DemuxConfig, name: str) -> None: ...

    @property
    def name(self) -> str: ...

    @property
    def num_streams(self) -> int: ...

    @property
    def duration(self) -> float: ...

    def has_audio(self) -> bool: ...

    def rewind(self) -> None: ...

    def best_stream(self, arg: Media, /) -> int: ...

    def codec(self, arg: Media, /) -> Codec: ...

    def stream_codec(self, arg: int, /) -> Codec: ...

    def demux(self, media: Media, window: Window | None) -> Packets: ...

    def next_chunk(self, streams: Sequence[int], duration: float, num_packets: int) -> dict[int, Packets]: ...

class Decoder:
    def __init__(self, codec: Codec, filter_desc: str | None, config: DecodeConfig, name: str = '') -> None: ...

    def decode(self, packets: Packets, max_frames: int | None = None) -> Frames: ...

    def flush(self) -> Frames: ...

class FilterGraph:
    def __init__(self, filter_desc: str) -> None: ...

    @property
    def inputs(self) -> list[str]: ...

    @property
    def outputs(self) -> list[str]: ...

    def add_frames(self, frames: Frames, key: str = '') -> None: ...

    def flush(self) -> None: ...

    def get_frames(self, key: str = '') -> Frames: ...

    def dump(self) -> str: ...

def decode_packets(packets: Packets, filter_desc: str | None, config: DecodeConfig, num_frames: int | None) -> Frames: ...

def sample_decode_video(packets: Packets, indices: Sequence[int], filter_desc: str | None, config: DecodeConfig) -> list[Frames]: ...

@overload
def convert_frames(frames: Frames) -> Buffer: ...

@overload
def convert_frames(frames: Sequence[Frames]) -> Buffer: ...

class VideoOptions:
    def __init__(self, window: Window | None, demux_config: DemuxConfig, decode_config: DecodeConfig, filter_desc: str | None, pix_fmt: str, max_frames: int | None) -> None: ...

def load_video(src: object, options: VideoOptions, name: str, image: bool) -> Buffer: ...

def buffer_source_desc(codec: Codec, label: str, format: str) -> str: ...

def buffer_view(data: object, dtype: str, shape: Sequence[int]) -> Buffer: ...

def ffmpeg_filters() -> list[str]: ...

def ffmpeg_decoders() -> list[tuple[str, str]]: ...

def ffmpeg_log_level() -> int: ...

def load_video_op(options: VideoOptions) -> feedline._feedline_ext.NativeOp: ...

def load_video_clips_op(options: VideoOptions) -> feedline._feedline_ext.NativeOp:
    """The options' window is not used."""

def demux_op(media: Media, window: Window | None, demux_config: DemuxConfig) -> feedline._feedline_ext.NativeOp: ...

def decode_packets_op(filter_desc: str | None, default_filter: bool, decode_config: DecodeConfig, num_frames: int | None) -> feedline._feedline_ext.NativeOp: ...

def convert_frames_op() -> feedline._feedline_ext.NativeOp: ...

class VideoEncodeConfig:
    def __init__(self) -> None: ...

    @property
    def width(self) -> int: ...

    @width.setter
    def width(self, arg: int, /) -> None: ...

    @property
    def height(self) -> int: ...

    @height.setter
    def height(self, arg: int, /) -> None: ...

    @property
    def frame_rate(self) -> object: ...

    @frame_rate.setter
    def frame_rate(self, value: object | None) -> None: ...

    @property
    def pix_fmt(self) -> str: ...

    @pix_fmt.setter
    def pix_fmt(self, arg: str, /) -> None: ...

    @property
    def bit_rate(self) -> int: ...

    @bit_rate.setter
    def bit_rate(self, arg: int, /) -> None: ...

    @property
    def compression_level(self) -> int: ...

    @compression_level.setter
    def compression_level(self, arg: int, /) -> None: ...

    @property
    def qscale(self) -> int: ...

    @qscale.setter
    def qscale(self, arg: int, /) -> None: ...

    @property
    def gop_size(self) -> int: ...

    @gop_size.setter
    def gop_size(self, arg: int, /) -> None: ...

    @property
    def max_b_frames(self) -> int: ...

    @max_b_frames.setter
    def max_b_frames(self, arg: int, /) -> None: ...

    @property
    def colorspace(self) -> str: ...

    @colorspace.setter
    def colorspace(self, arg: str, /) -> None: ...

    @property
    def color_primaries(self) -> str: ...

    @color_primaries.setter
    def color_primaries(self, arg: str, /) -> None: ...

    @property
    def color_trc(self) -> str: ...

    @color_trc.setter
    def color_trc(self, arg: str, /) -> None: ...

    @property
    def color_range(self) -> str: ...

    @color_range.setter
    def color_range(self, arg: str, /) -> None: ...

    @property
    def sample_aspect_ratio(self) -> object: ...

    @sample_aspect_ratio.setter
    def sample_aspect_ratio(self, value: object | None) -> None: ...

    @property
    def time_base(self) -> object: ...

    @time_base.setter
    def time_base(self, value: object | None) -> None: ...

class AudioEncodeConfig:
    def __init__(self) -> None: ...

    @property
    def num_channels(self) -> int: ...

    @num_channels.setter
    def num_channels(self, arg: int, /) -> None: ...

    @property
    def sample_rate(self) -> int: ...

    @sample_rate.setter
    def sample_rate(self, arg: int, /) -> None: ...

    @property
    def sample_fmt(self) -> str: ...

    @sample_fmt.setter
    def sample_fmt(self, arg: str, /) -> None: ...

    @property
    def bit_rate(self) -> int: ...

    @bit_rate.setter
    def bit_rate(self, arg: int, /) -> None: ...

    @property
    def compression_level(self) -> int: ...

    @compression_level.setter
    def compression_level(self, arg: int, /) -> None: ...

    @property
    def qscale(self) -> int: ...

    @qscale.setter
    def qscale(self, arg: int, /) -> None: ...

class Encoder:
    """Encodes frames of one stream."""

    @property
    def media(self) -> Media: ...

    @property
    def name(self) -> str: ...

    @property
    def codec(self) -> Codec: ...

    @property
    def frame_size(self) -> int:
        """
        Audio: samples per frame the encoder takes (0: any); frames of other sizes are regrouped.
        """

    def _encode(self, frames: Frames) -> Packets: ...

    def _flush(self) -> Packets: ...

class Muxer:
    """An output file and its streams."""

    def __init__(self, dst: str, format: str = '') -> None: ...

    @staticmethod
    def in_memory(format: str) -> Muxer:
        """A Muxer writing to memory; take_bytes() after close()."""

    def take_bytes(self) -> bytes: ...

    @property
    def dst(self) -> str: ...

    @property
    def format(self) -> str: ...

    @property
    def num_streams(self) -> int: ...

    @property
    def is_open(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    def add_video_stream(self, config: VideoEncodeConfig, encoder: str, options: Mapping[str, str]) -> Encoder: ...

    def add_audio_stream(self, config: AudioEncodeConfig, encoder: str, options: Mapping[str, str]) -> Encoder: ...

    def add_remux_stream(self, codec: Codec) -> int: ...

    def open(self, options: Mapping[str, str]) -> None: ...

    def write(self, index: int, packets: Packets) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

def video_frames_from(data: object, shape: Sequence[int], dtype: str, pix_fmt: str, frame_rate: object, pts: int) -> Frames: ...

def audio_frames_from(data: object, shape: Sequence[int], dtype: str, sample_fmt: str, sample_rate: int, pts: int) -> Frames: ...

def encode_image(data: object, shape: Sequence[int], dtype: str, format: str, pix_fmt: str, quality: int, lossless: bool, compression_level: int) -> bytes: ...

def encode_image_op(format: str, pix_fmt: str, quality: int, lossless: bool, compression_level: int) -> feedline._feedline_ext.NativeOp: ...

def encode_video_op(format: str, encoder: str, config: VideoEncodeConfig, encoder_options: Mapping[str, str], muxer_options: Mapping[str, str]) -> feedline._feedline_ext.NativeOp: ...

def encode_audio_op(format: str, encoder: str, config: AudioEncodeConfig, encoder_options: Mapping[str, str], muxer_options: Mapping[str, str]) -> feedline._feedline_ext.NativeOp: ...

def load_npy_op() -> feedline._feedline_ext.NativeOp: ...

def load_wav_op() -> feedline._feedline_ext.NativeOp: ...

def zip_members_op() -> feedline._feedline_ext.NativeOp: ...

def tar_members_op() -> feedline._feedline_ext.NativeOp: ...

def read_tar_members_op() -> feedline._feedline_ext.NativeOp: ...

def read_zip_members_op() -> feedline._feedline_ext.NativeOp: ...

def read_file_op() -> feedline._feedline_ext.NativeOp: ...

def decode_image_op(arg: ImageOptions, /) -> feedline._feedline_ext.NativeOp: ...

def decode_batch_op(arg: ImageOptions, /) -> feedline._feedline_ext.NativeOp: ...

def stack_op() -> feedline._feedline_ext.NativeOp: ...

def on_field(arg0: feedline._feedline_ext.NativeOp, arg1: int | str, /) -> feedline._feedline_ext.NativeOp: ...
