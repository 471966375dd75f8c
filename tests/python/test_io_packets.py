"""Packets across processes (serialize, deserialize, deserialize_view,
pickle) and bit-stream filters (BSF, apply_bsf, demux_*(bsf=)), checked
against the ``ffmpeg`` CLI's decode of the same files."""

from __future__ import annotations

import gc
import math
import multiprocessing
import pickle
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import shared_memory

import numpy as np
import pytest

import feedline
import feedline.io as fio

RGB = "format=pix_fmts=rgb24"


def _rgb(packets) -> np.ndarray:
    return fio.to_numpy(fio.convert_frames(fio.decode_packets(packets, filter_desc=RGB)))


def _demux_serialized(path: str, start: float, end: float) -> bytes:
    """Runs in a worker process: demux only, the packets go back pickled."""
    return pickle.dumps(fio.demux_video(path, timestamp=(start, end)))


@pytest.mark.parametrize("name", ["h264_420.mp4", "vp9.webm", "mpeg2.mkv", "h264.ts"])
def test_pickled_packets_decode_to_the_cli_frames(media, rgb, name):
    packets = fio.demux_video(media / name)
    back = pickle.loads(pickle.dumps(packets))
    assert type(back) is fio.VideoPackets
    assert back.src == packets.src
    assert back.num_packets == packets.num_packets
    assert back.get_timestamps(raw=True) == packets.get_timestamps(raw=True)
    assert repr(back.codec) == repr(packets.codec)
    np.testing.assert_array_equal(_rgb(back), rgb(name))


def test_audio_and_image_packets_round_trip(media):
    audio = fio.demux_audio(media / "stereo.m4a", timestamp=(0.25, 0.75))
    back = pickle.loads(pickle.dumps(audio))
    assert type(back) is fio.AudioPackets
    assert back.timestamp == audio.timestamp
    assert back.codec.channel_layout == audio.codec.channel_layout
    a = fio.to_numpy(fio.convert_frames(fio.decode_packets(audio)))
    b = fio.to_numpy(fio.convert_frames(fio.decode_packets(back)))
    np.testing.assert_array_equal(a, b)
    image = fio.demux_image(media / "img.png")
    img = fio.ImagePackets.deserialize(image.serialize())
    assert type(img) is fio.ImagePackets
    want = fio.to_numpy(fio.convert_frames(fio.decode_packets(image, filter_desc=RGB)))
    got = fio.to_numpy(fio.convert_frames(fio.decode_packets(img, filter_desc=RGB)))
    np.testing.assert_array_equal(got, want)


