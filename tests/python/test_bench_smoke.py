"""Smoke runs of the Python benchmarks: they still work (numbers not read)."""

import importlib.util
import pathlib
import re
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "python"


def test_pipeline_overhead_benchmark_runs():
    # SPDL is a baseline, installed only by `install_deps.sh --bench`; the
    # feedline contenders must run and deliver every item without it.
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "pipeline_overhead.py"),
            "--quick",
            "--only",
            "loop,feedline-py,feedline-native,feedline-native-src",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "feedline, native ops" in r.stdout


def test_images_benchmark_runs():
    # The baselines (torch, SPDL) are optional here; feedline's contenders and
    # the C++ limit (built with the release tree, when present) must run.
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "images.py"),
            "--quick",
            "--only",
            "feedline,feedline-per-image,limit,rrc-feedline,rrc-full-decode",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "feedline, native ops" in r.stdout
    # The augmentation contenders and the run's last line.
    assert "RRC feedline, native (partial decode)" in r.stdout
    # Every contender hands out torch tensors: without torch (CI installs no
    # benchmark baselines) none can run, and the line says n/a.
    number = r"\d+\.\d\d" if importlib.util.find_spec("torch") else "n/a"
    assert re.search(rf"^RRC feedline/DataLoader \S+  feedline RRC/full-decode {number}$", r.stdout, re.M), r.stdout


def test_arrays_benchmark_runs():
    # numpy, wave and tarfile are always there; SPDL and soundfile are optional.
    r = subprocess.run(
        [sys.executable, str(BENCH / "arrays.py"), "--quick"], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "feedline.io.iter_tarfile" in r.stdout


def test_video_benchmark_runs():
    # The clips are made with the ffmpeg CLI (libx264); PyAV, SPDL and
    # torchcodec are optional baselines. feedline must run and deliver every
    # frame, in each of its configurations and the three frame scenarios, and
    # demux every packet of every file, with and without the stream probe.
    r = subprocess.run(
        [sys.executable, str(BENCH / "video.py"), "--quick", "--only", "feedline,pyav"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "Whole clips:" in out and "Windows of 8 frames" in out and "decoded to 224x224" in out, out
    lines = out.splitlines()
    rows = [line for line in lines if line.startswith("feedline ") and ": 2 threads" in line]
    assert len(rows) == 6 and all(row.endswith("yes") for row in rows), out
    demux = [line for line in lines if line.startswith("feedline") and "demux_video" in line]
    assert len(demux) == 2 and all(" yes " in line for line in demux), out
    assert lines[-1].startswith("SUMMARY: video") and lines[-1].endswith("ok (smoke run)"), out


def test_dataloader_benchmark_runs(tmp_path):
    # torch (the baseline and the adapter contenders) is optional; the
    # feedline DataLoader must run and report its state_dict() cost.
    r = subprocess.run(
        [sys.executable, str(BENCH / "dataloader.py"), "--quick", "--data", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUMMARY:" in r.stdout


def test_processes_benchmark_runs():
    # The feedline contenders (threads, a region, a subprocess) must deliver
    # every item (the script exits 1 otherwise); torch is optional.
    r = subprocess.run(
        [sys.executable, str(BENCH / "processes.py"), "--quick", "--only", "threads,region,subprocess,region-1m"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUMMARY: region vs threads" in r.stdout


def test_autotune_benchmark_runs():
    # Numbers are not read (a smoke run is too short to converge); every item
    # must arrive and the CPU budget must hold (else it exits 1).
    r = subprocess.run(
        [sys.executable, str(BENCH / "autotune.py"), "--quick", "--only", "io,cpu"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "summary: autotune reached" in r.stdout


def test_encode_benchmark_runs():
    # PyAV and Pillow are optional baselines; feedline's contenders must run,
    # pass their output checks and give the summary line.
    r = subprocess.run(
        [sys.executable, str(BENCH / "encode.py"), "--quick", "--only", "feedline-h264,feedline-png"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\| feedline \(Muxer \+ libx264\) \| [\d.,]+ \| .* \| ok \|", r.stdout), r.stdout
    assert "ENCODE h264 feedline/PyAV" in r.stdout


def test_png_benchmark_runs():
    # Pillow and SPDL are optional baselines; feedline must decode every file
    # to its photograph exactly and give the summary line.
    r = subprocess.run(
        [sys.executable, str(BENCH / "png.py"), "--quick", "--only", "feedline"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\| feedline \(decode_image\) \| [\d,]+ \| .* \| ok \|", r.stdout), r.stdout
    assert "PNG decode feedline/Pillow" in r.stdout
