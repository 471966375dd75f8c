"""Packets and Frames used by two threads at once.

A call that works on Packets or Frames with the GIL released (serialize,
decode, convert, encode, write to a Muxer) works on its own clone, so a
second thread that consumes the object meanwhile cannot cut what the first
one reads short or free it under it. Each call sees the whole object or
raises ObjectConsumed (a TypeError), and an object is consumed once.

The races here are arranged without sleeps: the reading thread signals an
Event just before its call, and the main thread, waiting on it, runs only
when the reader releases the GIL inside the call. Each scenario repeats, so
that a wrong interleaving shows on some round."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

import feedline.io as fio

ROUNDS = 12


@pytest.fixture(scope="module")
def big(tmp_path_factory, ffmpeg):
    """1080p Motion JPEG at top quality: ~200 KB packets, so that copying
    them takes long enough for the other thread to act."""
    path = tmp_path_factory.mktemp("shared") / "big.avi"
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=30", "-t", "2", "-c:v", "mjpeg", "-q:v", "1", path)
    return path


def _race(reader, consumer):
    """Runs reader() on a thread that starts it just before consumer() runs
    here; returns (reader's result or exception, consumer's)."""
    started = threading.Event()
    out = []

    def run():
        started.set()
        try:
            out.append(reader())
        except Exception as e:  # noqa: BLE001 - the caller checks it
            out.append(e)

    t = threading.Thread(target=run)
    t.start()
    started.wait()
    try:
        mine = consumer()
    except Exception as e:  # noqa: BLE001
        mine = e
    t.join()
    return out[0], mine


def _consumed(e) -> bool:
    return isinstance(e, TypeError) and "consumed" in str(e)


def test_serialize_while_another_thread_decodes_gives_every_packet(big):
    want = fio.demux_video(big)._payloads()
    whole = 0
    for _ in range(ROUNDS):
        packets = fio.demux_video(big)
        blob, frames = _race(packets.serialize, lambda p=packets: fio.decode_packets(p, num_frames=1))
        assert isinstance(frames, fio.VideoFrames), frames
        assert "consumed" in repr(packets)
        if _consumed(blob):
            continue
        assert isinstance(blob, bytes), blob
        assert fio.VideoPackets.deserialize(blob)._payloads() == want
        whole += 1
    assert whole > 0  # the reader ran inside the decode's window at least once


def _in_child(big, body: str) -> None:
    """Runs `body` in a child process with race() and src defined: a call
    that read an object another thread freed could crash the interpreter
    rather than raise."""
    prelude = textwrap.dedent(
        f"""
        import threading, numpy as np, feedline.io as fio
        src = {str(big)!r}

        def race(reader, consumer):
            started, out = threading.Event(), []
            def run():
                started.set()
                try:
                    out.append(reader())
                except TypeError as e:
                    assert "consumed" in str(e), e
                    out.append(None)
            t = threading.Thread(target=run); t.start(); started.wait()
            try:
                consumer()
            except TypeError as e:
                assert "consumed" in str(e), e
            t.join()
            return out[0]
        """
    )
    script = prelude + textwrap.dedent(body) + "\nprint('ok')\n"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("ok"), run.stdout


def test_muxer_write_while_another_thread_decodes_writes_every_packet(big):
    _in_child(
        big,
        f"""
        n = fio.demux_video(src).num_packets
        for _ in range({ROUNDS}):
            packets = fio.demux_video(src)
            mux = fio.Muxer(format="matroska")
            index = mux.add_remux_stream(packets.codec)
            mux.open()

            def write():
                mux.write(index, packets)
                mux.close()
                return mux.getvalue()

            data = race(write, lambda: fio.decode_packets(packets, num_frames=1))
            if data is not None:
                assert fio.demux_video(data).num_packets == n
        """,
    )


def test_two_threads_decoding_one_packets_consume_it_once(big):
    for _ in range(ROUNDS):
        packets = fio.demux_video(big)
        a, b = _race(
            lambda p=packets: fio.decode_packets(p, num_frames=2), lambda p=packets: fio.decode_packets(p, num_frames=2)
        )
        results = [r for r in (a, b) if isinstance(r, fio.VideoFrames)]
        errors = [r for r in (a, b) if not isinstance(r, fio.VideoFrames)]
        assert len(results) == 1, (a, b)
        assert len(errors) == 1 and _consumed(errors[0]), errors
        assert results[0].num_frames == 2


def test_frames_read_while_another_thread_consumes_them_stay_whole(big):
    """Frames.serialize() and convert_frames() against convert_frames() and
    encoding."""
    _in_child(
        big,
        f"""
        def frames():
            return fio.decode_packets(fio.demux_video(src), num_frames=8)

        want = fio.to_numpy(fio.convert_frames(frames()))
        enc = fio.Muxer(format="matroska").add_encode_stream(
            fio.video_encode_config(width=1920, height=1080, pix_fmt="yuvj422p", frame_rate=(30, 1)),
            encoder="mjpeg")
        whole = 0
        for _ in range({ROUNDS}):
            f = frames()
            blob = race(f.serialize, lambda: fio.convert_frames(f))
            if blob is not None:
                got = fio.to_numpy(fio.convert_frames(fio.VideoFrames.deserialize(blob)))
                assert np.array_equal(got, want)
                whole += 1
            f = frames()
            arr = race(lambda: fio.convert_frames(f), lambda: enc.encode(f))
            if arr is not None:
                assert np.array_equal(fio.to_numpy(arr), want)
                whole += 1
        assert whole > 0
        """,
    )


def test_convert_frames_refuses_one_object_twice_in_a_list(big):
    f = fio.decode_packets(fio.demux_video(big), num_frames=1)
    with pytest.raises(ValueError, match="items 0 and 1 of the list are one Frames object"):
        fio.convert_frames([f, f])
    assert f.num_frames == 1  # not consumed