def test_demux_in_a_worker_process_decode_in_the_parent(media, rgb):
    path = str(media / "h264_420.mp4")
    windows = [(0.0, 0.5), (0.6, 1.3), (1.2, 2.0)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        blobs = list(pool.map(_demux_serialized, [path] * 3, *zip(*windows)))
    want = rgb("h264_420.mp4")
    for (start, end), blob in zip(windows, blobs):
        packets = pickle.loads(blob)
        assert packets.timestamp == (start, end)
        frames = _rgb(packets)
        # The frames whose time t = i / 25 lies in [start, end).
        first, last = math.ceil(round(start * 25, 6)), math.ceil(round(end * 25, 6))
        np.testing.assert_array_equal(frames, want[first:last])


def test_deserialize_view_keeps_shared_memory_alive_and_copies_nothing(media, rgb):
    packets = fio.demux_video(media / "h264_420.mp4")
    blob = packets.serialize()
    shm = shared_memory.SharedMemory(create=True, size=len(blob) + 4096)
    try:
        shm.buf[: len(blob)] = blob
        view = fio.VideoPackets.deserialize_view(shm.buf)
        # The packets hold the segment's buffer: it cannot be closed under them.
        with pytest.raises(BufferError):
            shm.close()
        np.testing.assert_array_equal(_rgb(view.clone()), rgb("h264_420.mp4"))
        del view
        gc.collect()
        shm.close()
    finally:
        shm.unlink()


def test_a_clone_of_viewed_packets_owns_its_payloads(media, rgb):
    packets = fio.demux_video(media / "h264_420.mp4")
    blob = packets.serialize()
    shm = shared_memory.SharedMemory(create=True, size=len(blob))
    try:
        shm.buf[: len(blob)] = blob
        view = fio.VideoPackets.deserialize_view(shm.buf)
        clone = view.clone()
        # Read without being consumed: serialize works on the viewed memory.
        assert view.serialize() == blob
        del view
        gc.collect()
        shm.close()  # only the clone is left, and it does not hold the segment
    finally:
        shm.unlink()
    np.testing.assert_array_equal(_rgb(clone), rgb("h264_420.mp4"))

    # The same for a bytearray overwritten under the clone, and for packets a
    # bit-stream filter passed through from a view.
    data = bytearray(blob)
    view = fio.VideoPackets.deserialize_view(data)
    passed = fio.BSF(view.codec, "null").filter(fio.VideoPackets.deserialize_view(data), flush=True)
    clones = [view.clone(), passed.clone()]
    data[:] = bytes(len(data))
    for c in clones:
        np.testing.assert_array_equal(_rgb(c), rgb("h264_420.mp4"))


def test_deserialize_copy_does_not_hold_the_input(media, rgb):
    data = bytearray(fio.demux_video(media / "h264_420.mp4").serialize())
    packets = fio.Packets.deserialize(data)
    data[:] = bytes(len(data))  # overwrite the input: the copy is unaffected
    np.testing.assert_array_equal(_rgb(packets), rgb("h264_420.mp4"))


def test_damaged_strings_raise_format_error(media):
    blob = fio.demux_video(media / "h264_420.mp4", timestamp=(0, 0.2)).serialize()
    with pytest.raises(feedline.FormatError, match="magic"):
        fio.Packets.deserialize(b"XXXX" + blob[4:])
    with pytest.raises(feedline.FormatError, match="truncated"):
        fio.Packets.deserialize_view(blob[: len(blob) // 2])
    with pytest.raises(feedline.FormatError):
        fio.Packets.deserialize(b"")


def test_consumed_packets_do_not_serialize(media):
    packets = fio.demux_video(media / "h264_420.mp4")
    fio.decode_packets(packets)
    with pytest.raises(TypeError, match="consumed"):
        packets.serialize()
    with pytest.raises(TypeError, match="consumed"):
        pickle.dumps(packets)


@pytest.mark.parametrize(("name", "bsf"), [("h264_420.mp4", "h264_mp4toannexb"), ("hevc.mp4", "hevc_mp4toannexb")])
def test_mp4_to_annexb_gives_start_codes_and_the_same_frames(media, rgb, name, bsf):
    packets = fio.demux_video(media / name)
    n = packets.num_packets
    out = fio.apply_bsf(packets, bsf)
    assert packets.consumed
    assert out.num_packets == n
    for data in out._payloads():
        assert data[:4] == b"\0\0\0\1" or data[:3] == b"\0\0\1"
    np.testing.assert_array_equal(_rgb(out), rgb(name))
    again = fio.demux_video(media / name, bsf=bsf)
    assert again.num_packets == n


def test_bsf_object_filters_in_pieces_and_flushes(media):
    codec = fio.demux_video(media / "h264_420.mp4").codec
    bsf = fio.BSF(codec, "null")
    assert bsf.codec.name == "h264"
    whole = fio.demux_video(media / "h264_420.mp4")
    want = whole.clone()._payloads()
    out = []
    d = fio.Demuxer(media / "h264_420.mp4")
    for chunk in d.streaming_demux(num_packets=7):
        got = bsf.filter(chunk)
        out += got._payloads() if got is not None else []
    rest = bsf.flush()
    out += rest._payloads() if rest is not None else []
    assert out == want


def test_bad_filters_raise_value_error(media):
    codec = fio.demux_video(media / "h264_420.mp4").codec
    with pytest.raises(ValueError, match="unknown bit-stream filter"):
        fio.BSF(codec, "no_such_filter")
    with pytest.raises(ValueError, match=r"does not take h264 packets \(it takes hevc\)"):
        fio.BSF(codec, "hevc_mp4toannexb")
    with pytest.raises(ValueError):
        fio.demux_video(media / "h264_420.mp4", bsf="vp9_superframe")
    audio = fio.demux_audio(media / "stereo.m4a")
    with pytest.raises(ValueError, match="video packets got audio"):
        fio.BSF(codec, "null").filter(audio)
    d = fio.Demuxer(media / "h264_420.mp4")
    streamed = next(d.streaming_demux(num_packets=5))
    with pytest.raises(ValueError, match="does not have codec"):
        fio.apply_bsf(streamed, "null")


def test_packets_cross_the_shared_memory_arena_in_place(media, rgb):
    from feedline.pipeline._arena import SharedMemoryRingBuffer, SharedMemorySegmentPool, offload, restore

    pool = SharedMemorySegmentPool(4 << 20, 2, acquire_timeout=0)
    try:
        packets = fio.demux_video(media / "h264_420.mp4")
        env = offload({"index": 7, "packets": packets}, pool)
        assert len(env) < 1024  # the payloads went to the segment
        out = restore(env, pool)
        assert out["index"] == 7 and type(out["packets"]) is fio.VideoPackets
        # The packets' payloads live in the segment and hold it.
        assert pool.free_segments() == 1
        np.testing.assert_array_equal(_rgb(out["packets"].clone()), rgb("h264_420.mp4"))
        del out
        gc.collect()
        assert pool.free_segments() == 2
    finally:
        pool.close()
    ring = SharedMemoryRingBuffer(4 << 20, acquire_timeout=0)
    try:
        out = restore(offload([fio.demux_video(media / "h264_420.mp4")], ring), ring)
        assert ring.used() == 0  # copied out at once
        np.testing.assert_array_equal(_rgb(out[0]), rgb("h264_420.mp4"))
    finally:
        ring.close()


# --- frames -------------------------------------------------------------------


def _decode_frames(path: str, filter_desc):
    """Runs in a worker process: decode only, the frames go back pickled."""
    return pickle.dumps(fio.decode_packets(fio.demux_video(path), filter_desc=filter_desc))


@pytest.mark.parametrize(("name", "fmt"), [("odd.mp4", None), ("odd.webm", None), ("h264_420.mp4", "gray16le")])
def test_pickled_frames_convert_to_the_same_arrays(media, name, fmt):
    filter_desc = None if fmt is None else f"format=pix_fmts={fmt}"
    frames = fio.decode_packets(fio.demux_video(media / name), filter_desc=filter_desc)
    back = pickle.loads(pickle.dumps(frames))
    assert type(back) is fio.VideoFrames
    assert (back.width, back.height, back.format, len(back)) == (
        frames.width,
        frames.height,
        frames.format,
        len(frames),
    )
    assert back.get_pts() == frames.get_pts() and back.time_base == frames.time_base
    # Every plane's bytes (odd yuv420p chroma included) came back.
    assert back.serialize() == frames.serialize()
    if name != "odd.webm":  # odd-sized yuv420p does not pack into one array
        np.testing.assert_array_equal(fio.to_numpy(fio.convert_frames(back)), fio.to_numpy(fio.convert_frames(frames)))


def test_pickled_audio_and_image_frames(media):
    audio = fio.decode_packets(fio.demux_audio(media / "six.flac"), filter_desc=None)
    back = pickle.loads(pickle.dumps(audio))
    assert type(back) is fio.AudioFrames
    assert (back.num_channels, back.sample_rate, back.format) == (audio.num_channels, audio.sample_rate, audio.format)
    np.testing.assert_array_equal(fio.to_numpy(fio.convert_frames(back)), fio.to_numpy(fio.convert_frames(audio)))
    image = fio.decode_packets(fio.demux_image(media / "img.png"), filter_desc=None)
    img = pickle.loads(pickle.dumps(image))
    assert type(img) is fio.ImageFrames
    np.testing.assert_array_equal(fio.to_numpy(fio.convert_frames(img)), fio.to_numpy(fio.convert_frames(image)))


def test_decode_in_a_worker_process_convert_in_the_parent(media, rgb):
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        blob = pool.submit(_decode_frames, str(media / "h264_420.mp4"), RGB).result()
    np.testing.assert_array_equal(fio.to_numpy(fio.convert_frames(pickle.loads(blob))), rgb("h264_420.mp4"))


def test_damaged_frame_strings_raise_format_error(media):
    blob = fio.decode_packets(fio.demux_video(media / "h264_420.mp4", timestamp=(0, 0.1))).serialize()
    for n in (0, 3, 10, 40, len(blob) // 2, len(blob) - 1):
        with pytest.raises(feedline.FormatError):
            fio.Frames.deserialize(blob[:n])
    with pytest.raises(feedline.FormatError, match="not a feedline frames string: wrong magic"):
        fio.Frames.deserialize(b"FLPK" + blob[4:])
    # A string of another layout version is refused, not misread.
    older = blob[:4] + (1).to_bytes(4, sys.byteorder) + blob[8:]
    with pytest.raises(feedline.FormatError, match=r"version 1 \(this feedline reads 2\)"):
        fio.Frames.deserialize(older)
